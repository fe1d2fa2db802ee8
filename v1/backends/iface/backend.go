// Package iface declares the Backend: the seam between machinist and the
// store that keeps task states, results and group bookkeeping.
//
// States expire ResultsExpireIn after they are written. A group's bookkeeping
// records each member's final state as the member finishes, so that
// GroupCompleted is one read however large the group, GroupTaskStates does
// not depend on member states that may have expired, and the group does not
// expire while it is still running. TriggerChord elects exactly one member to
// send the chord callback, with no global lock.
//
// One implementation ships, backends/redis, on Redis or on an in-process
// engine (backends/memory, "memory://"). It passes the conformance suite in
// backends/backendtest.
package iface

import (
	"context"

	"github.com/b6192125/machinist/v1/tasks"
)

// Backend stores task states and group bookkeeping: what Server.GetBackend
// returns. Its methods come in two forms, as database/sql's do: machinery
// v1's (GetState(taskUUID)), which run on context.Background(), and the
// context-aware form named with Context (GetStateContext(ctx, taskUUID)),
// which machinist itself calls. An implementation writes the context-aware
// methods (ContextBackend) and embeds Compat for machinery's. Every method
// is safe for concurrent use.
type Backend interface {
	ContextBackend
	Machinery
}

// Machinery is machinery v1's Backend interface, with its signatures: each
// method is its Context form on context.Background().
type Machinery interface {
	InitGroup(groupUUID string, taskUUIDs []string) error
	GroupCompleted(groupUUID string, groupTaskCount int) (bool, error)
	GroupTaskStates(groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error)
	// TriggerChord returns true to the first caller for the group, and
	// false to every later one, as machinery's does; the worker's own
	// election (TriggerChordContext) counts as a caller.
	TriggerChord(groupUUID string) (bool, error)
	SetStatePending(signature *tasks.Signature) error
	SetStateReceived(signature *tasks.Signature) error
	SetStateStarted(signature *tasks.Signature) error
	SetStateRetry(signature *tasks.Signature) error
	SetStateSuccess(signature *tasks.Signature, results []*tasks.TaskResult) error
	SetStateFailure(signature *tasks.Signature, err string) error
	GetState(taskUUID string) (*tasks.TaskState, error)
	// IsAMQP reports false: machinist has no AMQP backend.
	IsAMQP() bool
	PurgeState(taskUUID string) error
	PurgeGroupMeta(groupUUID string) error
}

// ContextBackend is the context-aware half of Backend: what an
// implementation writes, and what machinist calls.
type ContextBackend interface {
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
	// PurgeStateContext deletes the state of the task.
	PurgeStateContext(ctx context.Context, taskUUID string) error
	// PurgeGroupMetaContext deletes the group's bookkeeping.
	PurgeGroupMetaContext(ctx context.Context, groupUUID string) error

	// Close releases what the backend holds. Safe to call more than once.
	Close() error
}

// Workflows is a backend that records chains, groups and chords, so that
// one can be found, and cancelled as a whole, from its own UUID or that of
// any of its tasks (machinery's Server.CancelWorkflow). Both of
// machinist's backends implement it; the Server sends workflows without a
// record through a backend that does not.
type Workflows interface {
	// InitWorkflowContext records wf, for as long as the backend keeps a
	// state past the last ETA of its tasks (wf.Lifetime), and writes the PENDING states of pending
	// as SetStatePendingContext does (a chain's steps, a chord's
	// callback), in one step where it can. The PENDING state of a task
	// whose signature names a workflow (Signature.WorkflowUUID) names it
	// too (TaskState.Workflow), however it is written.
	InitWorkflowContext(ctx context.Context, wf *tasks.WorkflowMeta, pending ...*tasks.Signature) error
	// GetWorkflowContext returns the record of the workflow id names: its
	// WorkflowUUID, or the UUID of a task whose state names the workflow.
	// None: an error wrapping ErrWorkflowNotFound.
	GetWorkflowContext(ctx context.Context, id string) (*tasks.WorkflowMeta, error)
}

// Withdrawer is a backend that takes back the PENDING states a send wrote
// when the send failed having published nothing (brokers/iface.ErrNotSent),
// so that no state reads as a task waiting to run that never will. Both of
// machinist's backends implement it. A withdrawal may return before it is
// done: it comes after the writes it takes back, even when those were
// still under way as the send gave up at its deadline (where the backend
// orders its writes: the Redis backend's go in order per task, or per
// workflow), and it leaves a state that something wrote since.
type Withdrawer interface {
	// WithdrawPendingContext deletes the PENDING states of sigs that
	// SetStatePendingContext wrote.
	WithdrawPendingContext(ctx context.Context, sigs ...*tasks.Signature) error
	// WithdrawWorkflowContext deletes the record of workflow id and the
	// PENDING states of pending that InitWorkflowContext wrote.
	WithdrawWorkflowContext(ctx context.Context, id string, pending ...*tasks.Signature) error
}

// QueueStateReader is a backend that reads a task's state sooner knowing
// the queue it was sent to: the Redis backend on a single server, where a
// task's PENDING state is implicit (its hash in its queue says it) and a
// read of a task with no state hash otherwise looks in every queue. The
// results (backends/result) use it when the backend has it.
type QueueStateReader interface {
	// GetStateInContext is GetStateContext, for a task sent to queue.
	GetStateInContext(ctx context.Context, queue, taskUUID string) (*tasks.TaskState, error)
}

// Notifier is a backend that tells a result's wait when its task
// finishes, so that Get returns then rather than at its next poll. Both of
// machinist's backends implement it (Redis on a single server; on a
// Cluster its waits only poll).
type Notifier interface {
	// WatchFinished starts watching task taskUUID: from when it returns,
	// the channel receives when the task's state may have become final,
	// or come to name the aggregate it joined (TaskState.Aggregate). A
	// notice says "read the state now", nothing more: it may come when
	// the state is not final yet, and one may be lost (a dropped
	// connection), so a waiter still polls. stop ends the watch. A nil
	// channel means the backend cannot watch now; stop is then a no-op.
	WatchFinished(ctx context.Context, taskUUID string) (notices <-chan struct{}, stop func())
}
