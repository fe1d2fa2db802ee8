package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/rdb/transport/transporttest"
	"github.com/b6192125/machinist/internal/redistest"
)

// stalledBatcher returns a Batcher whose client reaches the shared test
// server through a proxy, the proxy, a client that reaches the server
// directly, and the test's key prefix.
func stalledBatcher(t *testing.T) (*transport.Batcher, *redistest.Proxy, *goredis.Client, string) {
	srv := redistest.Shared(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	client := goredis.NewClient(&goredis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	b := transport.NewBatcher(client, transport.Replicas{})
	t.Cleanup(b.Close)
	t.Cleanup(proxy.Unstall) // before b.Close, which waits for the lanes
	return b, proxy, srv.Client(t), srv.Prefix(t)
}

// TestCallerLeavesASharedPipelineAtItsDeadline: two callers share a
// pipeline whose reply is held up; the one whose context ends returns
// then, saying its commands may have run, and the pipeline goes on for the
// other, whose commands and the first's run once the reply comes.
func TestCallerLeavesASharedPipelineAtItsDeadline(t *testing.T) {
	t.Parallel()
	b, proxy, direct, prefix := stalledBatcher(t)
	ctx := context.Background()
	set := func(key string) transport.QueueFunc {
		return func(p goredis.Pipeliner) []goredis.Cmder { return []goredis.Cmder{p.Set(ctx, prefix+key, "1", 0)} }
	}
	// Both calls go in the lane's next pipeline: the lane is busy until
	// both are queued.
	hold, free := transporttest.LaneHolder(t, b, "k")
	hold()
	proxy.Stall()
	patient := b.Submit(ctx, "k", set("patient"))
	patientErr := make(chan error, 1)
	go func() { patientErr <- patient.Err(ctx) }()
	err := transporttest.ReturnsBy(t, 300*time.Millisecond, proxy.Unstall, func(ctx context.Context) error {
		p := b.Submit(ctx, "k", set("hasty"))
		free()
		return p.Err(ctx)
	})
	if !errors.Is(err, context.DeadlineExceeded) || !transport.OutcomeUnknown(err) {
		t.Errorf("the caller whose context ended: %v, want context.DeadlineExceeded, its commands' outcome unknown", err)
	}
	select {
	case err := <-patientErr:
		t.Fatalf("the other caller returned while the reply was held up: %v", err)
	default:
	}
	proxy.Unstall()
	if err := <-patientErr; err != nil {
		t.Fatalf("the other caller, once the reply came: %v", err)
	}
	for _, key := range []string{"patient", "hasty"} {
		if n := direct.Exists(ctx, prefix+key).Val(); n != 1 {
			t.Errorf("the %s caller's command did not run", key)
		}
	}
}

// TestCallerLeavingQueuedCommandsDropsThem: a caller whose context ends
// while its commands wait for their pipeline returns then, saying they
// were not sent, and they are not: a later call through the same lane
// finds them not run.
func TestCallerLeavingQueuedCommandsDropsThem(t *testing.T) {
	t.Parallel()
	b, client, prefix := sharedBatcher(t)
	ctx := context.Background()
	hold, free := transporttest.LaneHolder(t, b, "k")
	hold()
	err := transporttest.ReturnsBy(t, 300*time.Millisecond, free, func(ctx context.Context) error {
		return b.Do(ctx, "k", func(p goredis.Pipeliner) []goredis.Cmder {
			return []goredis.Cmder{p.Set(ctx, prefix+"dropped", "1", 0)}
		})
	})
	if !errors.Is(err, context.DeadlineExceeded) || transport.OutcomeUnknown(err) || !errors.Is(err, transport.ErrUnsent) {
		t.Errorf("the caller whose context ended: %v, want context.DeadlineExceeded, not sent", err)
	}
	free()
	if err := b.Do(ctx, "k", func(p goredis.Pipeliner) []goredis.Cmder { return []goredis.Cmder{p.Ping(ctx)} }); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, prefix+"dropped").Val(); n != 0 {
		t.Error("the commands of a caller that left before they were sent ran")
	}
}

// TestCallerOnAnIdleLaneReturnsAtItsDeadline: a caller that finds its lane
// idle returns at its deadline while Redis does not answer, whether its
// client honours context deadlines (it then sends its commands itself, in
// a pipeline that deadline bounds) or not (a goroutine sends for it); the
// lane serves the next caller once Redis answers again.
func TestCallerOnAnIdleLaneReturnsAtItsDeadline(t *testing.T) {
	t.Parallel()
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", honours), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Shared(t)
			proxy := redistest.StartProxy(t, srv.Addr())
			client := goredis.NewClient(&goredis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: honours})
			t.Cleanup(func() { _ = client.Close() })
			b := transport.NewBatcher(client, transport.Replicas{})
			t.Cleanup(b.Close)
			t.Cleanup(proxy.Unstall) // before b.Close, which waits for the lanes
			if got := b.SendingFor(ctxWithDeadline(t)); (got == transport.InlineAlone) != honours {
				t.Fatalf("a caller with a deadline sends as %d", got)
			}
			prefix := srv.Prefix(t)
			ctx := context.Background()
			set := func(key string) transport.QueueFunc {
				return func(p goredis.Pipeliner) []goredis.Cmder { return []goredis.Cmder{p.Set(ctx, prefix+key, "1", 0)} }
			}
			proxy.Stall()
			err := transporttest.ReturnsBy(t, 300*time.Millisecond, proxy.Unstall, func(ctx context.Context) error {
				return b.Do(ctx, "k", set("hasty"))
			})
			if !errors.Is(err, context.DeadlineExceeded) || !transport.OutcomeUnknown(err) {
				t.Errorf("the caller whose context ended: %v, want context.DeadlineExceeded, its commands' outcome unknown", err)
			}
			proxy.Unstall()
			if err := b.Do(ctxWithDeadline(t), "k", set("next")); err != nil {
				t.Fatalf("the next caller: %v", err)
			}
			if n := srv.Client(t).Exists(ctx, prefix+"next").Val(); n != 1 {
				t.Error("the next caller's command did not run")
			}
		})
	}
}

// ctxWithDeadline returns a context that ends after 30 s, or with the
// test.
func ctxWithDeadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestCommandCutByItsDeadlineSaysSo: a command a client cut at its
// caller's deadline, which it reports as an i/o timeout (a Cluster client's
// write, seen under load), is given an error that matches
// context.DeadlineExceeded and leaves its outcome unknown; a reply, or
// redis.Nil, is left as it is.
func TestCommandCutByItsDeadlineSaysSo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	timeout := &net.OpError{Op: "write", Net: "tcp", Err: os.ErrDeadlineExceeded}
	cut, reply, none := goredis.NewCmd(ctx), goredis.NewCmd(ctx), goredis.NewCmd(ctx)
	cut.SetErr(timeout)
	reply.SetErr(goredis.Nil)
	transport.DeadlineCut(ctx, []goredis.Cmder{cut, reply, none})
	if err := cut.Err(); !errors.Is(err, context.DeadlineExceeded) || !transport.OutcomeUnknown(err) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a command cut at the deadline: %v, want context.DeadlineExceeded as well as the i/o timeout, its outcome unknown", err)
	}
	if reply.Err() != goredis.Nil || none.Err() != nil {
		t.Errorf("a reply and a command that succeeded: %v, %v; want them as they were", reply.Err(), none.Err())
	}
}
