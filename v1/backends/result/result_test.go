package result

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/waitfor"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/memory"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// countingBackend counts GetState calls.
type countingBackend struct {
	fullBackend
	reads atomic.Int64
}

// fullBackend is a backend with both sets of methods, hiding any others.
type fullBackend interface {
	backends.Backend
	backends.ContextBackend
}

func (c *countingBackend) GetStateContext(ctx context.Context, uuid string) (*tasks.TaskState, error) {
	c.reads.Add(1)
	return c.fullBackend.GetStateContext(ctx, uuid)
}

func newBackend(t *testing.T) *countingBackend {
	b := memory.New(memory.OptionsFrom((&config.Config{}).WithDefaults()))
	t.Cleanup(func() { b.Close() })
	return &countingBackend{fullBackend: b}
}

func sigs(n int) []*tasks.Signature {
	out := make([]*tasks.Signature, n)
	for i := range out {
		out[i], _ = tasks.NewSignature("t", nil)
	}
	return out
}

func TestChordGetReadsOnlyTheCallbackWhenItSucceeded(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := context.Background()
	members, cb := sigs(100), sigs(1)[0]
	for _, m := range members {
		b.SetStateSuccessContext(ctx, m, nil)
	}
	b.SetStateSuccessContext(ctx, cb, []*tasks.TaskResult{{Type: "int64", Value: int64(7)}})
	r := NewChordAsyncResult(members, cb, b)
	out, err := r.GetWithContext(ctx, time.Millisecond)
	if err != nil || len(out) != 1 || out[0].Int() != 7 {
		t.Fatalf("Get: %v, %v", out, err)
	}
	if n := b.reads.Load(); n != 1 {
		t.Fatalf("%d state reads for a chord of 100, want 1", n)
	}
}

func TestChordGetReportsTheMemberFailure(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := context.Background()
	members, cb := sigs(3), sigs(1)[0]
	b.SetStateSuccessContext(ctx, members[0], nil)
	b.SetStateFailureContext(ctx, members[1], "member broke")
	b.SetStateFailureContext(ctx, cb, "chord member failed: member broke")
	_, err := NewChordAsyncResult(members, cb, b).GetWithContext(ctx, time.Millisecond)
	var te *TaskError
	if !errors.As(err, &te) || te.Message != "member broke" || te.TaskUUID != members[1].UUID {
		t.Fatalf("Get: %v, want the member's error", err)
	}
}

func TestChainGetReadsTheLastTaskFirst(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	ctx := context.Background()
	chain := sigs(10)
	for _, s := range chain {
		b.SetStateSuccessContext(ctx, s, []*tasks.TaskResult{{Type: "string", Value: s.UUID}})
	}
	out, err := NewChainAsyncResult(chain, b).GetWithContext(ctx, time.Millisecond)
	if err != nil || len(out) != 1 || out[0].String() != chain[9].UUID {
		t.Fatalf("Get: %v, %v; want the last task's result", out, err)
	}
	if n := b.reads.Load(); n != 1 {
		t.Fatalf("%d state reads for a finished chain of 10, want 1", n)
	}
	// A failure in the middle is reported while the last task waits.
	broken := sigs(3)
	b.SetStateSuccessContext(ctx, broken[0], nil)
	b.SetStateFailureContext(ctx, broken[1], "middle failed")
	b.SetStatePendingContext(ctx, broken[2])
	_, err = NewChainAsyncResult(broken, b).GetWithContext(ctx, time.Millisecond)
	if err == nil || err.Error() != "middle failed" {
		t.Fatalf("Get of a broken chain: %v", err)
	}
}

func TestGetOfAMissingStateEnds(t *testing.T) {
	t.Parallel()
	b := newBackend(t)
	_, err := NewAsyncResult(&tasks.Signature{UUID: "task_none", Name: "x"}, b).GetWithContext(context.Background(), time.Millisecond)
	if !errors.Is(err, ErrStateNotFound) {
		t.Fatalf("Get: %v, want ErrStateNotFound", err)
	}
	if _, err := NewAsyncResult(&tasks.Signature{UUID: "u"}, nil).Get(time.Millisecond); !errors.Is(err, ErrBackendNotConfigured) {
		t.Fatalf("Get without a backend: %v", err)
	}
}

// queueBackend records the queues a result names when it reads a state.
type queueBackend struct {
	*countingBackend
	queues []string
}

func (q *queueBackend) GetStateInContext(ctx context.Context, queue, uuid string) (*tasks.TaskState, error) {
	q.queues = append(q.queues, queue)
	return q.fullBackend.GetStateContext(ctx, uuid)
}

// A backend that reads a state sooner knowing the task's queue
// (backends.QueueStateReader) is told the signature's.
func TestGetNamesTheQueueToABackendThatReadsByQueue(t *testing.T) {
	t.Parallel()
	b := &queueBackend{countingBackend: newBackend(t)}
	ctx := context.Background()
	sig := sigs(1)[0]
	sig.RoutingKey = "emails"
	b.SetStateSuccessContext(ctx, sig, nil)
	if _, err := NewAsyncResult(sig, b).GetWithContext(ctx, time.Millisecond); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(b.queues) != 1 || b.queues[0] != "emails" || b.reads.Load() != 0 {
		t.Fatalf("reads by queue %v and %d without; want one, in emails", b.queues, b.reads.Load())
	}
}

// notifyingBackend hands the results' waits its own notices.
type notifyingBackend struct {
	*countingBackend
	notices chan struct{}
}

func (n *notifyingBackend) WatchFinished(ctx context.Context, uuid string) (<-chan struct{}, func()) {
	return n.notices, func() {}
}

// A chain's round begun by a notice about its last task reads that task
// alone; the first round reads the tasks not known to have succeeded, to
// report a failure.
func TestChainNoticeReadsOnlyTheLastTask(t *testing.T) {
	t.Parallel()
	b := &notifyingBackend{countingBackend: newBackend(t), notices: make(chan struct{})}
	ctx := context.Background()
	chain := sigs(3)
	if err := b.SetStatePendingContext(ctx, chain...); err != nil {
		t.Fatal(err)
	}
	one := []*tasks.TaskResult{{Type: "int64", Value: int64(1)}}
	b.SetStateSuccessContext(ctx, chain[0], one)
	done := make(chan error, 1)
	go func() {
		_, err := NewChainAsyncResult(chain, b).GetWithContext(ctx, time.Hour)
		done <- err
	}()
	notice := func() {
		t.Helper()
		select {
		case b.notices <- struct{}{}:
		case err := <-done:
			t.Fatalf("Get returned (%v) before the notices", err)
		}
	}
	// Each notice is received once the round before it has ended.
	notice() // after the first round: the last, first and second tasks read
	notice() // after the first notice's round: the last read
	notice() // after the second's: the last read
	// The third noticed round reads the last task before it finishes, or
	// that round would find it done.
	waitfor.True(t, 10*time.Second, "the third noticed round's read", func() bool { return b.reads.Load() == 3+3 })
	b.SetStateSuccessContext(ctx, chain[2], one)
	notice() // after the third's: this round finds the last done
	if err := <-done; err != nil {
		t.Fatalf("Get: %v", err)
	}
	if n := b.reads.Load(); n != 3+4 {
		t.Fatalf("%d state reads, want 7: three in the first round, then the last task's alone in each of the four noticed ones", n)
	}
}
