package store

import (
	"context"

	"github.com/b6192125/machinist/v1/tasks"
)

// Backend is the states half of the store: task states, results and
// group bookkeeping. machinist's backends have machinery's context-free
// methods (MachineryBackend) besides. Every method is safe for
// concurrent use.
type Backend interface {
	// InitGroupContext records a group of taskUUIDs, in group order.
	InitGroupContext(ctx context.Context, groupUUID string, taskUUIDs []string) error
	// GroupCompletedContext reports whether groupTaskCount members of the group
	// have finished for good (SUCCESS or FAILURE). It reads the group's
	// bookkeeping, not every member's state.
	GroupCompletedContext(ctx context.Context, groupUUID string, groupTaskCount int) (bool, error)
	// GroupTaskStatesContext returns the final states of the group's members in
	// group order, as recorded when each finished. A member that has not
	// finished is reported with its UUID and state PENDING.
	GroupTaskStatesContext(ctx context.Context, groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error)
	// TriggerChordContext elects the member that sends the group's chord callback
	// (or, when a member failed, the callback's error callbacks). It returns
	// true to exactly one memberUUID per group, and true again to that same
	// member, so a member that died before sending the callback sends it
	// when it runs again.
	TriggerChordContext(ctx context.Context, groupUUID, memberUUID string) (bool, error)

	// SetStatePendingContext writes the PENDING state of each signature.
	SetStatePendingContext(ctx context.Context, sigs ...*tasks.Signature) error
	// SetStateReceivedContext, SetStateStartedContext and
	// SetStateRetryContext write a state
	// that is not final, and write nothing when the task's state is
	// already final (SUCCESS or FAILURE): a write that lands late, from a
	// worker paused past its lease, never hides a result.
	//
	// SetStateReceivedContext writes the RECEIVED state of sig.
	SetStateReceivedContext(ctx context.Context, sig *tasks.Signature) error
	// SetStateStartedContext writes the STARTED state of sig. An implementation
	// may queue the write and return before it lands (the Redis backend
	// does, to start the task a round trip sooner), provided its writes
	// land in the order they were made and its own reads see them.
	SetStateStartedContext(ctx context.Context, sig *tasks.Signature) error
	// SetStateRetryContext writes the RETRY state of sig.
	SetStateRetryContext(ctx context.Context, sig *tasks.Signature) error
	// SetStateSuccessContext writes the SUCCESS state of sig with its results and,
	// for a group member, records it in the group's bookkeeping.
	SetStateSuccessContext(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) error
	// CompleteGroupMember writes state, the SUCCESS state of sig, a group
	// member (tasks.NewSuccessTaskState, with the worker's Trace), as
	// SetStateSuccessContext does, and reports whether the group has
	// completed with this write: the member whose write completes the group
	// is told true (as is one that finishes again after a recovery), others
	// false. It saves the worker a GroupCompletedContext round trip per
	// chord member; TriggerChordContext still elects the one member that
	// sends the callback.
	CompleteGroupMember(ctx context.Context, sig *tasks.Signature, state *tasks.TaskState) (bool, error)
	// SetStateAggregatedContext writes the state of each member, tasks
	// aggregated into the task aggregateUUID: PENDING, with Aggregate set
	// to it. It is safe to repeat (a batch built again after its worker
	// died writes it again).
	SetStateAggregatedContext(ctx context.Context, aggregateUUID string, members ...*tasks.Signature) error
	// SetStateFailureContext writes the FAILURE state of sig with errMsg and, for
	// a group member, records it in the group's bookkeeping.
	SetStateFailureContext(ctx context.Context, sig *tasks.Signature, errMsg string) error
	// GetStateContext returns the state of the task, or an error wrapping
	// ErrStateNotFound when there is none (never sent, purged or expired).
	GetStateContext(ctx context.Context, taskUUID string) (*tasks.TaskState, error)
	// PurgeStateContext deletes the state of the task: GetStateContext then
	// fails with ErrStateNotFound, also for a task still in its queue,
	// which nonetheless runs when its turn comes and writes its states as
	// usual (machinery's semantics).
	PurgeStateContext(ctx context.Context, taskUUID string) error
	// PurgeGroupMetaContext deletes the group's bookkeeping.
	PurgeGroupMetaContext(ctx context.Context, groupUUID string) error

	// Close releases what the backend holds. Safe to call more than once.
	Close() error
}
