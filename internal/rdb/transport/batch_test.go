package transport_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/rdb/transport/transporttest"
	"github.com/b6192125/machinist/internal/redistest"
)

func TestMain(m *testing.M) {
	os.Exit(redistest.RunMain(m))
}

func TestConcurrentCallersShareRoundTrips(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	hook := &transporttest.CountingHook{}
	client.AddHook(hook)
	prefix := srv.Prefix(t)
	b := transport.NewBatcher(client, transport.Replicas{})
	defer b.Close()
	ctx := context.Background()
	const callers = 200
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := fmt.Sprintf("%sk%d", prefix, i)
			err := b.Do(ctx, key, func(p goredis.Pipeliner) []goredis.Cmder {
				return []goredis.Cmder{p.Set(ctx, key, i, 0), p.Incr(ctx, key)}
			})
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	for i := 0; i < callers; i++ {
		if v, err := client.Get(ctx, fmt.Sprintf("%sk%d", prefix, i)).Int(); err != nil || v != i+1 {
			t.Fatalf("key %d = %d, %v; want %d", i, v, err, i+1)
		}
	}
	if n := hook.Pipelines.Load(); n >= callers {
		t.Fatalf("%d pipelines for %d concurrent callers: no batching", n, callers)
	}
}

// sharedBatcher returns a Batcher on the shared test server, closed when
// the test ends, its client and the test's key prefix.
func sharedBatcher(t *testing.T) (*transport.Batcher, *goredis.Client, string) {
	srv := redistest.Shared(t)
	client := srv.Client(t)
	b := transport.NewBatcher(client, transport.Replicas{})
	t.Cleanup(b.Close)
	return b, client, srv.Prefix(t)
}

func TestErrorsReachTheirCaller(t *testing.T) {
	t.Parallel()
	b, client, prefix := sharedBatcher(t)
	ctx := context.Background()
	client.Set(ctx, prefix+"str", "x", 0)
	good := b.Submit(ctx, "good", func(p goredis.Pipeliner) []goredis.Cmder {
		return []goredis.Cmder{p.Set(ctx, prefix+"ok", 1, 0)}
	})
	bad := b.Submit(ctx, "bad", func(p goredis.Pipeliner) []goredis.Cmder {
		return []goredis.Cmder{p.Incr(ctx, prefix+"str")} // not an integer
	})
	if err := good.Err(ctx); err != nil {
		t.Fatalf("good caller got %v", err)
	}
	if err := bad.Err(ctx); err == nil {
		t.Fatal("bad caller got no error")
	}
}

func TestRunScriptReloadsAfterFlush(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	client := srv.Client(t)
	b := transport.NewBatcher(client, transport.Replicas{})
	defer b.Close()
	ctx := context.Background()
	script := goredis.NewScript(`return redis.call("INCR", KEYS[1])`)
	if n, err := b.RunScript(ctx, "k", script, []string{"k"}).Int(); err != nil || n != 1 {
		t.Fatalf("first run: %d, %v", n, err)
	}
	client.ScriptFlush(ctx)
	if n, err := b.RunScript(ctx, "k", script, []string{"k"}).Int(); err != nil || n != 2 {
		t.Fatalf("after SCRIPT FLUSH: %d, %v", n, err)
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	b := transport.NewBatcher(srv.Client(t), transport.Replicas{})
	b.Close()
	b.Close()
	if err := b.Do(context.Background(), "k", func(p goredis.Pipeliner) []goredis.Cmder { return nil }); err != transport.ErrClosed {
		t.Fatalf("Do after Close: %v", err)
	}
}

// Calls with the same key run in the order they were made, even when they
// do not wait for each other.
func TestSameKeyKeepsOrder(t *testing.T) {
	t.Parallel()
	b, _, prefix := sharedBatcher(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for k := 0; k < 20; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			key := fmt.Sprintf("%slist%d", prefix, k)
			for i := 0; i < 50; i++ {
				i := i
				b.Go(key, func(p goredis.Pipeliner) []goredis.Cmder {
					return []goredis.Cmder{p.RPush(ctx, key, i)}
				}, nil)
			}
		}(k)
	}
	wg.Wait()
	for k := 0; k < 20; k++ {
		key := fmt.Sprintf("%slist%d", prefix, k)
		// A read through the same key's lane follows the writes.
		var got []string
		cmds, err := b.Submit(ctx, key, func(p goredis.Pipeliner) []goredis.Cmder {
			return []goredis.Cmder{p.LRange(ctx, key, 0, -1)}
		}).Wait(ctx)
		if err == nil {
			got, err = cmds[0].(*goredis.StringSliceCmd).Result()
		}
		if err != nil || len(got) != 50 {
			t.Fatalf("%s: %d values, %v", key, len(got), err)
		}
		for i, v := range got {
			if v != fmt.Sprint(i) {
				t.Fatalf("%s[%d] = %s: out of order", key, i, v)
			}
		}
	}
}

// Run sends at once on an idle lane when its key's lane is busy: it does
// not wait behind the pipeline that lane is sending, until every lane is.
func TestRunTakesAnIdleLane(t *testing.T) {
	t.Parallel()
	b, client, prefix := sharedBatcher(t)
	ctx := context.Background()
	hold, free := transporttest.LaneHolder(t, b, "k")
	// incr runs an INCR through Run and returns a channel closed once it
	// ran.
	incr := func() <-chan struct{} {
		t.Helper()
		ran := make(chan struct{})
		ok := b.Run(ctx, "k", func(p goredis.Pipeliner) []goredis.Cmder {
			return []goredis.Cmder{p.Incr(ctx, prefix+"n")}
		}, func([]goredis.Cmder) { close(ran) })
		if !ok {
			t.Fatal("Run refused")
		}
		return ran
	}
	ranAtOnce := func(ran <-chan struct{}) bool {
		select {
		case <-ran:
			return true
		default:
			return false
		}
	}
	counted := func(want int) {
		t.Helper()
		if n, err := client.Get(ctx, prefix+"n").Int(); err != nil || n != want {
			t.Fatalf("n = %d, %v; want %d", n, err, want)
		}
	}
	// Each Run while a lane is idle sends, on the caller's goroutine,
	// without waiting for the lanes held before it.
	for i := range transport.Lanes - 1 {
		hold()
		if !ranAtOnce(incr()) {
			t.Fatalf("with %d of %d lanes busy, Run returned before its commands ran", i+1, transport.Lanes)
		}
	}
	// Every lane busy: a Run waits in its key's lane, and its commands run
	// once the lanes are free again.
	hold()
	queued := incr()
	if ranAtOnce(queued) {
		t.Fatal("with every lane busy, Run's commands ran at once")
	}
	counted(transport.Lanes - 1)
	free()
	select {
	case <-queued:
	case <-time.After(10 * time.Second):
		t.Fatal("the Run queued behind busy lanes never ran")
	}
	counted(transport.Lanes)
}
