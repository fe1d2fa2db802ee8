package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// cleanupTimeout bounds the deletion of a test's keys in its cleanup.
const cleanupTimeout = 10 * time.Second

var prefixCounter atomic.Uint64

// newPrefix returns a key prefix no other test of this process (nor, but
// for a 1 in 2^32 chance, of another process) uses: "t<counter>-<random>:".
func newPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return fmt.Sprintf("t%d-%s:", prefixCounter.Add(1), hex.EncodeToString(b[:]))
}

// Prefix returns a key prefix of the test's own, such as "t7-9f86d081:",
// and deletes every key that starts with it when the test finishes. Tests
// that share a server put all their keys under their prefix, so they can
// run in parallel and leave the server as they found it.
func (s *Server) Prefix(tb testing.TB) string {
	tb.Helper()
	prefix := newPrefix()
	tb.Cleanup(func() {
		if !s.running() { // stopped or killed by the test
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		defer func() { _ = c.Close() }()
		if err := deletePrefix(ctx, c, prefix); err != nil {
			tb.Errorf("redistest: delete keys %s* on %s: %v", prefix, s.Addr(), err)
		}
	})
	return prefix
}

// deletePrefix deletes the keys of one server that start with prefix: SCAN
// MATCH prefix*, then UNLINK each key. Keys go one per UNLINK, in a
// pipeline, because a cluster node refuses a multi-key command whose keys
// are in different slots.
func deletePrefix(ctx context.Context, c *redis.Client, prefix string) error {
	match := globEscape(prefix) + "*"
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			pipe := c.Pipeline()
			for _, key := range keys {
				pipe.Unlink(ctx, key)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// globEscape escapes the characters special to a Redis MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
