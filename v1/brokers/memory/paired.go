package memory

import (
	"context"
	"fmt"

	backends "github.com/b6192125/machinist/v1/backends/iface"
	memorybackend "github.com/b6192125/machinist/v1/backends/memory"
	"github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

var (
	_ iface.StateBroker = (*Broker)(nil)
	_ iface.Relay       = (*Broker)(nil)
)

// NewPair returns a broker and the result backend it writes task states to
// in the same step as it moves tasks (see iface.StateBroker), both
// configured by opts. Close each.
func NewPair(opts Options) (*Broker, *memorybackend.Backend) {
	backend := memorybackend.New(memorybackend.Options{ResultsExpireIn: opts.ResultsExpireIn})
	b := New(opts)
	b.backend = backend
	return b, backend
}

// PairedWith reports whether backend is the one NewPair made with b.
func (b *Broker) PairedWith(backend backends.Backend) bool {
	mb, ok := backend.(*memorybackend.Backend)
	return ok && b.backend != nil && mb == b.backend
}

// PublishPending writes the PENDING states of sigs, then publishes them.
func (b *Broker) PublishPending(ctx context.Context, sigs ...*tasks.Signature) error {
	if b.backend == nil {
		return iface.NotSent(fmt.Errorf("memory broker: publish pending: no paired backend"))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// A message too large is refused before any state is written.
	if err := b.checkSizes("publish", sigs); err != nil {
		return err
	}
	if err := b.backend.SetStatePendingContext(ctx, sigs...); err != nil {
		return iface.NotSent(err)
	}
	return b.publishSized(sigs)
}

// AckSuccess writes success, the SUCCESS state of d's task (a group
// member's also in its group), publishes next with their PENDING states, and forgets the
// task, under the broker's lock and only while d's lease holds: a worker
// that lost its lease writes and sends nothing. A next task the broker
// still holds counts as sent (and one kept out, of a cancelled workflow,
// is not sent), and so, after a recovery, does one whose
// state shows it started or finished. Results that cannot be stored are
// an error, and the task stays leased. A chord member whose success
// completes its group has its outcome committed and stays leased
// (ErrChordDue). With take, it then takes the next task of d's queue for
// the caller.
func (b *Broker) AckSuccess(ctx context.Context, d *iface.Delivery, success *tasks.TaskState, next []*tasks.Signature, take *iface.Take) (*iface.Delivery, error) {
	if b.backend == nil {
		return nil, fmt.Errorf("memory broker: ack success: no paired backend")
	}
	for i, sig := range next {
		if err := checkPublish(i, sig); err != nil {
			return nil, err
		}
	}
	if err := b.checkSizes("ack success", next); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.holdsLocked("ack", d); err != nil {
		return nil, err
	}
	sig, state := d.Signature, success
	finished, err := b.backend.WriteState(sig, state)
	if err != nil {
		return nil, err
	}
	var send []*tasks.Signature
	for _, sig := range next {
		if _, barred := b.barredLocked(sig, b.clock.Now()); barred || b.held[sig.UUID] != nil || d.Recovered > 0 && b.startedLocked(ctx, sig.UUID) {
			continue
		}
		if _, err := b.backend.WriteState(sig, tasks.NewPendingTaskState(sig)); err != nil {
			return nil, err
		}
		send = append(send, sig)
	}
	b.publishLocked(send)
	if sig.GroupUUID != "" && sig.ChordCallback != nil && finished >= sig.GroupTaskCount {
		b.heldLocked(d).outcome = copyState(state)
		return nil, fmt.Errorf("memory broker: ack task %s: %w", sig.UUID, iface.ErrChordDue)
	}
	if err := b.ackLocked(d); err != nil {
		return nil, err
	}
	return b.takeNextLocked(d.Queue, take), nil
}

// startedLocked reports whether the paired backend holds a state of task
// uuid that shows it has started or finished.
func (b *Broker) startedLocked(ctx context.Context, uuid string) bool {
	st, err := b.backend.GetStateContext(ctx, uuid)
	return err == nil && st.State != tasks.StatePending
}

// WriteState writes state to the paired backend (recording a group
// member's final state in its group) and, with commit, records it as the
// task's outcome, under the broker's lock and only while d's lease holds.
// A final state frees the task's unique key in the same step.
func (b *Broker) WriteState(ctx context.Context, d *iface.Delivery, state *tasks.TaskState, commit bool) (bool, error) {
	if b.backend == nil {
		return false, fmt.Errorf("memory broker: write state: no paired backend")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.holdsLocked("write state", d); err != nil {
		return false, err
	}
	finished, err := b.backend.WriteState(d.Signature, state)
	if err != nil {
		return false, err
	}
	t := b.heldLocked(d)
	if commit {
		t.outcome = copyState(state)
	}
	if state.IsCompleted() {
		b.releaseUniqueLocked(t) // in the step that makes the final state show
	}
	sig := d.Signature
	return sig.GroupUUID != "" && finished >= sig.GroupTaskCount, nil
}
