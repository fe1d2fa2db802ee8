package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
)

// Resignal leaves a wake-up token on queue's notify list (at most one), for
// a token taken but not used. It is best effort: without it an idle worker
// still looks within BlockTimeout.
func (s *Store) Resignal(queue string) {
	if queue == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	notify := s.keys.queue(queue).notify
	pipe := s.client.Pipeline()
	pipe.LPush(ctx, notify, "1")
	pipe.LTrim(ctx, notify, 0, 0)
	_, _ = pipe.Exec(ctx)
}

// blockTimeout is how long one BLPOP may block: BlockTimeout, but less than
// the client's read timeout and no later than ctx's deadline, because
// go-redis does not interrupt a blocking command when ctx ends.
func (s *Store) blockTimeout(ctx context.Context) time.Duration {
	timeout := s.opts.BlockTimeout
	if read := s.readTimeout(); read > 0 {
		timeout = min(timeout, read/2)
	}
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	return max(timeout, 10*time.Millisecond)
}

// readTimeout is the client's own read timeout (the client may have been
// made by the caller, not from the config); 0 means none.
func (s *Store) readTimeout() time.Duration {
	var read time.Duration
	switch c := s.client.(type) {
	case *goredis.Client:
		read = c.Options().ReadTimeout
	case *goredis.ClusterClient:
		read = c.Options().ReadTimeout
	case *goredis.Ring:
		read = c.Options().ReadTimeout
	default:
		return 3 * time.Second
	}
	switch {
	case read == 0:
		return 3 * time.Second // go-redis's default
	case read < 0:
		return 0 // no timeout
	}
	return read
}

// blpop pops a wake-up token from one of keys, blocking up to timeout
// (BLPOP with a fractional timeout, which go-redis's BLPop rounds to whole
// seconds). It returns the key the token came from, or goredis.Nil when the
// time ran out.
func (s *Store) blpop(ctx context.Context, timeout time.Duration, keys ...string) (string, error) {
	args := make([]interface{}, 0, len(keys)+2)
	args = append(args, "blpop")
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, strconv.FormatFloat(timeout.Seconds(), 'f', 3, 64))
	cmd := s.client.Do(ctx, args...)
	if err := cmd.Err(); err != nil {
		return "", err
	}
	return parseBlpopReply(cmd.Val(), keys)
}

// Wait blocks until a wake-up token arrives on one of the queues' notify
// lists, or, with names, on the lists that wake the workers with those
// names for the tasks rerouted to them (route.go), or for at most
// BlockTimeout. It returns the queue whose token it took, or "" when the
// time ran out.
func (s *Store) Wait(ctx context.Context, queues []string, names *store.TaskNames) (string, error) {
	byNotify := make(map[string]string, len(queues))
	groups := make([][]string, 0, len(queues)) // by queue: one slot each
	for _, q := range queues {
		qk := s.keys.queue(q)
		keys := []string{qk.notify}
		if names != nil {
			keys = append(keys, qk.namesNotify(names))
		}
		for _, k := range keys {
			byNotify[k] = q
		}
		groups = append(groups, keys)
	}
	key, err := s.blpopAny(ctx, s.blockTimeout(ctx), groups)
	switch {
	case err == nil:
		return byNotify[key], nil
	case transport.Expired(ctx) != nil: // perhaps what cut the read
		return "", transport.Expired(ctx)
	}
	return "", fmt.Errorf("wait for tasks: %w", err)
}

// blpopAny takes a wake-up token from one of the lists of groups (each
// group's lists in one slot), waiting for at most timeout, and returns the
// list it came from, or "" when the time ran out. On a single server one
// BLPOP waits on them all; on Redis Cluster, where the groups live in
// different slots, one BLPOP per group waits in parallel and the first
// token is taken: a token another takes after that is given back to its
// list, for another worker.
func (s *Store) blpopAny(ctx context.Context, timeout time.Duration, groups [][]string) (string, error) {
	if !s.cluster || len(groups) == 1 {
		var keys []string
		for _, g := range groups {
			keys = append(keys, g...)
		}
		key, err := s.blpop(ctx, timeout, keys...)
		if errors.Is(err, goredis.Nil) {
			return "", nil
		}
		return key, err
	}
	type wake struct {
		key string
		err error
	}
	woke := make(chan wake, len(groups))
	var settled atomic.Bool
	defer settled.Store(true)
	for _, keys := range groups {
		go func() {
			key, err := s.blpop(ctx, timeout, keys...)
			switch {
			case errors.Is(err, goredis.Nil):
				err = errTimeout
			case err == nil && !settled.CompareAndSwap(false, true):
				s.giveBack(key)
				return
			}
			woke <- wake{key: key, err: err}
		}()
	}
	for range groups {
		w := <-woke
		if w.err == nil {
			return w.key, nil
		}
		if w.err != errTimeout {
			return "", w.err
		}
	}
	return "", nil
}

// giveBack leaves a wake-up token on list again (at most one): a token
// taken by a wait that had already returned.
func (s *Store) giveBack(list string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pipe := s.client.Pipeline()
	pipe.LPush(ctx, list, "1")
	pipe.LTrim(ctx, list, 0, 0)
	_, _ = pipe.Exec(ctx)
}

var errTimeout = errors.New("timeout")
