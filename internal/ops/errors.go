package ops

import "errors"

// Errors callers branch on (the command maps them to exit codes).
var (
	// ErrQueueNotFound: no task was ever sent to the queue.
	ErrQueueNotFound = errors.New("ops: queue not found")
	// ErrUnsupported: the broker or backend cannot do what was asked (a
	// broker that cannot list its queues, keep workers or aggregate; a
	// backend that keeps no workflows).
	ErrUnsupported = errors.New("ops: not supported by this broker or backend")
)
