package redisbroker_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	"github.com/b6192125/machinist/v1/tasks"
)

// woken is a broker on a single server whose queue's maintainer never
// polls (DelayedTasksPollPeriod an hour): only a wake (lib/due.lua) makes
// it promote a task before then.
type woken struct {
	b      *redisbroker.Broker
	client goredis.UniversalClient
	queue  string
	fnext  string             // the maintainer's plan: when it runs forward.lua next (ms)
	names  *brokers.TaskNames // of the aggregated task, notify
}

func newWoken(t *testing.T) *woken {
	return newWokenWith(t, time.Minute, clock.Real())
}

// newWokenWith is newWoken with leases of lease (of tasks and batches), its
// maintainer timed by clk.
func newWokenWith(t *testing.T, lease time.Duration, clk clock.Clock) *woken {
	t.Helper()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	cnf := (&config.Config{
		LeaseDuration: lease,
		Redis: &config.RedisConfig{
			KeyPrefix:              strings.TrimSuffix(srv.Prefix(t), ":"),
			DelayedTasksPollPeriod: int(time.Hour / time.Millisecond),
		},
	}).WithDefaults()
	opts := redisbroker.OptionsFrom(cnf)
	opts.OwnsStore, opts.Clock = true, clk
	b := redisbroker.NewOnStore(rdb.New(client, dial.Options(cnf), false), opts)
	t.Cleanup(func() { b.Close() })
	w := &woken{b: b, client: client, queue: "q", names: brokers.NewTaskNames([]string{"notify"})}
	w.fnext = cnf.Redis.KeyPrefix + ":{" + w.queue + "}:fnext"
	// A first Fetch starts the queue's maintainer, which plans its next
	// run an hour off: nothing is due. The Fetch waits on the empty queue
	// until the plan is seen.
	ctx, cancel := context.WithCancel(context.Background())
	fetched := make(chan error, 1)
	go func() {
		ds, err := w.b.Fetch(ctx, []string{w.queue}, 1, nil)
		if len(ds) > 0 {
			err = fmt.Errorf("took %d tasks from an empty queue", len(ds))
		}
		fetched <- err
	}()
	w.waitPlan(t, time.Now().Add(30*time.Minute))
	cancel()
	if err := <-fetched; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first Fetch: %v, want context.Canceled", err)
	}
	return w
}

// waitPlan waits until the maintainer plans its next run after after.
func (w *woken) waitPlan(t *testing.T, after time.Time) {
	t.Helper()
	ctx := ctxFor(t)
	for {
		v, err := w.client.Get(ctx, w.fnext).Result()
		if ms, perr := strconv.ParseInt(v, 10, 64); err == nil && perr == nil && ms > after.UnixMilli() {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the maintainer planned no run after %v (fnext %q, %v)", after, v, err)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not waiting in its place
	}
}

// fetch takes the next task of the queue, failing the test when none
// comes within 20 s (an hour without a wake).
func (w *woken) fetch(t *testing.T) *brokers.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		ds, err := w.b.Fetch(ctx, []string{w.queue}, 1, nil)
		if len(ds) == 1 {
			return ds[0]
		}
		if err != nil || ctx.Err() != nil {
			t.Fatalf("no task promoted within 20 s: the maintainer was not woken (%v)", err)
		}
	}
}

func (w *woken) publish(t *testing.T, sig *tasks.Signature) {
	t.Helper()
	sig.RoutingKey = w.queue
	if err := w.b.Publish(ctxFor(t), sig); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// TestMaintainerIsWokenByWhatComesDue: on a single server a queue's
// maintainer runs forward.lua when the next thing it has is due, and
// whatever comes due sooner wakes it: a task sent with an ETA, a retry, a
// task a rate limit holds back, an aggregation group's grace period, and a
// resume of its queue. Its own plan is an hour off (it never polls), so
// each of these fails without its wake.
func TestMaintainerIsWokenByWhatComesDue(t *testing.T) {
	t.Parallel()
	// A second off: a send lands well before it even on a slow runner, so
	// that the task waits (and a wake is needed) rather than going
	// straight to pending.
	soon := func() *time.Time { at := time.Now().Add(time.Second); return &at }

	// The maintainer waits for what forward.lua says, by Redis's clock:
	// a host clock half an hour behind it does not delay the task.
	for name, clk := range map[string]clock.Clock{"ETA": clock.Real(), "HostClockBehind": behind{clock.Real(), 30 * time.Minute}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWokenWith(t, time.Minute, clk)
			sig := &tasks.Signature{UUID: "task_later", Name: "add", ETA: soon()}
			w.publish(t, sig)
			if d := w.fetch(t); d.Signature.UUID != sig.UUID {
				t.Fatalf("fetched %s, want %s", d.Signature.UUID, sig.UUID)
			}
		})
	}

	// A debounced send that moves its holder's ETA sooner.
	t.Run("DebounceSooner", func(t *testing.T) {
		t.Parallel()
		w := newWoken(t)
		late := time.Now().Add(time.Hour)
		unique := func(id string, eta *time.Time) *tasks.Signature {
			return &tasks.Signature{UUID: id, Name: "add", ETA: eta, UniqueFor: 2 * time.Hour, UniqueKey: "k", UniqueReplace: true}
		}
		w.publish(t, unique("task_holder", &late))
		w.waitPlan(t, time.Now().Add(30*time.Minute))
		sig := unique("task_sooner", soon())
		sig.RoutingKey = w.queue
		if err := w.b.Publish(ctxFor(t), sig); err != nil { // it replaces the holder's ETA
			t.Fatalf("Publish of the debounced send: %v", err)
		}
		if d := w.fetch(t); d.Signature.UUID != "task_holder" {
			t.Fatalf("fetched %s, want task_holder", d.Signature.UUID)
		}
	})

	t.Run("Retry", func(t *testing.T) {
		t.Parallel()
		w := newWoken(t)
		w.publish(t, &tasks.Signature{UUID: "task_again", Name: "add"})
		d := w.fetch(t)
		if err := w.b.Retry(ctxFor(t), d, *soon(), "later"); err != nil {
			t.Fatalf("Retry: %v", err)
		}
		if again := w.fetch(t); again.Signature.UUID != d.Signature.UUID || again.Retried != 1 {
			t.Fatalf("fetched %s (retried %d), want %s retried once", again.Signature.UUID, again.Retried, d.Signature.UUID)
		}
	})

	t.Run("RateLimit", func(t *testing.T) {
		t.Parallel()
		w := newWoken(t)
		limit := &tasks.Limit{Key: "api", Rate: 1, Per: time.Second}
		w.publish(t, &tasks.Signature{UUID: "task_first", Name: "call", Limit: limit})
		w.publish(t, &tasks.Signature{UUID: "task_second", Name: "call", Limit: limit})
		first := w.fetch(t) // the second is scheduled at its slot by this fetch or the next
		if second := w.fetch(t); first.Signature.UUID != "task_first" || second.Signature.UUID != "task_second" {
			t.Fatalf("fetched %s then %s, want task_first then task_second", first.Signature.UUID, second.Signature.UUID)
		}
	})

	t.Run("AggregationGrace", func(t *testing.T) {
		t.Parallel()
		w := newWoken(t)
		w.announce(t, brokers.AggregationPolicy{GracePeriod: 100 * time.Millisecond})
		w.publish(t, &tasks.Signature{UUID: "task_member", Name: "notify", AggregationKey: "alice"})
		w.waitDue(t)
	})

	// A policy announced anew that makes a waiting group due sooner.
	t.Run("PolicyChangedSooner", func(t *testing.T) {
		t.Parallel()
		w := newWoken(t)
		w.announce(t, brokers.AggregationPolicy{GracePeriod: time.Hour})
		w.publish(t, &tasks.Signature{UUID: "task_member", Name: "notify", AggregationKey: "alice"})
		w.waitPlan(t, time.Now().Add(30*time.Minute))
		w.announce(t, brokers.AggregationPolicy{GracePeriod: 200 * time.Millisecond})
		w.waitDue(t)
	})

	t.Run("AggregationGraceMadeUUID", func(t *testing.T) {
		// A member whose UUID its send made takes enqueue.lua's prelude.
		t.Parallel()
		w := newWoken(t)
		w.announce(t, brokers.AggregationPolicy{GracePeriod: 100 * time.Millisecond})
		sig := &tasks.Signature{UUID: "task_made", Name: "notify", AggregationKey: "alice", RoutingKey: w.queue}
		if err := w.b.PublishPending(ctxFor(t), store.SendParams{Tasks: []*tasks.Signature{sig}, Fresh: true}); err != nil {
			t.Fatalf("PublishPending: %v", err)
		}
		w.waitDue(t)
	})

	// A batch given back (its aggregator failed) is due again at its retry
	// time, well before its lease (a minute) would have ended.
	t.Run("BatchRetry", func(t *testing.T) {
		t.Parallel()
		w := newWoken(t)
		batch := w.fullBatch(t)
		if err := w.b.RetryBatch(ctxFor(t), batch, *soon(), "aggregator failed"); err != nil {
			t.Fatalf("RetryBatch: %v", err)
		}
		w.waitDue(t)
	})

	// A batch whose holder stops renewing its lease is due when the lease
	// ends.
	t.Run("BatchLeaseEnds", func(t *testing.T) {
		t.Parallel()
		w := newWokenWith(t, 300*time.Millisecond, clock.Real())
		w.fullBatch(t)
		w.waitDue(t) // the lease ended: claimed again
		w.waitDue(t) // and its second lease ends
	})

	t.Run("Resume", func(t *testing.T) {
		t.Parallel()
		w := newWoken(t)
		w.announce(t, brokers.AggregationPolicy{GracePeriod: 100 * time.Millisecond})
		if err := w.b.PauseQueue(ctxFor(t), w.queue); err != nil {
			t.Fatalf("PauseQueue: %v", err)
		}
		w.publish(t, &tasks.Signature{UUID: "task_member", Name: "notify", AggregationKey: "alice"})
		// The member's join woke the maintainer, which, its queue paused,
		// wakes no worker for the group and plans its next run an hour
		// off: only the resume wakes it again.
		w.waitPlan(t, time.Now().Add(30*time.Minute))
		if err := w.b.ResumeQueue(ctxFor(t), w.queue); err != nil {
			t.Fatalf("ResumeQueue: %v", err)
		}
		w.waitDue(t)
	})
}

// waitDue waits for the maintainer to wake the workers of notify for a
// due group, failing the test when it has not within 20 s.
func (w *woken) waitDue(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := w.b.WaitDue(ctx, []string{w.queue}, w.names, time.Hour); err != nil {
		t.Fatalf("WaitDue: %v: the maintainer did not wake the group's workers", err)
	}
	if b, err := w.b.ClaimBatch(ctxFor(t), []string{w.queue}, w.names); err != nil || b == nil {
		t.Fatalf("ClaimBatch after the wake: %v, %v; want the group", b, err)
	}
}

// announce announces an aggregator of notify with policy.
func (w *woken) announce(t *testing.T, policy brokers.AggregationPolicy) {
	t.Helper()
	if err := w.b.AnnounceAggregators(ctxFor(t), []string{w.queue}, map[string]brokers.AggregationPolicy{"notify": policy}, time.Minute); err != nil {
		t.Fatalf("AnnounceAggregators: %v", err)
	}
}

// fullBatch announces an aggregator of notify that takes two members a
// batch, sends two and claims their batch.
func (w *woken) fullBatch(t *testing.T) *brokers.Batch {
	t.Helper()
	w.announce(t, brokers.AggregationPolicy{MaxSize: 2})
	w.publish(t, &tasks.Signature{UUID: "task_member1", Name: "notify", AggregationKey: "alice"})
	w.publish(t, &tasks.Signature{UUID: "task_member2", Name: "notify", AggregationKey: "alice"})
	// The second member filled the group, whose workers it woke itself.
	if err := w.b.WaitDue(ctxFor(t), []string{w.queue}, w.names, time.Hour); err != nil {
		t.Fatalf("WaitDue: %v", err)
	}
	b, err := w.b.ClaimBatch(ctxFor(t), []string{w.queue}, w.names)
	if err != nil || b == nil {
		t.Fatalf("ClaimBatch: %v, %v; want the full group", b, err)
	}
	return b
}

// behind is a clock lag behind the wall clock (and Redis's).
type behind struct {
	clock.Clock
	lag time.Duration
}

func (b behind) Now() time.Time                  { return time.Now().Add(-b.lag) }
func (b behind) Since(t time.Time) time.Duration { return b.Now().Sub(t) }
func (b behind) Until(t time.Time) time.Duration { return t.Sub(b.Now()) }
