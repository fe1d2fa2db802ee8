package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Progress is how far a running task has come (SetProgress).
type Progress struct {
	// Done of Total units of work (Total 0: not known).
	Done  int64 `json:"done"`
	Total int64 `json:"total,omitempty"`
	// Message says what the task is doing, for people.
	Message string `json:"message,omitempty"`
	// At is when the task reported it, set by SetProgress.
	At time.Time `json:"at"`
}

// Event is one entry of a task's event stream (Emit, AsyncResult.Watch).
type Event struct {
	// ID orders the events of a task; Watch can start after one.
	ID string
	// Kind is "progress" (Data is a Progress), "data" (what Emit was
	// given) or "state" (the task's final state, ending a Watch: Data is
	// {"state": …, "error": …}).
	Kind string
	// Attempt is the attempt of the task that wrote it, from 1: events of
	// a run cut short by a crash stay, marked with its attempt.
	Attempt int
	At      time.Time
	Data    json.RawMessage
}

// Limits of what a running task keeps (Checkpoint, Step).
const (
	// MaxDataSize is the most bytes of a checkpoint, or of one step's
	// result, as JSON.
	MaxDataSize = 1 << 20
	// MaxSteps bounds the steps (Step names) a task keeps results of: its
	// kept values, the checkpoint included, are at most MaxSteps + 1.
	MaxSteps = 1000
	// MaxStepName is the longest step name, in bytes.
	MaxStepName = 200
)

var (
	// ErrNotRunning is returned by SetProgress, Checkpoint, LoadCheckpoint
	// and Step given a context that is not a running task's.
	ErrNotRunning = errors.New("tasks: the context is not a running task's (pass the task function's context)")
	// ErrDataTooLarge is wrapped by the error of a checkpoint, or a step's
	// result, larger than MaxDataSize as JSON.
	ErrDataTooLarge = errors.New("tasks: checkpoint or step result too large")
	// ErrBadStep is wrapped by the error of a step with no name, a name
	// over MaxStepName, or one step too many (MaxSteps).
	ErrBadStep = errors.New("tasks: bad step")
)

// Runtime is what a running task's context gives SetProgress,
// Checkpoint, LoadCheckpoint and Step: the worker provides one for every
// task it runs (WithRuntime). Data is kept under keys: "checkpoint", and
// "step:" and a step's name.
type Runtime interface {
	// TaskUUID is the running task's UUID.
	TaskUUID() string
	// Progress records p, to be written soon (writes are coalesced).
	Progress(p Progress)
	// ReadData returns what is kept under key, and whether there is any.
	ReadData(ctx context.Context, key string) ([]byte, bool, error)
	// WriteData keeps value under key, under the task's lease: it fails
	// with the broker's ErrLeaseLost once the lease is lost.
	WriteData(ctx context.Context, key string, value []byte) error
	// DataKeys counts the keys kept.
	DataKeys(ctx context.Context) (int, error)
	// Emit appends an event of kind "data" with data (JSON) to the task's
	// event stream.
	Emit(ctx context.Context, data []byte) error
}

type runtimeCtxKey struct{}

// WithRuntime returns a copy of ctx that carries rt. The worker calls it
// for every task it runs.
func WithRuntime(ctx context.Context, rt Runtime) context.Context {
	return context.WithValue(ctx, runtimeCtxKey{}, rt)
}

func runtimeOf(ctx context.Context) Runtime {
	rt, _ := ctx.Value(runtimeCtxKey{}).(Runtime)
	return rt
}

// SetProgress reports how far the running task whose context ctx is has
// come. The worker writes it under the task's lease at most every 100 ms
// (the last report wins), and with the task's final state; any process
// reads it with the task's result (AsyncResult.Progress).
func SetProgress(ctx context.Context, p Progress) error {
	rt := runtimeOf(ctx)
	if rt == nil {
		return ErrNotRunning
	}
	p.At = time.Now().UTC()
	rt.Progress(p)
	return nil
}

// Checkpoint keeps v (as JSON, at most MaxDataSize bytes) for the task:
// a later attempt of it (after a retry, or after its worker died) reads
// the last one with LoadCheckpoint. It is written at once, under the
// task's lease: a worker that lost the lease writes nothing and gets an
// error. The checkpoint goes with the task when it succeeds.
func Checkpoint(ctx context.Context, v any) error {
	rt := runtimeOf(ctx)
	if rt == nil {
		return ErrNotRunning
	}
	raw, err := encodeData("checkpoint", v)
	if err != nil {
		return err
	}
	return rt.WriteData(ctx, "checkpoint", raw)
}

// LoadCheckpoint reads the task's last checkpoint into v, and reports
// whether there was one (none on a first attempt).
func LoadCheckpoint(ctx context.Context, v any) (bool, error) {
	rt := runtimeOf(ctx)
	if rt == nil {
		return false, ErrNotRunning
	}
	raw, ok, err := rt.ReadData(ctx, "checkpoint")
	if err != nil || !ok {
		return false, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("tasks: decode checkpoint: %w", err)
	}
	return true, nil
}

// Step runs fn once for the task: its result is kept under name (as JSON,
// at most MaxDataSize bytes), and a later attempt of the task gets it
// without calling fn again. fn's error is returned and nothing is kept,
// so a later attempt calls fn again.
//
// What it guarantees: once a step's result is kept, no attempt calls its
// fn again, and every attempt gets that result. fn itself runs at least
// once: a worker that dies (or loses the task's lease) after fn returned
// and before the result was kept leaves the next attempt to call it
// again. Give an outside API IdempotencyKey(ctx, name) so that a call
// repeated this way does nothing twice.
func Step[T any](ctx context.Context, name string, fn func() (T, error)) (T, error) {
	var zero T
	rt := runtimeOf(ctx)
	if rt == nil {
		return zero, ErrNotRunning
	}
	if name == "" || len(name) > MaxStepName {
		return zero, fmt.Errorf("%w: name %q: want 1 to %d bytes", ErrBadStep, name, MaxStepName)
	}
	key := "step:" + name
	raw, ok, err := rt.ReadData(ctx, key)
	if err != nil {
		return zero, fmt.Errorf("tasks: step %q: %w", name, err)
	}
	if ok {
		var out T
		if err := json.Unmarshal(raw, &out); err != nil {
			return zero, fmt.Errorf("tasks: step %q: decode its kept result: %w", name, err)
		}
		return out, nil
	}
	if n, err := rt.DataKeys(ctx); err != nil {
		return zero, fmt.Errorf("tasks: step %q: %w", name, err)
	} else if n >= MaxSteps+1 { // the checkpoint may be one of them
		return zero, fmt.Errorf("%w: %q would be more than MaxSteps (%d)", ErrBadStep, name, MaxSteps)
	}
	out, err := fn()
	if err != nil {
		return zero, err
	}
	raw, err = encodeData("step "+name, out)
	if err != nil {
		return zero, err
	}
	if err := rt.WriteData(ctx, key, raw); err != nil {
		return zero, fmt.Errorf("tasks: step %q: keep its result: %w", name, err)
	}
	return out, nil
}

// Emit appends data (as JSON, at most MaxDataSize bytes) to the running
// task's event stream: partial output, log lines, anything a reader
// following the task (AsyncResult.Watch) should see as it comes. The
// stream keeps the last MaxEvents events, for as long as the task's
// result is kept.
func Emit(ctx context.Context, data any) error {
	rt := runtimeOf(ctx)
	if rt == nil {
		return ErrNotRunning
	}
	raw, err := encodeData("event", data)
	if err != nil {
		return err
	}
	return rt.Emit(ctx, raw)
}

// MaxEvents is about how many events a task's stream keeps: older ones
// are dropped as new ones come (a Redis stream trimmed to about this
// length).
const MaxEvents = 10000

// IdempotencyKey returns a key that names step of the running task, the
// same in every attempt of it: pass it to an outside API that
// deduplicates requests, so that a step called again after a crash does
// nothing twice. Given a context that is not a running task's, it
// returns "".
func IdempotencyKey(ctx context.Context, step string) string {
	rt := runtimeOf(ctx)
	if rt == nil {
		return ""
	}
	return rt.TaskUUID() + "/" + step
}

func encodeData(what string, v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("tasks: encode %s: %w", what, err)
	}
	if len(raw) > MaxDataSize {
		return nil, fmt.Errorf("%w: %s is %d bytes as JSON, more than MaxDataSize (%d)", ErrDataTooLarge, what, len(raw), MaxDataSize)
	}
	return raw, nil
}
