package pair

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// leaseBroker returns b as a store.Broker: itself when it is one (a lease
// broker), else machineryBroker, which publishes through b's Publish and
// can do nothing else (b hands tasks to workers through StartConsuming).
func leaseBroker(b store.MachineryBroker) store.Broker {
	if b == nil {
		return nil
	}
	if lb, ok := b.(store.Broker); ok {
		return lb
	}
	return machineryBroker{b}
}

// ContextBackend returns b as a store.Backend: itself when it is one,
// else machineryBackend, which calls b's machinery methods.
func ContextBackend(b store.MachineryBackend) store.Backend {
	if b == nil {
		return nil
	}
	if cb, ok := b.(store.Backend); ok {
		return cb
	}
	return machineryBackend{b}
}

// machineryBroker is a broker written for machinery: it publishes, and
// its StartConsuming (not the store) runs the worker.
type machineryBroker struct{ b store.MachineryBroker }

func (m machineryBroker) notLeased(what string) error {
	return fmt.Errorf("%T cannot %s: it hands tasks to a worker's Process through StartConsuming, without leases: %w", m.b, what, store.ErrUnsupported)
}

// PublishTasks publishes sigs one by one, as machinery does. A unique
// task is refused: only machinist's store keeps its key.
func (m machineryBroker) PublishTasks(ctx context.Context, sigs ...*tasks.Signature) error {
	for _, sig := range sigs {
		if sig.UniqueFor > 0 {
			return store.NotSent(fmt.Errorf("%T cannot keep task %s unique (UniqueFor): %w", m.b, sig.UUID, store.ErrUnsupported))
		}
	}
	for i, sig := range sigs {
		if err := ctx.Err(); err != nil {
			if i == 0 {
				return store.NotSent(err)
			}
			return store.MaybeSent(err)
		}
		if err := m.b.Publish(ctx, sig); err != nil {
			return fmt.Errorf("publish %s: %w", sig.UUID, err)
		}
	}
	return nil
}

func (m machineryBroker) Fetch(context.Context, []string, int, *store.TaskNames) ([]*store.Delivery, error) {
	return nil, m.notLeased("fetch")
}

func (m machineryBroker) Announce(context.Context, []string, *store.TaskNames, time.Duration) error {
	return m.notLeased("announce")
}

func (m machineryBroker) Reroute(context.Context, *store.Delivery) (bool, error) {
	return false, m.notLeased("reroute")
}

func (m machineryBroker) ExtendLeases(context.Context, ...*store.Delivery) error {
	return m.notLeased("extend leases")
}

func (m machineryBroker) Commit(context.Context, *store.Delivery, *tasks.TaskState) error {
	return m.notLeased("commit")
}

func (m machineryBroker) Ack(context.Context, *store.Delivery) error { return m.notLeased("ack") }

func (m machineryBroker) Retry(context.Context, *store.Delivery, time.Time, string) error {
	return m.notLeased("retry")
}

func (m machineryBroker) Archive(context.Context, *store.Delivery, string) error {
	return m.notLeased("archive")
}

func (m machineryBroker) Requeue(context.Context, ...*store.Delivery) error {
	return m.notLeased("requeue")
}

// Close closes b when it is an io.Closer; machinery's brokers have no
// Close.
func (m machineryBroker) Close() error { return closeIfCloser(m.b) }

func closeIfCloser(v any) error {
	if c, ok := v.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// machineryBackend is a backend written for machinery: each method calls
// its machinery form once ctx has not ended. It has machinery's
// semantics: TriggerChord says true once per group, so a member that died
// after being elected leaves the callback unsent.
type machineryBackend struct{ b store.MachineryBackend }

// callMachinery runs f, a machinery method (which takes no context), unless ctx has
// ended.
func callMachinery(ctx context.Context, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return f()
}

// readMachinery is callMachinery for a method with a result.
func readMachinery[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	return f()
}

func (m machineryBackend) InitGroupContext(ctx context.Context, groupUUID string, taskUUIDs []string) error {
	return callMachinery(ctx, func() error { return m.b.InitGroup(groupUUID, taskUUIDs) })
}

func (m machineryBackend) GroupCompletedContext(ctx context.Context, groupUUID string, groupTaskCount int) (bool, error) {
	return readMachinery(ctx, func() (bool, error) { return m.b.GroupCompleted(groupUUID, groupTaskCount) })
}

func (m machineryBackend) GroupTaskStatesContext(ctx context.Context, groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error) {
	return readMachinery(ctx, func() ([]*tasks.TaskState, error) { return m.b.GroupTaskStates(groupUUID, groupTaskCount) })
}

func (m machineryBackend) TriggerChordContext(ctx context.Context, groupUUID, _ string) (bool, error) {
	return readMachinery(ctx, func() (bool, error) { return m.b.TriggerChord(groupUUID) })
}

func (m machineryBackend) SetStatePendingContext(ctx context.Context, sigs ...*tasks.Signature) error {
	for _, sig := range sigs {
		if err := callMachinery(ctx, func() error { return m.b.SetStatePending(sig) }); err != nil {
			return err
		}
	}
	return nil
}

func (m machineryBackend) SetStateReceivedContext(ctx context.Context, sig *tasks.Signature) error {
	return callMachinery(ctx, func() error { return m.b.SetStateReceived(sig) })
}

func (m machineryBackend) SetStateStartedContext(ctx context.Context, sig *tasks.Signature) error {
	return callMachinery(ctx, func() error { return m.b.SetStateStarted(sig) })
}

func (m machineryBackend) SetStateRetryContext(ctx context.Context, sig *tasks.Signature) error {
	return callMachinery(ctx, func() error { return m.b.SetStateRetry(sig) })
}

func (m machineryBackend) SetStateSuccessContext(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) error {
	return callMachinery(ctx, func() error { return m.b.SetStateSuccess(sig, results) })
}

// CompleteGroupMember writes the member's SUCCESS, then asks whether its
// group has completed, as machinery's worker does.
func (m machineryBackend) CompleteGroupMember(ctx context.Context, sig *tasks.Signature, state *tasks.TaskState) (bool, error) {
	if err := m.SetStateSuccessContext(ctx, sig, state.Results); err != nil {
		return false, err
	}
	return m.GroupCompletedContext(ctx, sig.GroupUUID, sig.GroupTaskCount)
}

func (m machineryBackend) SetStateAggregatedContext(context.Context, string, ...*tasks.Signature) error {
	return fmt.Errorf("%T cannot record aggregated tasks: %w", m.b, store.ErrUnsupported)
}

func (m machineryBackend) SetStateFailureContext(ctx context.Context, sig *tasks.Signature, errMsg string) error {
	return callMachinery(ctx, func() error { return m.b.SetStateFailure(sig, errMsg) })
}

func (m machineryBackend) GetStateContext(ctx context.Context, taskUUID string) (*tasks.TaskState, error) {
	return readMachinery(ctx, func() (*tasks.TaskState, error) { return m.b.GetState(taskUUID) })
}

func (m machineryBackend) PurgeStateContext(ctx context.Context, taskUUID string) error {
	return callMachinery(ctx, func() error { return m.b.PurgeState(taskUUID) })
}

func (m machineryBackend) PurgeGroupMetaContext(ctx context.Context, groupUUID string) error {
	return callMachinery(ctx, func() error { return m.b.PurgeGroupMeta(groupUUID) })
}

// Close closes b when it is an io.Closer.
func (m machineryBackend) Close() error { return closeIfCloser(m.b) }
