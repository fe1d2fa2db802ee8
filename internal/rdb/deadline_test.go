package rdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// callMargin is how long past its deadline a call may return in these
// tests, while Redis stays unreachable for longer: far more than returning
// takes, less than the read timeouts a call must not wait for.
const callMargin = 2 * time.Second

// returnsBy runs call with a context that ends after timeout and returns
// its error, failing the test when call has not returned callMargin past
// that deadline (it then waits for call to return after release, which
// lets Redis answer again).
func returnsBy(t *testing.T, timeout time.Duration, release func(), call func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	watchdog := time.NewTimer(timeout + callMargin)
	defer watchdog.Stop()
	select {
	case err := <-done:
		return err
	case <-watchdog.C:
		release()
		err := <-done
		t.Errorf("the call was still waiting %v past its %v deadline; it returned %v once Redis answered again", callMargin, timeout, err)
		return err
	}
}

// stalledBatcher returns a Batcher whose client reaches the shared test
// server through a proxy, the proxy, a client that reaches the server
// directly, and the test's key prefix.
func stalledBatcher(t *testing.T) (*Batcher, *redistest.Proxy, *goredis.Client, string) {
	srv := redistest.Shared(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	client := goredis.NewClient(&goredis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	b := NewBatcher(client)
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
	set := func(key string) QueueFunc {
		return func(p goredis.Pipeliner) []goredis.Cmder { return []goredis.Cmder{p.Set(ctx, prefix+key, "1", 0)} }
	}
	// Both calls go in the lane's next pipeline: the lane is busy until
	// both are queued.
	hold, free := laneHolder(t, b, "k")
	hold()
	proxy.Stall()
	patient := b.Submit(ctx, "k", set("patient"))
	patientErr := make(chan error, 1)
	go func() { patientErr <- patient.Err(ctx) }()
	err := returnsBy(t, 300*time.Millisecond, proxy.Unstall, func(ctx context.Context) error {
		p := b.Submit(ctx, "k", set("hasty"))
		free()
		return p.Err(ctx)
	})
	if !errors.Is(err, context.DeadlineExceeded) || !outcomeUnknown(err) {
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
	hold, free := laneHolder(t, b, "k")
	hold()
	err := returnsBy(t, 300*time.Millisecond, free, func(ctx context.Context) error {
		return b.Do(ctx, "k", func(p goredis.Pipeliner) []goredis.Cmder {
			return []goredis.Cmder{p.Set(ctx, prefix+"dropped", "1", 0)}
		})
	})
	if !errors.Is(err, context.DeadlineExceeded) || outcomeUnknown(err) || !errors.Is(err, errUnsent) {
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

// TestPublishesEndAtTheirDeadline: a publish returns at its deadline
// while Redis does not answer, saying whether it may have been sent: a
// publish whose call went out may have been (and is, once Redis answers);
// one whose call waited behind busy lanes was not (and is not).
func TestPublishesEndAtTheirDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	client := goredis.NewClient(&goredis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	s := New(client, Options{KeyPrefix: srv.Prefix(t), ResultsExpireIn: time.Hour, LeaseDuration: 10 * time.Second}, false)
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(proxy.Unstall) // before s.Close, which waits for the lanes
	ctx := context.Background()
	const queue = "q"
	sig := func(id string) []*tasks.Signature {
		return []*tasks.Signature{{UUID: id, Name: "n", RoutingKey: queue}}
	}
	if err := s.Publish(ctx, PublishParams{Tasks: sig("first"), Pending: true}); err != nil { // the queue known, its shards read
		t.Fatal(err)
	}

	proxy.Stall()
	err := returnsBy(t, 300*time.Millisecond, proxy.Unstall, func(ctx context.Context) error {
		return s.Publish(ctx, PublishParams{Tasks: sig("sent"), Pending: true})
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrMaybeSent) || errors.Is(err, store.ErrNotSent) {
		t.Errorf("publish whose call went out: %v, want context.DeadlineExceeded and ErrMaybeSent only", err)
	}
	// Its call holds a lane until Redis answers: with every other lane
	// held, the next publish waits behind them.
	hold, free := laneHolder(t, s.batch, queue)
	for range Lanes - 1 {
		hold()
	}
	err = returnsBy(t, 300*time.Millisecond, func() { free(); proxy.Unstall() }, func(ctx context.Context) error {
		return s.Publish(ctx, PublishParams{Tasks: sig("unsent"), Pending: true})
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrNotSent) || errors.Is(err, store.ErrMaybeSent) {
		t.Errorf("publish whose call waited for a lane: %v, want context.DeadlineExceeded and ErrNotSent only", err)
	}
	proxy.Unstall()
	free()
	// Through the lanes again, after the held calls.
	if err := s.Publish(ctx, PublishParams{Tasks: sig("last"), Pending: true}); err != nil {
		t.Fatal(err)
	}
	pending, err := srv.Client(t).LRange(ctx, s.keys.queue(queue).pending, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, id := range pending {
		got[id] = true
	}
	if !got["sent"] || got["unsent"] || !got["last"] {
		t.Errorf("pending %v: want sent (its reply was held up) and last, not unsent (never sent)", pending)
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
			b := NewBatcher(client)
			t.Cleanup(b.Close)
			t.Cleanup(proxy.Unstall) // before b.Close, which waits for the lanes
			if got := b.sendingFor(ctxWithDeadline(t)); (got == inlineAlone) != honours {
				t.Fatalf("a caller with a deadline sends as %d", got)
			}
			prefix := srv.Prefix(t)
			ctx := context.Background()
			set := func(key string) QueueFunc {
				return func(p goredis.Pipeliner) []goredis.Cmder { return []goredis.Cmder{p.Set(ctx, prefix+key, "1", 0)} }
			}
			proxy.Stall()
			err := returnsBy(t, 300*time.Millisecond, proxy.Unstall, func(ctx context.Context) error {
				return b.Do(ctx, "k", set("hasty"))
			})
			if !errors.Is(err, context.DeadlineExceeded) || !outcomeUnknown(err) {
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
	deadlineCut(ctx, []goredis.Cmder{cut, reply, none})
	if err := cut.Err(); !errors.Is(err, context.DeadlineExceeded) || !outcomeUnknown(err) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a command cut at the deadline: %v, want context.DeadlineExceeded as well as the i/o timeout, its outcome unknown", err)
	}
	if reply.Err() != goredis.Nil || none.Err() != nil {
		t.Errorf("a reply and a command that succeeded: %v, %v; want them as they were", reply.Err(), none.Err())
	}
}
