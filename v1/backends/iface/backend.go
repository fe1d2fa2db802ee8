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
)

// Backend is machinery v1's Backend interface, method for method: what
// Server.SetBackend takes and GetBackend returns, and what a backend
// written for machinery implements (see package common). machinist's
// backends are also ContextBackends, whose methods these run on
// context.Background(); machinist calls a backend that is not through
// these, with machinery's semantics (see docs/migrating.md).
type Backend = store.MachineryBackend

// ContextBackend is the context-aware form of Backend, named with Context
// (GetStateContext(ctx, taskUUID)) as database/sql's methods are: what
// machinist itself calls, and what a backend of your own writes, embedding
// Compat for machinery's methods. Every method is safe for concurrent use.
type ContextBackend = store.Backend
