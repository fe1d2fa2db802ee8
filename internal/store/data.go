package store

import (
	"context"

	"github.com/b6192125/machinist/v1/tasks"
)

// ProgressKey is the key a running task's progress is kept under
// (TaskData): the other keys are tasks.Runtime's ("checkpoint", "step:"
// and a step's name).
const ProgressKey = "progress"

// TaskData is a broker that keeps what a running task writes (its
// checkpoint, its steps' results, its progress: tasks.Runtime) in the
// task's record, under the task's lease. What it keeps survives a retry
// and a recovery, and goes with the task when it is acknowledged. Both
// of machinist's brokers implement it.
type TaskData interface {
	// ReadTaskData returns what d's task keeps, by key.
	ReadTaskData(ctx context.Context, d *Delivery) (map[string][]byte, error)
	// WriteTaskData keeps data (key → value) for d's task, while the
	// caller holds d's lease: else an error wrapping ErrLeaseLost, and
	// nothing is written.
	WriteTaskData(ctx context.Context, d *Delivery, data map[string][]byte) error
	// TaskProgress returns the progress sig's task last wrote while it
	// runs, or nil for none (it wrote none, or it has finished: its final
	// state carries its progress).
	TaskProgress(ctx context.Context, sig *tasks.Signature) (*tasks.Progress, error)
}
