package rdb

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/rdb/transport/transporttest"
	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// newTestStore returns a Store on the shared test server, with a key
// prefix of the test's own, closed when the test ends, and its client
// (with hooks added before the Store is made).
func newTestStore(t *testing.T, hooks ...goredis.Hook) (*Store, *goredis.Client) {
	srv := redistest.Shared(t)
	client := srv.Client(t)
	for _, h := range hooks {
		client.AddHook(h)
	}
	s := New(client, Options{KeyPrefix: srv.Prefix(t), ResultsExpireIn: time.Hour, LeaseDuration: 10 * time.Second}, false)
	t.Cleanup(func() { _ = s.Close() })
	return s, client
}

// enqueueCounter counts the enqueue script calls a client sends.
type enqueueCounter struct {
	transporttest.CountingHook
	enqueues atomic.Int64
}

func (h *enqueueCounter) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, c := range cmds {
			if args := c.Args(); len(args) > 1 && args[0] == "evalsha" && args[1] == enqueueScript.Hash() {
				h.enqueues.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// TestConcurrentPublishesShareOneCall holds every batcher lane while
// publishes gather, then checks that they went in one enqueue call and
// that each got its own outcome: a duplicate is refused alone, a cancelled
// publish is not sent, the others land.
func TestConcurrentPublishesShareOneCall(t *testing.T) {
	t.Parallel()
	hook := &enqueueCounter{}
	s, client := newTestStore(t, hook)
	ctx := context.Background()
	const queue = "q"
	sig := func(id string) *tasks.Signature {
		return &tasks.Signature{UUID: id, Name: "n", RoutingKey: queue}
	}
	if err := s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{sig("taken")}, Pending: true}); err != nil {
		t.Fatal(err)
	}
	before := hook.enqueues.Load()

	// Hold every lane (a publish takes any idle one): each sender waits
	// in its op's transport.QueueFunc.
	hold, free := transporttest.LaneHolder(t, s.batch, queue)
	for range transport.Lanes {
		hold()
	}

	const publishes = 20
	errs := make([]error, publishes+1)
	var wg sync.WaitGroup
	publish := func(i int, ctx context.Context, sigs ...*tasks.Signature) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Publish(ctx, PublishParams{Tasks: sigs, Pending: true})
		}()
	}
	for i := range publishes {
		publish(i, ctx, sig(fmt.Sprintf("t%d", i)), sig(fmt.Sprintf("u%d", i)))
	}
	publish(publishes, ctx, sig("t-dup"), sig("taken")) // refused: "taken" is queued
	cancelled, cancel := context.WithCancel(ctx)
	cancelledErr := make(chan error, 1)
	go func() {
		cancelledErr <- s.Publish(cancelled, PublishParams{Tasks: []*tasks.Signature{sig("cancelled")}, Pending: true})
	}()
	// Every publish has joined the call waiting for the lane.
	joined := func() int {
		s.comb.mu.Lock()
		defer s.comb.mu.Unlock()
		c := s.comb.open[combineKey{queue: queue, implicit: true}]
		if c == nil {
			return 0
		}
		return len(c.reqs)
	}
	for deadline := time.Now().Add(10 * time.Second); joined() < publishes+2; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d publishes joined the call waiting for a lane", joined(), publishes+2)
		}
	}
	cancel()
	if err := <-cancelledErr; !errors.Is(err, context.Canceled) || !errors.Is(err, store.ErrNotSent) || errors.Is(err, store.ErrMaybeSent) {
		t.Errorf("publish cancelled while it waited: %v, want context.Canceled, not sent", err)
	}
	free()
	wg.Wait()

	if n := hook.enqueues.Load() - before; n != 1 {
		t.Errorf("%d enqueue calls for %d publishes, want 1", n, publishes+2)
	}
	for i := range publishes {
		if errs[i] != nil {
			t.Errorf("publish %d: %v", i, errs[i])
		}
	}
	if err := errs[publishes]; !errors.Is(err, store.ErrDuplicateTask) || !errors.Is(err, store.ErrNotSent) || errors.Is(err, store.ErrMaybeSent) {
		t.Errorf("publish with a queued task's id: %v, want ErrDuplicateTask, not sent", err)
	}
	qk := s.keys.queue(queue)
	ids, err := client.LRange(ctx, qk.pending, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"taken": true}
	for i := range publishes {
		want[fmt.Sprintf("t%d", i)], want[fmt.Sprintf("u%d", i)] = true, true
	}
	got := map[string]bool{}
	for _, id := range ids {
		if got[id] {
			t.Errorf("task %s pending twice", id)
		}
		got[id] = true
	}
	for id := range want {
		if !got[id] {
			t.Errorf("task %s not pending", id)
		}
	}
	for id := range got {
		if !want[id] {
			t.Errorf("task %s pending, want it not published", id)
		}
	}
}

// TestRepeatedPublishFindsWhetherItRan: a publish sent again after a lost
// reply (marked a repeat), whose task is not in its queue, queues it
// unless its state says this publish ran: a PENDING its workflow wrote
// before, or the outcome of an earlier task with the same UUID, does not.
func TestRepeatedPublishFindsWhetherItRan(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	const queue = "q"
	qk := s.keys.queue(queue)
	if err := s.registerQueue(ctx, queue); err != nil { // as Publish does
		t.Fatal(err)
	}
	repeat := func(sig *tasks.Signature, token string) {
		t.Helper()
		q := &enqueueArgs{queue: qk, implicit: true, keyed: true, groups: true}
		if err := s.addTask(q, sig); err != nil {
			t.Fatal(err)
		}
		if err := s.enqueueAlone(ctx, queue, q, token, true); err != nil {
			t.Fatalf("repeat of the publish of %s: %v", sig.UUID, err)
		}
	}
	queued := func(id string) bool {
		t.Helper()
		ids, err := client.LRange(ctx, qk.pending, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range ids {
			if q == id {
				return true
			}
		}
		return false
	}

	// A chord's callback: its PENDING written with its workflow, then its
	// first publish lost on the way.
	callback := &tasks.Signature{UUID: "callback", Name: "n", RoutingKey: queue}
	if err := s.WritePending(ctx, []*tasks.Signature{callback}); err != nil {
		t.Fatal(err)
	}
	repeat(callback, "tok1")
	if !queued(callback.UUID) {
		t.Fatal("a repeat whose first run never happened, of a task with a PENDING state written before, queued nothing")
	}

	// A task that ran under this publish (its SUCCESS names the token) is
	// not queued again; one whose state is an earlier task's is.
	ran := &tasks.Signature{UUID: "ran", Name: "n", RoutingKey: queue}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(client.HSet(ctx, s.keys.state(ran.UUID), "state", "SUCCESS", "name", "n", "pub", "tok2").Err())
	repeat(ran, "tok2")
	if queued(ran.UUID) {
		t.Fatal("a repeat whose task ran under it was queued again")
	}
	repeat(ran, "tok3")
	if !queued(ran.UUID) {
		t.Fatal("a repeat whose first run never happened, of a UUID an earlier task finished with, queued nothing")
	}
	if st, err := s.GetState(ctx, ran.UUID); err != nil || st.State != tasks.StatePending {
		t.Fatalf("state of the task sent again: %+v, %v; want PENDING", st, err)
	}

	// A state without a token was written when the task's hash was gone:
	// an earlier task's FAILURE (written by its canceller) does not say
	// this publish ran; an aggregation member's PENDING naming its
	// aggregate does.
	earlier := &tasks.Signature{UUID: "earlier", Name: "n", RoutingKey: queue}
	must(client.HSet(ctx, s.keys.state(earlier.UUID), "state", "FAILURE", "name", "n", "error", "cancelled").Err())
	repeat(earlier, "tok4")
	if !queued(earlier.UUID) {
		t.Fatal("a repeat whose first run never happened, of a UUID whose earlier task's FAILURE has no token, queued nothing")
	}
	member := &tasks.Signature{UUID: "member", Name: "n", RoutingKey: queue}
	must(client.HSet(ctx, s.keys.state(member.UUID), "state", "PENDING", "name", "n", "aggregate", "agg_1").Err())
	repeat(member, "tok5")
	if queued(member.UUID) {
		t.Fatal("a repeat of a member whose batch was built was queued again")
	}
}

// TestFirstRunAfterItsRepeatWritesNothing: the first run of a publish that
// reaches Redis after the run its sender sent again (held up on the way)
// writes nothing when that run queued its task, whether the task still
// waits or ran and was forgotten (its state says so), alone in its call
// (a made task: enqueue.lua's prelude) or combined with another publish;
// a first run whose task's state says nothing of the kind queues it.
func TestFirstRunAfterItsRepeatWritesNothing(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range []struct {
		name     string
		made     bool
		implicit bool
		setup    func(qk *queueKeys, id, state string) // state: the task's state key
		queued   bool
	}{
		{"made, queued by its repeat", true, true, func(qk *queueKeys, id, _ string) {
			must(client.HSet(ctx, qk.task+id, "msg", `{"Name":"n"}`, "state", "pending", "pub", "tok").Err())
		}, false},
		{"made, run and forgotten", true, true, func(_ *queueKeys, _, state string) {
			must(client.HSet(ctx, state, "state", "SUCCESS", "pub", "tok").Err())
		}, false},
		{"made, cancelled since", true, true, func(_ *queueKeys, _, state string) {
			must(client.HSet(ctx, state, "state", "FAILURE", "error", "cancelled").Err())
		}, false},
		{"made, its PENDING written before", true, false, func(_ *queueKeys, _, state string) {
			must(client.HSet(ctx, state, "state", "PENDING").Err())
		}, true},
		{"made, states written before, run and forgotten", true, false, func(_ *queueKeys, _, state string) {
			must(client.HSet(ctx, state, "state", "SUCCESS", "pub", "tok").Err())
		}, false},
		{"the caller's UUID, run and forgotten", false, true, func(_ *queueKeys, _, state string) {
			must(client.HSet(ctx, state, "state", "SUCCESS", "pub", "tok").Err())
		}, false},
		{"the caller's UUID, an earlier task's state", false, true, func(_ *queueKeys, _, state string) {
			must(client.HSet(ctx, state, "state", "SUCCESS", "pub", "earlier").Err())
		}, true},
	} {
		for _, combined := range []bool{false, true} {
			queue := fmt.Sprintf("q%d", i)
			if combined {
				queue += "c"
			}
			t.Run(fmt.Sprintf("%s, combined %v", c.name, combined), func(t *testing.T) {
				qk := s.keys.queue(queue)
				req := func(id, token string) *publishReq {
					q := &enqueueArgs{queue: qk, implicit: c.implicit, keyed: true, groups: true, made: c.made}
					must(s.addTask(q, &tasks.Signature{UUID: id, Name: "n", RoutingKey: queue}))
					return &publishReq{q: q, token: token}
				}
				id := "t_" + queue // a UUID of the subtest's own: state keys are not the queue's
				c.setup(qk, id, s.keys.state(id))
				rs := []*publishReq{req(id, "tok")}
				if combined {
					rs = append(rs, req("other_"+queue, "tok2"))
				}
				keys, args := enqueueCall(qk, rs)
				v, err := enqueueScript.Run(ctx, client, keys, args...).Result()
				must(err)
				replies, err := parseEnqueueReplies(v, len(rs))
				must(err)
				if err := publishOutcome(queue, replies[0]); err != nil {
					t.Fatalf("the first run: %v, want success", err)
				}
				want := []string{}
				if c.queued {
					want = append(want, id)
				}
				if combined {
					want = append(want, "other_"+queue)
				}
				got, err := client.LRange(ctx, qk.pending, 0, -1).Result()
				must(err)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("pending after the first run: %q, want %q", got, want)
				}
				if c.queued && c.implicit && client.Exists(ctx, s.keys.state(id)).Val() != 0 {
					t.Fatal("the earlier task's state is left: the task queued does not read as PENDING")
				}
			})
		}
	}
}
