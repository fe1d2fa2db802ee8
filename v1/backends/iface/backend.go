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
	"github.com/b6192125/machinist/internal/store"
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
type ContextBackend = store.Backend
