package redisbackend

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/b6192125/machinist/internal/rdb"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	"github.com/b6192125/machinist/v1/tasks"
)

// GroupSafetyTTL is the least time a group's bookkeeping lives after its
// last write while members are unfinished: the TTL of a running group is
// the longer of this and ResultsExpireIn. Completed groups expire
// ResultsExpireIn after their last write.
const GroupSafetyTTL = rdb.GroupSafetyTTL

var _ backends.Backend = (*Backend)(nil)

// Backend is the Redis result backend: an adapter of backends.Backend over the
// store in internal/rdb. Create it with New, NewGR or Dial. Every method is safe
// for concurrent use.
type Backend struct {
	backends.Compat // machinery's methods
	store           *rdb.Store
	ownsStore       bool
	closed          atomic.Bool
}

// Options configures a Backend. The state TTL (ResultsExpireIn) and key
// prefix are the store's.
type Options struct {
	// OwnsStore makes Close close the store.
	OwnsStore bool
}

// NewOnStore returns a backend on store. It sends nothing to Redis; state writes
// of concurrent callers share round trips through the store's batcher.
func NewOnStore(store *rdb.Store, opts Options) *Backend {
	b := &Backend{store: store, ownsStore: opts.OwnsStore}
	b.Compat = backends.NewCompat(b)
	return b
}

// Dial returns a backend on a Redis connection of its own for rawURL,
// configured by cnf (through WithDefaults); Close closes the connection.
func Dial(rawURL string, cnf *config.Config) (*Backend, error) {
	store, err := dial.Store(rawURL, cnf)
	if err != nil {
		return nil, err
	}
	return NewOnStore(store, Options{OwnsStore: true}), nil
}

// Store returns the store the backend runs on.
func (b *Backend) Store() *rdb.Store { return b.store }

// InitGroupContext records the group's members in group order (duplicates
// dropped) and expects len(taskUUIDs) of them to finish. Members that
// finished before InitGroupContext stay recorded.
func (b *Backend) InitGroupContext(ctx context.Context, groupUUID string, taskUUIDs []string) error {
	if err := b.checkOpen("init group"); err != nil {
		return err
	}
	return wrap(b.store.InitGroup(ctx, groupUUID, taskUUIDs))
}

// GroupCompletedContext reports whether groupTaskCount members of the group have
// finished: one O(1) read however large the group. A group with no
// bookkeeping is not completed (false, no error).
func (b *Backend) GroupCompletedContext(ctx context.Context, groupUUID string, groupTaskCount int) (bool, error) {
	if err := b.checkOpen("group completed"); err != nil {
		return false, err
	}
	done, err := b.store.GroupCompleted(ctx, groupUUID, groupTaskCount)
	return done, wrap(err)
}

// GroupTaskStatesContext returns the final states of the group's members, as
// recorded when each finished, in group order: InitGroup's members, then
// members InitGroup did not list in the order they finished. A member not
// finished yet is reported with its UUID and state PENDING. The members'
// own states are not read. A group with no bookkeeping is an error
// wrapping ErrGroupNotFound.
func (b *Backend) GroupTaskStatesContext(ctx context.Context, groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error) {
	if err := b.checkOpen("group task states"); err != nil {
		return nil, err
	}
	states, err := b.store.GroupTaskStates(ctx, groupUUID)
	return states, wrap(err)
}

// TriggerChordContext elects the member that sends the group's chord callback:
// true to the first member that asks and again to that member, false to
// every other. One O(1) script, no lock. A group with no bookkeeping is an
// error wrapping ErrGroupNotFound.
func (b *Backend) TriggerChordContext(ctx context.Context, groupUUID, memberUUID string) (bool, error) {
	if err := b.checkOpen("trigger chord"); err != nil {
		return false, err
	}
	won, err := b.store.TriggerChord(ctx, groupUUID, memberUUID)
	return won, wrap(err)
}

// SetStatePendingContext writes the PENDING state of every signature: one
// pipeline per 1000 signatures.
func (b *Backend) SetStatePendingContext(ctx context.Context, sigs ...*tasks.Signature) error {
	if err := b.checkOpen("set state pending"); err != nil {
		return err
	}
	return wrap(b.store.WritePending(ctx, sigs))
}

var _ backends.Workflows = (*Backend)(nil)

// InitWorkflowContext records wf and writes the PENDING states of pending
// in one pipeline.
func (b *Backend) InitWorkflowContext(ctx context.Context, wf *tasks.WorkflowMeta, pending ...*tasks.Signature) error {
	if err := b.checkOpen("init workflow"); err != nil {
		return err
	}
	return wrap(b.store.InitWorkflow(ctx, wf, pending))
}

var _ backends.Withdrawer = (*Backend)(nil)

// WithdrawPendingContext queues the deletion of the PENDING states of sigs
// that SetStatePendingContext wrote, behind those writes, and returns
// without waiting for it (a failure is logged): a state written since is
// kept.
func (b *Backend) WithdrawPendingContext(ctx context.Context, sigs ...*tasks.Signature) error {
	if err := b.checkOpen("withdraw state pending"); err != nil {
		return err
	}
	return wrap(b.store.WithdrawPending(sigs))
}

// WithdrawWorkflowContext queues the deletion of the record of workflow id
// and of the PENDING states of pending that InitWorkflowContext wrote,
// behind those writes, and returns without waiting for it (a failure is
// logged): a state written since is kept.
func (b *Backend) WithdrawWorkflowContext(ctx context.Context, id string, pending ...*tasks.Signature) error {
	if err := b.checkOpen("withdraw workflow"); err != nil {
		return err
	}
	return wrap(b.store.WithdrawWorkflow(id, pending))
}

// GetWorkflowContext returns the record of the workflow id names (its own
// UUID, or one of its tasks').
func (b *Backend) GetWorkflowContext(ctx context.Context, id string) (*tasks.WorkflowMeta, error) {
	if err := b.checkOpen("get workflow"); err != nil {
		return nil, err
	}
	wf, err := b.store.GetWorkflow(ctx, id)
	return wf, wrap(err)
}

// SetStateAggregatedContext writes the state of each member of the
// aggregate aggregateUUID: PENDING, pointing at it.
func (b *Backend) SetStateAggregatedContext(ctx context.Context, aggregateUUID string, members ...*tasks.Signature) error {
	if err := b.checkOpen("set state aggregated"); err != nil {
		return err
	}
	return wrap(b.store.WriteAggregated(ctx, aggregateUUID, members))
}

// SetStateReceivedContext writes the RECEIVED state of sig.
func (b *Backend) SetStateReceivedContext(ctx context.Context, sig *tasks.Signature) error {
	return b.setState(ctx, "set state received", sig, tasks.NewReceivedTaskState)
}

// SetStateStartedContext queues the write of the STARTED state of sig and returns
// without waiting for it, so that the task starts a round trip sooner. The
// backend's writes land in the order they were made, so the task's final
// state cannot be overwritten by it; a failed write is logged.
func (b *Backend) SetStateStartedContext(ctx context.Context, sig *tasks.Signature) error {
	if err := b.checkOpen("set state started"); err != nil {
		return err
	}
	if sig == nil {
		return wrap(fmt.Errorf("set state started: %w", tasks.ErrNilSignature))
	}
	return wrap(b.store.SetStateAsync(ctx, sig, tasks.NewStartedTaskState(sig)))
}

// SetStateRetryContext writes the RETRY state of sig.
func (b *Backend) SetStateRetryContext(ctx context.Context, sig *tasks.Signature) error {
	return b.setState(ctx, "set state retry", sig, tasks.NewRetryTaskState)
}

// SetStateSuccessContext writes the SUCCESS state of sig with results (as JSON;
// a value JSON cannot encode is an error and nothing is written) and, when
// sig belongs to a group, records it in the group in the same pipeline.
func (b *Backend) SetStateSuccessContext(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) error {
	return b.setState(ctx, "set state success", sig, func(sig *tasks.Signature) *tasks.TaskState {
		return tasks.NewSuccessTaskState(sig, results)
	})
}

// CompleteGroupMember writes state, the SUCCESS state of sig, a group
// member, and reports whether its group is complete, from what the write
// itself returns: no second round trip.
func (b *Backend) CompleteGroupMember(ctx context.Context, sig *tasks.Signature, state *tasks.TaskState) (bool, error) {
	if err := b.checkOpen("set state success"); err != nil {
		return false, err
	}
	if sig == nil || sig.GroupUUID == "" {
		return false, fmt.Errorf("redisbackend: CompleteGroupMember of a task that is not a group member")
	}
	if state == nil || state.State != tasks.StateSuccess || state.TaskUUID != sig.UUID {
		return false, fmt.Errorf("redisbackend: CompleteGroupMember of task %s needs its SUCCESS state", sig.UUID)
	}
	done, err := b.store.SetState(ctx, sig, state)
	if err != nil {
		return false, wrap(err)
	}
	return done >= int64(sig.GroupTaskCount), nil
}

var _ backends.StateSetter = (*Backend)(nil)

var _ backends.Events = (*Backend)(nil)

// AppendEvent appends e to the event stream of task uuid (see
// store.Events).
func (b *Backend) AppendEvent(ctx context.Context, uuid string, e tasks.Event) error {
	if err := b.checkOpen("append event"); err != nil {
		return err
	}
	return wrap(b.store.AppendEvent(ctx, uuid, e))
}

// ReadEvents reads the event stream of task uuid (see store.Events).
func (b *Backend) ReadEvents(ctx context.Context, uuid, after string, max int, block time.Duration) ([]tasks.Event, error) {
	if err := b.checkOpen("read events"); err != nil {
		return nil, err
	}
	events, err := b.store.ReadEvents(ctx, uuid, after, max, block)
	return events, wrap(err)
}

// LastEvents returns the last n events of task uuid (see store.Events).
func (b *Backend) LastEvents(ctx context.Context, uuid string, n int) ([]tasks.Event, error) {
	if err := b.checkOpen("read events"); err != nil {
		return nil, err
	}
	events, err := b.store.LastEvents(ctx, uuid, n)
	return events, wrap(err)
}

// TaskProgress returns the progress sig's task last wrote while it runs,
// read where the broker keeps it: on the same Redis as this backend (the
// default), else it finds none. See result.AsyncResult.Progress.
func (b *Backend) TaskProgress(ctx context.Context, sig *tasks.Signature) (*tasks.Progress, error) {
	if err := b.checkOpen("read progress"); err != nil {
		return nil, err
	}
	p, err := b.store.TaskProgress(ctx, sig)
	return p, wrap(err)
}

// SetStateContext writes state, a state of sig, whole (see
// backends.StateSetter).
func (b *Backend) SetStateContext(ctx context.Context, sig *tasks.Signature, state *tasks.TaskState) error {
	return b.setState(ctx, "set state "+state.State, sig, func(*tasks.Signature) *tasks.TaskState { return state })
}

// SetStateFailureContext writes the FAILURE state of sig with errMsg and, when sig
// belongs to a group, records it in the group in the same pipeline.
func (b *Backend) SetStateFailureContext(ctx context.Context, sig *tasks.Signature, errMsg string) error {
	return b.setState(ctx, "set state failure", sig, func(sig *tasks.Signature) *tasks.TaskState {
		return tasks.NewFailureTaskState(sig, errMsg)
	})
}

// setState writes the state newState makes of sig.
func (b *Backend) setState(ctx context.Context, op string, sig *tasks.Signature, newState func(*tasks.Signature) *tasks.TaskState) error {
	if err := b.checkOpen(op); err != nil {
		return err
	}
	if sig == nil {
		return wrap(fmt.Errorf("%s: %w", op, tasks.ErrNilSignature))
	}
	_, err := b.store.SetState(ctx, sig, newState(sig))
	return wrap(err)
}

// GetStateContext returns the task's state, or an error wrapping ErrStateNotFound
// when there is none. Result values come back as JSON decodes them with
// UseNumber: numbers as json.Number, arrays as []interface{}, []byte as its
// base64 string; tasks.ReflectTaskResults converts them to their types.
func (b *Backend) GetStateContext(ctx context.Context, taskUUID string) (*tasks.TaskState, error) {
	if err := b.checkOpen("get state"); err != nil {
		return nil, err
	}
	st, err := b.store.GetState(ctx, taskUUID)
	return st, wrap(err)
}

var _ backends.QueueStateReader = (*Backend)(nil)

// GetStateInContext is GetStateContext for a task sent to queue (see
// backends.QueueStateReader): a task with no state hash is looked for in
// queue first.
func (b *Backend) GetStateInContext(ctx context.Context, queue, taskUUID string) (*tasks.TaskState, error) {
	if err := b.checkOpen("get state"); err != nil {
		return nil, err
	}
	st, err := b.store.GetStateIn(ctx, queue, taskUUID)
	return st, wrap(err)
}

var _ backends.Notifier = (*Backend)(nil)

// WatchFinished starts watching task taskUUID's state (see backends.Notifier):
// on a single server, one subscription per store carries the notice that
// the state became final; on a Cluster it returns a nil channel.
func (b *Backend) WatchFinished(ctx context.Context, taskUUID string) (<-chan struct{}, func()) {
	if b.checkOpen("watch state") != nil {
		return nil, func() {}
	}
	return b.store.WatchFinished(ctx, taskUUID)
}

// PurgeStateContext deletes the task's state; a missing state is not an
// error. GetState then fails with ErrStateNotFound, also for a task still
// waiting in its queue, until a worker takes it: the task still runs, and
// the states its worker writes read as usual.
func (b *Backend) PurgeStateContext(ctx context.Context, taskUUID string) error {
	if err := b.checkOpen("purge state"); err != nil {
		return err
	}
	return wrap(b.store.PurgeState(ctx, taskUUID))
}

// PurgeGroupMetaContext deletes the group's bookkeeping; a missing group is not
// an error. The members' own states stay.
func (b *Backend) PurgeGroupMetaContext(ctx context.Context, groupUUID string) error {
	if err := b.checkOpen("purge group meta"); err != nil {
		return err
	}
	return wrap(b.store.PurgeGroup(ctx, groupUUID))
}

// Close makes later calls fail with ErrClosed and closes the store when
// the backend owns it. Safe to call more than once.
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	if b.ownsStore {
		return wrap(b.store.Close())
	}
	return nil
}

func (b *Backend) checkOpen(op string) error {
	if b.closed.Load() {
		return fmt.Errorf("redisbackend: %s: %w", op, backends.ErrClosed)
	}
	return nil
}

// wrap prefixes err with the package name, and names the cause of an
// authentication error (rdb.ErrAuth).
func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("redisbackend: %w", rdb.Explain(err))
}
