package ops

import (
	"errors"

	"github.com/b6192125/machinist/internal/store"
)

// Errors callers branch on (the command maps them to exit codes).
var (
	// ErrQueueNotFound: no task was ever sent to the queue.
	ErrQueueNotFound = errors.New("ops: queue not found")
	// ErrUnsupported: the broker or backend cannot do what was asked (a
	// broker that cannot list its queues, keep workers or aggregate; a
	// backend that keeps no workflows).
	ErrUnsupported = store.ErrUnsupported
)
