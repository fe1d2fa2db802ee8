package worker

import (
	"context"
	"errors"
	"slices"
	"testing"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// A slot passes from each task to the next of its queue in the task's
// acknowledgement (brokers.Relay): a backlog runs after one fetch.
func TestSettleTakesTheNextTask(t *testing.T) {
	t.Parallel()
	const total = 20
	h := newHarness(t, &config.Config{})
	h.spy.slots = 1
	h.reg["work"] = func() error { return nil }
	sigs := make([]*tasks.Signature, total)
	for i := range sigs {
		sigs[i] = newSig("work")
		h.publish(sigs[i])
	}
	r := h.start(h.params())
	waitFor(t, "every task to succeed", func() bool {
		return slices.IndexFunc(sigs, func(s *tasks.Signature) bool { return h.state(s.UUID) != tasks.StateSuccess }) < 0
	})
	if err := r.stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	c := h.spy.counts()
	if c.taken != total-1 || c.fetches > 2 {
		t.Errorf("%d tasks taken by acknowledgements and %d fetches, want %d and at most 2 (the first task's, and the wait after the last)", c.taken, c.fetches, total-1)
	}
	h.spy.mu.Lock()
	defer h.spy.mu.Unlock()
	for _, v := range h.spy.overAsked {
		t.Errorf("asked for more than the free slots: %s", v)
	}
}

// A worker that has stopped fetching takes no next task in an
// acknowledgement: the task it finishes during the shutdown is its last.
func TestStoppingWorkerTakesNoNextTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{ShutdownTimeout: waitTimeout})
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	h.reg["slow"] = func(ctx context.Context) error {
		started <- struct{}{}
		<-release
		return nil
	}
	first, second := newSig("slow"), newSig("slow")
	h.publish(first, second)
	r := h.start(h.params())

	recv(t, started, "the first task to start")
	r.cancel()
	close(release)
	if err := r.wait(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if got := h.state(first.UUID); got != tasks.StateSuccess {
		t.Errorf("first task: state %q, want %q", got, tasks.StateSuccess)
	}
	if p := h.pending(); !slices.Equal(p, []string{second.UUID}) {
		t.Errorf("pending after the stop: %v, want the second task %s", p, second.UUID)
	}
	if c := h.spy.counts(); c.taken != 0 {
		t.Errorf("%d tasks taken by acknowledgements after the stop, want 0", c.taken)
	}
}

// A worker takes a next task in an acknowledgement only from a queue every
// fetch tries first: its only queue, or its first by strict priority (or a
// shard of it).
func TestQueueOrderFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		queues  []string
		weights []int
		strict  bool
		q       string
		want    bool
	}{
		{"only queue", []string{"a"}, nil, false, "a", true},
		{"another queue", []string{"a"}, nil, false, "b", false},
		{"weighted", []string{"a", "b"}, []int{3, 1}, false, "a", false},
		{"strict, first", []string{"low", "high"}, []int{1, 5}, true, "high", true},
		{"strict, not first", []string{"low", "high"}, []int{1, 5}, true, "low", false},
		{"a shard of the only queue", []string{"a"}, nil, false, "a{3", true},
		{"a shard of another queue", []string{"a"}, nil, false, "b{3", false},
		{"not a shard name", []string{"a"}, nil, false, "a{x", false},
		{"strict, a shard of the first", []string{"low", "high"}, []int{1, 5}, true, "high{2", true},
		{"strict, a shard of another", []string{"low", "high"}, []int{1, 5}, true, "low{2", false},
	} {
		if got := newQueueOrder(tc.queues, tc.weights, tc.strict).first(tc.q); got != tc.want {
			t.Errorf("%s: first(%q) = %t, want %t", tc.name, tc.q, got, tc.want)
		}
	}
}

// gatedRelay is the memory broker with an AckTake that waits for the test.
type gatedRelay struct {
	brokers.LeaseBroker
	acking  chan struct{} // receives when an AckTake begins
	proceed chan struct{} // closed to let AckTakes go on
}

func (b *gatedRelay) AckTake(ctx context.Context, d *brokers.Delivery, take brokers.Take) (*brokers.Delivery, error) {
	b.acking <- struct{}{}
	<-b.proceed
	return b.LeaseBroker.(brokers.Relay).AckTake(ctx, d, take)
}

// A task an acknowledgement takes while the worker aborts is put back
// before Run returns, whether it started before shutdown gave up on the
// running tasks (then it is abandoned with them) or after (then it is not
// started): shutdown waits for the settle that took it.
func TestAbortPutsBackTheTaskASettleTook(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{})
	h.reg["work"] = func() error { return nil }
	h.reg["block"] = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	first, second := newSig("work"), newSig("block")
	h.publish(first, second)
	b := &gatedRelay{LeaseBroker: h.mem, acking: make(chan struct{}, 1), proceed: make(chan struct{})}
	p := h.params()
	p.Broker = b
	r := h.start(p)

	recv(t, b.acking, "the first task's acknowledgement")
	r.w.Abort()
	close(b.proceed)
	if err := r.wait(t); !errors.Is(err, ErrAborted) {
		t.Fatalf("Run = %v, want ErrAborted", err)
	}
	if p := h.pending(); !slices.Equal(p, []string{second.UUID}) {
		info, _ := h.mem.QueueInfo(context.Background(), testQueue)
		t.Errorf("pending when Run returned: %v (%+v; first %s), want the task the acknowledgement took, %s, put back", p, info, h.state(first.UUID), second.UUID)
	}
}
