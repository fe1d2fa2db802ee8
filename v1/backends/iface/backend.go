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
