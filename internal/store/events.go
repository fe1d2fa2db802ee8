package store

import (
	"context"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// Events is a backend that keeps each task's event stream (tasks.Emit,
// its progress): appended by the worker that runs it, read from any
// process from the start, kept as long as the task's state. Both of
// machinist's backends implement it.
type Events interface {
	// AppendEvent appends e (its ID is set by the backend) to the stream
	// of task uuid, which keeps about tasks.MaxEvents events.
	AppendEvent(ctx context.Context, uuid string, e tasks.Event) error
	// ReadEvents returns up to max events of task uuid after the event
	// after ("" from the start), waiting up to block for one when there
	// is none yet (0: not at all).
	ReadEvents(ctx context.Context, uuid, after string, max int, block time.Duration) ([]tasks.Event, error)
	// LastEvents returns the last n events of task uuid, oldest first.
	LastEvents(ctx context.Context, uuid string, n int) ([]tasks.Event, error)
}
