// Package result holds the handles that SendTask, SendChain and SendChord
// return: AsyncResult, ChainAsyncResult and ChordAsyncResult. Each waits for
// its task (or tasks) to finish by reading the result backend, and returns
// the results as reflect.Values, or the task's error.
//
// Unlike machinery's, Get does not poll forever when there is nothing left to
// wait for: a state that no longer exists (never sent, purged or expired)
// ends the wait with an error wrapping ErrStateNotFound, and every Get has a
// variant that takes a context.
package result

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/b6192125/machinist/internal/pair"
	"github.com/b6192125/machinist/internal/store"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

var (
	// ErrBackendNotConfigured is returned by a result without a backend.
	ErrBackendNotConfigured = errors.New("Result backend not configured")
	// ErrTimeoutReached is returned by GetWithTimeout when the task did not
	// finish in time.
	ErrTimeoutReached = errors.New("Timeout reached")
	// ErrStateNotFound is wrapped by the error of a Get whose task has no
	// state: it was never sent, or its state was purged or expired.
	ErrStateNotFound = backends.ErrStateNotFound
)

// TaskError is the error of a task that failed for good, as a result reports it.
type TaskError struct {
	TaskUUID string
	TaskName string
	Message  string
}

// Error returns the task's error message, as machinery's results do.
func (e *TaskError) Error() string { return e.Message }

// Unwrap returns tasks.ErrTaskCancelled for a cancelled task, else nil.
func (e *TaskError) Unwrap() error {
	if strings.HasPrefix(e.Message, tasks.CancelledMessage) {
		return tasks.ErrTaskCancelled
	}
	return nil
}

// defaultSleep is the polling interval of the Get variants given 0.
const defaultSleep = 5 * time.Millisecond

// AsyncResult is the handle of one sent task.
type AsyncResult struct {
	Signature *tasks.Signature

	mu        sync.Mutex
	taskState *tasks.TaskState
	backend   backends.Backend
	states    store.StateReader // backend, as it is read (nil with it)
}

// NewAsyncResult returns the handle of signature's task on backend.
func NewAsyncResult(signature *tasks.Signature, backend backends.Backend) *AsyncResult {
	return &AsyncResult{
		Signature: signature,
		taskState: &tasks.TaskState{TaskUUID: signature.UUID, TaskName: signature.Name},
		backend:   backend,
		states:    pair.Reader(backend),
	}
}

// Touch reads the task's state once: it returns the results when the task
// succeeded, its error when it failed, and (nil, nil) while it is not done.
func (r *AsyncResult) Touch() ([]reflect.Value, error) {
	return r.TouchWithContext(context.Background())
}

// TouchWithContext is Touch with a context. A state that no longer exists is
// an error wrapping ErrStateNotFound.
func (r *AsyncResult) TouchWithContext(ctx context.Context) ([]reflect.Value, error) {
	if r.backend == nil {
		return nil, ErrBackendNotConfigured
	}
	state, err := r.refresh(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case state.IsFailure():
		return nil, &TaskError{TaskUUID: state.TaskUUID, TaskName: state.TaskName, Message: state.Error}
	case state.IsSuccess():
		return tasks.ReflectTaskResults(state.Results)
	}
	return nil, nil
}

// ProgressReader is a backend that reads the progress of a running task
// (tasks.SetProgress) where its broker keeps it; machinist's Redis
// backend does, when it is on the broker's Redis.
type ProgressReader interface {
	TaskProgress(ctx context.Context, sig *tasks.Signature) (*tasks.Progress, error)
}

// Progress returns the last progress the task reported (tasks.SetProgress):
// while it runs, what its worker last wrote (at most ProgressEvery old,
// see package worker); once it has finished, what its final state
// carries. nil when it reported none. A backend that cannot read a
// running task's progress (no ProgressReader) gives only the final one.
func (r *AsyncResult) Progress(ctx context.Context) (*tasks.Progress, error) {
	if r.backend == nil {
		return nil, ErrBackendNotConfigured
	}
	state, err := r.refresh(ctx)
	if err != nil {
		return nil, err
	}
	if state.IsCompleted() || state.Progress != nil {
		return state.Progress, nil
	}
	pr, ok := r.backend.(ProgressReader)
	if !ok {
		return nil, nil
	}
	p, err := pr.TaskProgress(ctx, r.Signature)
	if err != nil {
		return nil, fmt.Errorf("progress of task %s: %w", r.Signature.UUID, err)
	}
	if p == nil {
		// It may have finished since: its final state has the last word.
		if state, err = r.refresh(ctx); err == nil && state.IsCompleted() {
			return state.Progress, nil
		}
	}
	return p, nil
}

// WatchPoll is how often Watch reads a task's new events; it reads the
// task's state every watchStateEvery polls, and as soon as the backend
// says the task finished (one Redis server, the embedded engine).
const WatchPoll = 100 * time.Millisecond

// watchStateEvery is how many of Watch's polls read the task's state.
const watchStateEvery = 10

// watchBatch is the most events Watch reads at once.
const watchBatch = 256

// Watch follows the task's event stream (tasks.Emit, its progress), from
// the event after after ("": from the start, whenever the task started),
// until the task reaches a final state: the last event is then a "state"
// one, whose Data is {"state": …, "error": …}. An error (the backend's,
// or ctx's when it ends) is the last thing yielded:
//
//	for e, err := range res.Watch(ctx, "") {
//		if err != nil {
//			return err
//		}
//		fmt.Println(e.Kind, string(e.Data))
//	}
//
// It reads the stream every WatchPoll, and the task's state every second
// and when the backend says the task finished (so on a Cluster, which
// says nothing, the end comes up to a second late), holding no
// connection between reads. The backend must keep events
// (backends.Events: both of machinist's do).
func (r *AsyncResult) Watch(ctx context.Context, after string) iter.Seq2[tasks.Event, error] {
	return func(yield func(tasks.Event, error) bool) {
		if r.backend == nil {
			yield(tasks.Event{}, ErrBackendNotConfigured)
			return
		}
		ev, ok := r.backend.(backends.Events)
		if !ok {
			yield(tasks.Event{}, fmt.Errorf("watch task %s: %T keeps no events", r.Signature.UUID, r.backend))
			return
		}
		notices, stop := r.states.WatchFinished(ctx, r.Signature.UUID)
		defer stop()
		ticker := time.NewTicker(WatchPoll)
		defer ticker.Stop()
		last := after
		var state *tasks.TaskState
		for poll := 0; ; poll++ {
			// The state first: events written before it became final are
			// all read below, before the end is told.
			if state == nil || poll%watchStateEvery == 0 {
				var err error
				if state, err = r.refresh(ctx); err != nil {
					yield(tasks.Event{}, err)
					return
				}
			}
			for {
				events, err := ev.ReadEvents(ctx, r.Signature.UUID, last, watchBatch, 0)
				if err != nil {
					yield(tasks.Event{}, err)
					return
				}
				for _, e := range events {
					last = e.ID
					if !yield(e, nil) {
						return
					}
				}
				if len(events) < watchBatch {
					break
				}
			}
			if state.IsCompleted() {
				data, _ := json.Marshal(map[string]string{"state": state.State, "error": state.Error})
				yield(tasks.Event{Kind: "state", At: time.Now().UTC(), Data: data}, nil)
				return
			}
			select {
			case <-ctx.Done():
				yield(tasks.Event{}, ctx.Err())
				return
			case <-ticker.C:
			case <-notices:
				state = nil // read it now
			}
		}
	}
}

// refresh reads the state from the backend unless the cached one is final.
func (r *AsyncResult) refresh(ctx context.Context) (*tasks.TaskState, error) {
	r.mu.Lock()
	cached := r.taskState
	r.mu.Unlock()
	if cached.IsCompleted() {
		return cached, nil
	}
	state, err := r.readState(ctx, r.Signature.UUID)
	if err != nil {
		return nil, fmt.Errorf("result of task %s (%s): %w", r.Signature.UUID, r.Signature.Name, err)
	}
	if aggregate := state.Aggregate; aggregate != "" {
		// An aggregation member: its outcome is its aggregate's (sent to
		// the member's queue unless its aggregator chose another).
		if state, err = r.readState(ctx, aggregate); err != nil {
			return nil, fmt.Errorf("result of task %s (%s), aggregated into %s: %w", r.Signature.UUID, r.Signature.Name, aggregate, err)
		}
	}
	r.mu.Lock()
	r.taskState = state
	r.mu.Unlock()
	return state, nil
}

// readState reads the state of task uuid, sent to the signature's queue
// as far as it knows (backends/backends.QueueStateReader).
func (r *AsyncResult) readState(ctx context.Context, uuid string) (*tasks.TaskState, error) {
	if r.Signature.RoutingKey != "" {
		return r.states.GetStateInContext(ctx, r.Signature.RoutingKey, uuid)
	}
	return r.states.GetStateContext(ctx, uuid)
}

// Get waits for the task to finish, reading its state every sleepDuration,
// and returns its results or its error. It stops with an error when the
// state no longer exists or the backend fails.
func (r *AsyncResult) Get(sleepDuration time.Duration) ([]reflect.Value, error) {
	return r.GetWithContext(context.Background(), sleepDuration)
}

// GetWithTimeout is Get that gives up with ErrTimeoutReached after
// timeoutDuration.
func (r *AsyncResult) GetWithTimeout(timeoutDuration, sleepDuration time.Duration) ([]reflect.Value, error) {
	return withTimeout(timeoutDuration, sleepDuration, r.GetWithContext)
}

// withTimeout runs get with a context that ends after timeout, reporting
// that end as ErrTimeoutReached.
func withTimeout(timeout, sleep time.Duration, get func(context.Context, time.Duration) ([]reflect.Value, error)) ([]reflect.Value, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	results, err := get(ctx, sleep)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, ErrTimeoutReached
	}
	return results, err
}

// poll calls touch until it reports done (results or an error), waiting
// sleep between calls, or until ctx ends. Where states can tell (a
// store.Notifier), it watches the task whose end ends the wait (watched
// names it, asked before the first call and after each) from before it
// reads it, and calls touch again as soon as the backend says that task
// finished, without waiting for the next tick: noticed tells touch that
// the call is for that task (a notice, or a watch just begun), not a
// tick's.
func poll(ctx context.Context, sleep time.Duration, states store.StateReader, watched func() string, touch func(noticed bool) ([]reflect.Value, error)) ([]reflect.Value, error) {
	if sleep <= 0 {
		sleep = defaultSleep
	}
	var (
		notices <-chan struct{}
		stop    = func() {}
		current string
	)
	defer func() { stop() }()
	// watch follows the task to watch; it reports whether that changed.
	watch := func() bool {
		id := watched()
		if id == current {
			return false
		}
		stop()
		notices, stop = states.WatchFinished(ctx, id)
		current = id
		return notices != nil // nil: the backend cannot watch; waits poll
	}
	watch()
	var ticker *time.Ticker
	noticed := false
	for {
		results, err := touch(noticed)
		if err != nil || results != nil {
			return results, err
		}
		if watch() {
			noticed = true
			continue // read again: it may have finished before the watch began
		}
		if ticker == nil {
			ticker = time.NewTicker(sleep)
			defer ticker.Stop()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ticker.C:
			noticed = false
		case <-notices:
			noticed = true
		}
	}
}

// GetWithContext is Get that gives up with ctx's error when ctx ends. It
// watches the task, or, once its state names the aggregate it joined,
// the aggregate.
func (r *AsyncResult) GetWithContext(ctx context.Context, sleepDuration time.Duration) ([]reflect.Value, error) {
	if r.backend == nil {
		return nil, ErrBackendNotConfigured
	}
	return poll(ctx, sleepDuration, r.states, r.watched, func(bool) ([]reflect.Value, error) { return r.TouchWithContext(ctx) })
}

// watched is the task whose state decides r's: its own, or the aggregate
// it joined, once read.
func (r *AsyncResult) watched() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.taskState.TaskUUID != "" {
		return r.taskState.TaskUUID
	}
	return r.Signature.UUID
}

// GetState returns the last state read, refreshing it unless it is final.
// Errors are not reported (as in machinery); use TouchWithContext for them.
func (r *AsyncResult) GetState() *tasks.TaskState {
	if r.backend != nil {
		_, _ = r.refresh(context.Background())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.taskState
}
