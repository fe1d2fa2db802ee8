package iface

import "errors"

// Errors of result backends. Implementations wrap them with %w, so callers
// branch with errors.Is.
var (
	// ErrStateNotFound is returned for a task that has no state: it was
	// never sent, or its state was purged or expired.
	ErrStateNotFound = errors.New("backends: task state not found")
	// ErrGroupNotFound is returned for a group that has no bookkeeping.
	ErrGroupNotFound = errors.New("backends: group not found")
	// ErrWorkflowNotFound is returned for a UUID that names no recorded
	// workflow, nor a task of one (Workflows.GetWorkflowContext).
	ErrWorkflowNotFound = errors.New("backends: workflow not found")
	// ErrClosed is returned by a backend that was closed.
	ErrClosed = errors.New("backends: backend closed")
	// ErrAuth is wrapped by errors that say the store (Redis) wants
	// credentials the URL lacks, or refused those given. It is also
	// brokers/iface.ErrAuth.
	ErrAuth = errors.New("Redis requires authentication, or refused the credentials given: " +
		`put them in the URL ("redis://:password@host:port" or "redis://user:password@host:port")`)
)
