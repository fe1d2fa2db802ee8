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
// Two implementations ship: backends/memory and backends/redis. Both pass the
// conformance suite in backends/backendtest.
package iface

import (
	"context"

	"github.com/b6192125/machinist/v1/tasks"
)

// Backend stores task states and group bookkeeping. Every method is safe for
// concurrent use.
type Backend interface {
	// InitGroup records a group of taskUUIDs, in group order.
	InitGroup(ctx context.Context, groupUUID string, taskUUIDs []string) error
	// GroupCompleted reports whether groupTaskCount members of the group
	// have finished for good (SUCCESS or FAILURE). It reads the group's
	// bookkeeping, not every member's state.
	GroupCompleted(ctx context.Context, groupUUID string, groupTaskCount int) (bool, error)
	// GroupTaskStates returns the final states of the group's members in
	// group order, as recorded when each finished. A member that has not
	// finished is reported with its UUID and state PENDING.
	GroupTaskStates(ctx context.Context, groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error)
	// TriggerChord elects the member that sends the group's chord callback
	// (or, when a member failed, the callback's error callbacks). It returns
	// true to exactly one memberUUID per group, and true again to that same
	// member, so a member that died before sending the callback sends it
	// when it runs again.
	TriggerChord(ctx context.Context, groupUUID, memberUUID string) (bool, error)

	// SetStatePending writes the PENDING state of each signature.
	SetStatePending(ctx context.Context, sigs ...*tasks.Signature) error
	// SetStateReceived, SetStateStarted and SetStateRetry write a state
	// that is not final, and write nothing when the task's state is
	// already final (SUCCESS or FAILURE): a write that lands late, from a
	// worker paused past its lease, never hides a result.
	//
	// SetStateReceived writes the RECEIVED state of sig.
	SetStateReceived(ctx context.Context, sig *tasks.Signature) error
	// SetStateStarted writes the STARTED state of sig. An implementation
	// may queue the write and return before it lands (the Redis backend
	// does, to start the task a round trip sooner), provided its writes
	// land in the order they were made and its own reads see them.
	SetStateStarted(ctx context.Context, sig *tasks.Signature) error
	// SetStateRetry writes the RETRY state of sig.
	SetStateRetry(ctx context.Context, sig *tasks.Signature) error
	// SetStateSuccess writes the SUCCESS state of sig with its results and,
	// for a group member, records it in the group's bookkeeping.
	SetStateSuccess(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) error
	// CompleteGroupMember writes the SUCCESS state of sig, a group member,
	// as SetStateSuccess does, and reports whether the group has completed
	// with this write: the member whose write completes the group is told
	// true (as is one that finishes again after a recovery), others false.
	// It saves the worker a GroupCompleted round trip per chord member;
	// TriggerChord still elects the one member that sends the callback.
	CompleteGroupMember(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) (bool, error)
	// SetStateFailure writes the FAILURE state of sig with errMsg and, for
	// a group member, records it in the group's bookkeeping.
	SetStateFailure(ctx context.Context, sig *tasks.Signature, errMsg string) error
	// GetState returns the state of the task, or an error wrapping
	// ErrStateNotFound when there is none (never sent, purged or expired).
	GetState(ctx context.Context, taskUUID string) (*tasks.TaskState, error)
	// PurgeState deletes the state of the task.
	PurgeState(ctx context.Context, taskUUID string) error
	// PurgeGroupMeta deletes the group's bookkeeping.
	PurgeGroupMeta(ctx context.Context, groupUUID string) error

	// Close releases what the backend holds. Safe to call more than once.
	Close() error
}
