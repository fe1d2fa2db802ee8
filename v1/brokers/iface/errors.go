package iface

import "errors"

// Errors of brokers. Implementations wrap them with %w, so callers branch
// with errors.Is.
var (
	// ErrLeaseLost is returned when the caller no longer holds the lease of
	// the task it tries to acknowledge, retry, archive or requeue.
	ErrLeaseLost = errors.New("brokers: lease lost")
	// ErrDuplicateTask is returned by Publish when a task with the same UUID
	// is still queued, scheduled, waiting for a retry or running.
	ErrDuplicateTask = errors.New("brokers: a task with this UUID is already queued")
	// ErrTaskNotFound is returned when a task named by UUID is not where the
	// caller expects it.
	ErrTaskNotFound = errors.New("brokers: task not found")
	// ErrClosed is returned by a broker that was closed.
	ErrClosed = errors.New("brokers: broker closed")
	// ErrNoQueue is returned when an operation is given no queue name.
	ErrNoQueue = errors.New("brokers: no queue given")
)
