// Package null is machinery's null result backend: it keeps no state. A
// Server given one runs its tasks and sends their callbacks, but no state
// can be read: GetState and PurgeState fail as for a task never sent, and
// waiting on a result waits until its context ends. A group is known once
// InitGroup recorded it, and counts as completed at once (machinery's
// semantics: a chord's callback may then be sent by every member that
// finishes). For tests, and for tasks whose outcome nobody reads.
package null

import (
	"context"
	"fmt"
	"sync"

	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// ErrGroupNotFound is the error of a group InitGroup did not record.
type ErrGroupNotFound struct {
	groupUUID string
}

// NewErrGroupNotFound returns the ErrGroupNotFound of groupUUID.
func NewErrGroupNotFound(groupUUID string) ErrGroupNotFound {
	return ErrGroupNotFound{groupUUID: groupUUID}
}

func (e ErrGroupNotFound) Error() string { return fmt.Sprintf("Group not found: %v", e.groupUUID) }

// ErrTasknotFound is the error of every state read: none is kept. It
// matches backends/iface.ErrStateNotFound (errors.Is).
type ErrTasknotFound struct {
	taskUUID string
}

// NewErrTasknotFound returns the ErrTasknotFound of taskUUID.
func NewErrTasknotFound(taskUUID string) ErrTasknotFound {
	return ErrTasknotFound{taskUUID: taskUUID}
}

func (e ErrTasknotFound) Error() string { return fmt.Sprintf("Task not found: %v", e.taskUUID) }

// Is makes the error match backends/iface.ErrStateNotFound.
func (e ErrTasknotFound) Is(target error) bool { return target == backends.ErrStateNotFound }

// Backend keeps no state, only the groups InitGroup recorded.
type Backend struct {
	backends.Compat
	mu     sync.Mutex
	groups map[string]bool
}

// New returns a null backend.
func New() backends.Backend {
	b := &Backend{groups: make(map[string]bool)}
	b.Compat = backends.NewCompat(b)
	return b
}

func (b *Backend) known(groupUUID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.groups[groupUUID] {
		return NewErrGroupNotFound(groupUUID)
	}
	return nil
}

// InitGroupContext records the group.
func (b *Backend) InitGroupContext(_ context.Context, groupUUID string, _ []string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.groups[groupUUID] = true
	return nil
}

// GroupCompletedContext reports true for a group InitGroup recorded.
func (b *Backend) GroupCompletedContext(_ context.Context, groupUUID string, _ int) (bool, error) {
	if err := b.known(groupUUID); err != nil {
		return false, err
	}
	return true, nil
}

// GroupTaskStatesContext returns no states for a group InitGroup recorded.
func (b *Backend) GroupTaskStatesContext(_ context.Context, groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error) {
	if err := b.known(groupUUID); err != nil {
		return nil, err
	}
	return make([]*tasks.TaskState, 0, groupTaskCount), nil
}

// TriggerChordContext reports true to every member.
func (b *Backend) TriggerChordContext(context.Context, string, string) (bool, error) {
	return true, nil
}

// SetStatePendingContext writes nothing.
func (b *Backend) SetStatePendingContext(context.Context, ...*tasks.Signature) error { return nil }

// SetStateReceivedContext writes nothing.
func (b *Backend) SetStateReceivedContext(context.Context, *tasks.Signature) error { return nil }

// SetStateStartedContext writes nothing.
func (b *Backend) SetStateStartedContext(context.Context, *tasks.Signature) error { return nil }

// SetStateRetryContext writes nothing.
func (b *Backend) SetStateRetryContext(context.Context, *tasks.Signature) error { return nil }

// SetStateSuccessContext writes nothing.
func (b *Backend) SetStateSuccessContext(context.Context, *tasks.Signature, []*tasks.TaskResult) error {
	return nil
}

// CompleteGroupMember writes nothing, and reports the group completed.
func (b *Backend) CompleteGroupMember(context.Context, *tasks.Signature, *tasks.TaskState) (bool, error) {
	return true, nil
}

// SetStateAggregatedContext writes nothing.
func (b *Backend) SetStateAggregatedContext(context.Context, string, ...*tasks.Signature) error {
	return nil
}

// SetStateFailureContext writes nothing.
func (b *Backend) SetStateFailureContext(context.Context, *tasks.Signature, string) error { return nil }

// GetStateContext fails: no state is kept.
func (b *Backend) GetStateContext(_ context.Context, taskUUID string) (*tasks.TaskState, error) {
	return nil, NewErrTasknotFound(taskUUID)
}

// PurgeStateContext fails: no state is kept.
func (b *Backend) PurgeStateContext(_ context.Context, taskUUID string) error {
	return NewErrTasknotFound(taskUUID)
}

// PurgeGroupMetaContext forgets nothing but checks the group is known.
func (b *Backend) PurgeGroupMetaContext(_ context.Context, groupUUID string) error {
	return b.known(groupUUID)
}

// Close does nothing.
func (b *Backend) Close() error { return nil }
