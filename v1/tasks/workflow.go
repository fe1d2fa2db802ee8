package tasks

import (
	"fmt"

	"github.com/google/uuid"
)

// Chain runs its tasks one after the other: each one's results are appended
// to the next one's Args unless the next one is Immutable, and a failure
// stops the chain.
type Chain struct {
	Tasks []*Signature
}

// Group runs its tasks in parallel.
type Group struct {
	GroupUUID string
	Tasks     []*Signature
}

// Chord runs Group, then Callback once with every member's results appended
// in group order. If a member fails for good, Callback does not run; its
// OnError signatures run instead, with that member's error.
type Chord struct {
	Group    *Group
	Callback *Signature
}

// GetUUIDs returns the UUIDs of the group's tasks in group order.
func (group *Group) GetUUIDs() []string {
	ids := make([]string, len(group.Tasks))
	for i, t := range group.Tasks {
		ids[i] = t.UUID
	}
	return ids
}

// NewChain links signatures into a chain: each one becomes the only OnSuccess
// callback of the one before it. Missing UUIDs are filled in.
func NewChain(signatures ...*Signature) (*Chain, error) {
	if len(signatures) == 0 {
		return nil, ErrEmptyWorkflow
	}
	if err := validateAll(signatures); err != nil {
		return nil, err
	}
	for _, s := range signatures {
		if s.UUID == "" {
			s.UUID = "task_" + uuid.NewString()
		}
	}
	for i := len(signatures) - 1; i > 0; i-- {
		signatures[i-1].OnSuccess = []*Signature{signatures[i]}
	}
	return &Chain{Tasks: signatures}, nil
}

// NewGroup makes a group of signatures with a fresh "group_" UUID, which it
// sets on every member together with the member count. Missing UUIDs are
// filled in.
func NewGroup(signatures ...*Signature) (*Group, error) {
	if len(signatures) == 0 {
		return nil, ErrEmptyWorkflow
	}
	if err := validateAll(signatures); err != nil {
		return nil, err
	}
	groupUUID := "group_" + uuid.NewString()
	for _, s := range signatures {
		if s.UUID == "" {
			s.UUID = "task_" + uuid.NewString()
		}
		s.GroupUUID = groupUUID
		s.GroupTaskCount = len(signatures)
	}
	return &Group{GroupUUID: groupUUID, Tasks: signatures}, nil
}

// NewChord makes a chord: callback runs once every task of group has
// succeeded. The callback gets a "chord_" UUID when it has none.
func NewChord(group *Group, callback *Signature) (*Chord, error) {
	if group == nil || len(group.Tasks) == 0 {
		return nil, ErrEmptyWorkflow
	}
	if err := callback.Validate(); err != nil {
		return nil, fmt.Errorf("chord callback: %w", err)
	}
	if callback.UUID == "" {
		callback.UUID = "chord_" + uuid.NewString()
	}
	for _, s := range group.Tasks {
		s.ChordCallback = callback
	}
	return &Chord{Group: group, Callback: callback}, nil
}

// Validate reports what makes the chain impossible to send.
func (c *Chain) Validate() error {
	if c == nil || len(c.Tasks) == 0 {
		return ErrEmptyWorkflow
	}
	return validateAll(c.Tasks)
}

// Validate reports what makes the group impossible to send.
func (group *Group) Validate() error {
	if group == nil || len(group.Tasks) == 0 {
		return ErrEmptyWorkflow
	}
	if group.GroupUUID == "" {
		return ErrEmptyGroupUUID
	}
	for _, s := range group.Tasks {
		if s != nil && s.AggregationKey != "" {
			return fmt.Errorf("%w (%q, key %q)", ErrAggregationMember, s.Name, s.AggregationKey)
		}
		if s != nil && s.UniqueFor > 0 {
			return fmt.Errorf("%w (%q)", ErrUniqueInWorkflow, s.Name)
		}
	}
	return validateAll(group.Tasks)
}

// Validate reports what makes the chord impossible to send.
func (c *Chord) Validate() error {
	if c == nil || c.Group == nil {
		return ErrEmptyWorkflow
	}
	if err := c.Group.Validate(); err != nil {
		return err
	}
	if err := c.Callback.Validate(); err != nil {
		return fmt.Errorf("chord callback: %w", err)
	}
	if c.Callback.UniqueFor > 0 {
		return fmt.Errorf("chord callback: %w (%q)", ErrUniqueInWorkflow, c.Callback.Name)
	}
	return nil
}

func validateAll(signatures []*Signature) error {
	for i, s := range signatures {
		if err := s.Validate(); err != nil {
			return fmt.Errorf("task %d: %w", i, err)
		}
	}
	return nil
}
