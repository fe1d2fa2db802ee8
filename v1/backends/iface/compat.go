package iface

import (
	"context"

	"github.com/google/uuid"

	"github.com/b6192125/machinist/v1/tasks"
)

// Compat gives a ContextBackend machinery v1's methods (Backend), each
// its Context form on context.Background(). An implementation embeds it,
// made with NewCompat on the implementation itself:
//
//	b := &Backend{...}
//	b.Compat = iface.NewCompat(b)
type Compat struct{ b ContextBackend }

// NewCompat returns the Compat of b.
func NewCompat(b ContextBackend) Compat { return Compat{b: b} }

// InitGroup is InitGroupContext on context.Background().
func (c Compat) InitGroup(groupUUID string, taskUUIDs []string) error {
	return c.b.InitGroupContext(context.Background(), groupUUID, taskUUIDs)
}

// GroupCompleted is GroupCompletedContext on context.Background().
func (c Compat) GroupCompleted(groupUUID string, groupTaskCount int) (bool, error) {
	return c.b.GroupCompletedContext(context.Background(), groupUUID, groupTaskCount)
}

// GroupTaskStates is GroupTaskStatesContext on context.Background().
func (c Compat) GroupTaskStates(groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error) {
	return c.b.GroupTaskStatesContext(context.Background(), groupUUID, groupTaskCount)
}

// TriggerChord returns true to the first caller for the group and false to
// every later one, as machinery's does: each call stands for a member of
// its own, so only the election's first winner is told true.
func (c Compat) TriggerChord(groupUUID string) (bool, error) {
	return c.b.TriggerChordContext(context.Background(), groupUUID, "trigger_"+uuid.NewString())
}

// SetStatePending is SetStatePendingContext on context.Background().
func (c Compat) SetStatePending(signature *tasks.Signature) error {
	return c.b.SetStatePendingContext(context.Background(), signature)
}

// SetStateReceived is SetStateReceivedContext on context.Background().
func (c Compat) SetStateReceived(signature *tasks.Signature) error {
	return c.b.SetStateReceivedContext(context.Background(), signature)
}

// SetStateStarted is SetStateStartedContext on context.Background().
func (c Compat) SetStateStarted(signature *tasks.Signature) error {
	return c.b.SetStateStartedContext(context.Background(), signature)
}

// SetStateRetry is SetStateRetryContext on context.Background().
func (c Compat) SetStateRetry(signature *tasks.Signature) error {
	return c.b.SetStateRetryContext(context.Background(), signature)
}

// SetStateSuccess is SetStateSuccessContext on context.Background().
func (c Compat) SetStateSuccess(signature *tasks.Signature, results []*tasks.TaskResult) error {
	return c.b.SetStateSuccessContext(context.Background(), signature, results)
}

// SetStateFailure is SetStateFailureContext on context.Background().
func (c Compat) SetStateFailure(signature *tasks.Signature, err string) error {
	return c.b.SetStateFailureContext(context.Background(), signature, err)
}

// GetState is GetStateContext on context.Background().
func (c Compat) GetState(taskUUID string) (*tasks.TaskState, error) {
	return c.b.GetStateContext(context.Background(), taskUUID)
}

// IsAMQP reports false: machinist has no AMQP backend.
func (Compat) IsAMQP() bool { return false }

// PurgeState is PurgeStateContext on context.Background().
func (c Compat) PurgeState(taskUUID string) error {
	return c.b.PurgeStateContext(context.Background(), taskUUID)
}

// PurgeGroupMeta is PurgeGroupMetaContext on context.Background().
func (c Compat) PurgeGroupMeta(groupUUID string) error {
	return c.b.PurgeGroupMetaContext(context.Background(), groupUUID)
}
