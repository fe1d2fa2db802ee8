package rdb

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
)

// TestIdleForwardRunsWhenRedisIsOutOfMemory: an idle queue's forward.lua
// writes nothing but its plan, and Redis refuses a script's first write
// while it is over maxmemory (noeviction): the run still succeeds, with no
// plan (its caller then runs it again within its most).
func TestIdleForwardRunsWhenRedisIsOutOfMemory(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // its own: it is made to run out of memory
	client := srv.Client(t)
	ctx := context.Background()
	s := New(client, Options{}, false)
	t.Cleanup(func() { _ = s.Close() })
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := client.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	f, err := s.Forward(ctx, "q", time.Second)
	if err != nil || f.More || f.Next >= 0 {
		t.Fatalf("idle Forward at maxmemory: %+v, %v; want nothing due and no error", f, err)
	}
	if n := client.Exists(ctx, strings.TrimSuffix(s.keys.queue("q").fwake, "fwake")+"fnext").Val(); n != 0 {
		t.Fatalf("a plan was written over maxmemory")
	}
}

// TestForwardTrimsCompletedByRedisClock: the completed tasks are trimmed
// by the clock that scored them (Redis's, in ack_success.lua), however far
// the host's is from it.
func TestForwardTrimsCompletedByRedisClock(t *testing.T) {
	t.Parallel()
	engine := redistest.StartEmbedded(t)
	client := engine.Client(t)
	ctx := context.Background()
	s := New(client, Options{KeyPrefix: strings.TrimSuffix(engine.Prefix(), ":"), CompletedRetention: time.Hour}, false)
	t.Cleanup(func() { _ = s.Close() })
	redisNow := time.Now().Add(24 * time.Hour)
	engine.SetTime(redisNow)
	completed := s.keys.queue("q").completed
	ms := redisNow.UnixMilli()
	client.ZAdd(ctx, completed, goredis.Z{Score: float64(ms - 1), Member: "ended"}, goredis.Z{Score: float64(ms + 1000), Member: "kept"})
	if _, err := s.Forward(ctx, "q", 0); err != nil {
		t.Fatal(err)
	}
	if got := client.ZRange(ctx, completed, 0, -1).Val(); len(got) != 1 || got[0] != "kept" {
		t.Fatalf("completed after Forward: %v, want [kept]", got)
	}
}
