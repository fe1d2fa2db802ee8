// Package eager is machinery's synchronous mode: Publish runs each task in
// the caller's goroutine, so by the time SendTask returns the task's state
// is final. Select it with Broker "eager". A task with an ETA (or a retry)
// makes Publish wait until then: it never runs early. Fetch never returns a
// task, so workers started on an eager Server wait idle.
package eager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// ProcessFunc runs one task to the end.
type ProcessFunc func(ctx context.Context, sig *tasks.Signature) error

// Broker is the eager broker.
type Broker struct {
	mu      sync.RWMutex
	process ProcessFunc
	closed  chan struct{}
	once    sync.Once
	claims  sync.Map
}

var _ iface.Broker = (*Broker)(nil)

// New returns an eager broker; AssignProcessor must be called before Publish.
func New() *Broker { return &Broker{closed: make(chan struct{})} }

// AssignProcessor sets the function that runs published tasks.
func (b *Broker) AssignProcessor(p ProcessFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.process = p
}

// Publish runs each task in turn, waiting for its ETA first.
func (b *Broker) Publish(ctx context.Context, sigs ...*tasks.Signature) error {
	b.mu.RLock()
	process := b.process
	b.mu.RUnlock()
	if process == nil {
		return fmt.Errorf("eager: no processor assigned")
	}
	for _, sig := range sigs {
		sig = tasks.CopySignature(sig)
		if sig.ETA != nil {
			if wait := time.Until(*sig.ETA); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				}
			}
		}
		if err := process(ctx, sig); err != nil {
			return err
		}
	}
	return nil
}

// Fetch waits until ctx ends or the broker is closed: eager tasks never queue.
func (b *Broker) Fetch(ctx context.Context, queues []string, max int) ([]*iface.Delivery, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.closed:
		return nil, iface.ErrClosed
	}
}

// ExtendLeases does nothing: there are no deliveries.
func (b *Broker) ExtendLeases(ctx context.Context, ds ...*iface.Delivery) error { return nil }

func notHeld(d *iface.Delivery) error {
	return fmt.Errorf("eager: task %s: %w", d.Signature.UUID, iface.ErrTaskNotFound)
}

// Ack fails: the eager broker hands out no deliveries.
func (b *Broker) Ack(ctx context.Context, d *iface.Delivery) error { return notHeld(d) }

// Retry fails: the eager broker hands out no deliveries.
func (b *Broker) Retry(ctx context.Context, d *iface.Delivery, at time.Time, errMsg string) error {
	return notHeld(d)
}

// Archive fails: the eager broker hands out no deliveries.
func (b *Broker) Archive(ctx context.Context, d *iface.Delivery, reason string) error {
	return notHeld(d)
}

// Requeue does nothing when given nothing, and fails otherwise.
func (b *Broker) Requeue(ctx context.Context, ds ...*iface.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	return notHeld(ds[0])
}

type claim struct{ until time.Time }

// Claim reports whether key was not claimed in the last ttl, in this process.
func (b *Broker) Claim(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	now := time.Now()
	for {
		v, loaded := b.claims.LoadOrStore(key, claim{until: now.Add(ttl)})
		if !loaded {
			return true, nil
		}
		if v.(claim).until.After(now) {
			return false, nil
		}
		if b.claims.CompareAndSwap(key, v, claim{until: now.Add(ttl)}) {
			return true, nil
		}
	}
}

// Queues returns nothing: eager tasks never queue.
func (b *Broker) Queues(ctx context.Context) ([]string, error) { return nil, nil }

// QueueInfo returns an empty queue.
func (b *Broker) QueueInfo(ctx context.Context, queue string) (*iface.QueueInfo, error) {
	return &iface.QueueInfo{Queue: queue}, nil
}

// ListTasks returns nothing.
func (b *Broker) ListTasks(ctx context.Context, queue string, status iface.TaskStatus, offset, limit int) ([]*iface.TaskInfo, error) {
	return nil, nil
}

// RequeueArchived moves nothing.
func (b *Broker) RequeueArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	return 0, nil
}

// DeleteArchived deletes nothing.
func (b *Broker) DeleteArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	return 0, nil
}

// PauseQueue does nothing: eager tasks run inside Publish.
func (b *Broker) PauseQueue(ctx context.Context, queue string) error { return nil }

// ResumeQueue does nothing.
func (b *Broker) ResumeQueue(ctx context.Context, queue string) error { return nil }

// GetPendingTasks returns nothing.
func (b *Broker) GetPendingTasks(queue string) ([]*tasks.Signature, error) { return nil, nil }

// GetDelayedTasks returns nothing.
func (b *Broker) GetDelayedTasks() ([]*tasks.Signature, error) { return nil, nil }

// Close wakes idle Fetch calls with ErrClosed.
func (b *Broker) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// Commit fails: the eager broker hands out no deliveries.
func (b *Broker) Commit(ctx context.Context, d *iface.Delivery, outcome *tasks.TaskState) error {
	return notHeld(d)
}
