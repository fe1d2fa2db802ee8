package result

import (
	"context"
	"errors"
	"reflect"
	"time"

	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// ChainAsyncResult is the handle of a sent chain.
type ChainAsyncResult struct {
	asyncResults []*AsyncResult
	backend      backends.Backend
}

// NewChainAsyncResult returns the handle of a chain of sigs on backend.
func NewChainAsyncResult(sigs []*tasks.Signature, backend backends.Backend) *ChainAsyncResult {
	rs := make([]*AsyncResult, len(sigs))
	for i, s := range sigs {
		rs[i] = NewAsyncResult(s, backend)
	}
	return &ChainAsyncResult{asyncResults: rs, backend: backend}
}

// Results returns the handles of the chain's tasks, in chain order.
func (r *ChainAsyncResult) Results() []*AsyncResult { return r.asyncResults }

// Get waits for every task of the chain in order and returns the last one's
// results, or the first error.
func (r *ChainAsyncResult) Get(sleepDuration time.Duration) ([]reflect.Value, error) {
	return r.GetWithContext(context.Background(), sleepDuration)
}

// GetWithTimeout is Get that gives up with ErrTimeoutReached after
// timeoutDuration.
func (r *ChainAsyncResult) GetWithTimeout(timeoutDuration, sleepDuration time.Duration) ([]reflect.Value, error) {
	return withTimeout(timeoutDuration, sleepDuration, r.GetWithContext)
}

// GetWithContext is Get that gives up with ctx's error when ctx ends.
//
// Each round reads the last task first: a chain moves on only after a
// success, so once the last task succeeded the chain did, and one read
// answers. Otherwise it reads, in order, the tasks not yet known to have
// succeeded, to report the first failure; except in a round a notice
// about the last task began (backends/backends.Notifier), which is about the
// last task alone: the others are read at the next tick of the poll
// (every sleepDuration).
func (r *ChainAsyncResult) GetWithContext(ctx context.Context, sleepDuration time.Duration) ([]reflect.Value, error) {
	if r.backend == nil {
		return nil, ErrBackendNotConfigured
	}
	last := r.asyncResults[len(r.asyncResults)-1]
	next := 0 // the first task not yet known to have succeeded
	return poll(ctx, sleepDuration, last.states, last.watched, func(noticed bool) ([]reflect.Value, error) {
		results, err := last.TouchWithContext(ctx)
		if err != nil || results != nil || noticed {
			return results, err
		}
		for ; next < len(r.asyncResults)-1; next++ {
			results, err := r.asyncResults[next].TouchWithContext(ctx)
			if err != nil {
				return nil, err
			}
			if results == nil {
				break // not done yet
			}
		}
		return nil, nil
	})
}

// ChordAsyncResult is the handle of a sent chord.
type ChordAsyncResult struct {
	groupAsyncResults []*AsyncResult
	chordAsyncResult  *AsyncResult
	backend           backends.Backend
}

// NewChordAsyncResult returns the handle of a chord of groupTasks and
// chordCallback on backend.
func NewChordAsyncResult(groupTasks []*tasks.Signature, chordCallback *tasks.Signature, backend backends.Backend) *ChordAsyncResult {
	rs := make([]*AsyncResult, len(groupTasks))
	for i, s := range groupTasks {
		rs[i] = NewAsyncResult(s, backend)
	}
	return &ChordAsyncResult{
		groupAsyncResults: rs,
		chordAsyncResult:  NewAsyncResult(chordCallback, backend),
		backend:           backend,
	}
}

// GroupResults returns the handles of the group's tasks, in group order.
func (r *ChordAsyncResult) GroupResults() []*AsyncResult { return r.groupAsyncResults }

// CallbackResult returns the handle of the callback.
func (r *ChordAsyncResult) CallbackResult() *AsyncResult { return r.chordAsyncResult }

// Get waits for the group and then for the callback, and returns the
// callback's results, or the first error of a group member or the callback.
func (r *ChordAsyncResult) Get(sleepDuration time.Duration) ([]reflect.Value, error) {
	return r.GetWithContext(context.Background(), sleepDuration)
}

// GetWithTimeout is Get that gives up with ErrTimeoutReached after
// timeoutDuration. Unlike machinery's, it reports members' and the
// callback's errors.
func (r *ChordAsyncResult) GetWithTimeout(timeoutDuration, sleepDuration time.Duration) ([]reflect.Value, error) {
	return withTimeout(timeoutDuration, sleepDuration, r.GetWithContext)
}

// GetWithContext is Get that gives up with ctx's error when ctx ends.
//
// It waits on the callback alone: the callback runs only once every member
// has succeeded, so its success says the group's, and polling costs one
// read however large the group. When the callback failed, the members are
// read to report a member's failure (as machinery reports it) before the
// callback's own.
func (r *ChordAsyncResult) GetWithContext(ctx context.Context, sleepDuration time.Duration) ([]reflect.Value, error) {
	if r.backend == nil {
		return nil, ErrBackendNotConfigured
	}
	results, err := r.chordAsyncResult.GetWithContext(ctx, sleepDuration)
	var taskErr *TaskError
	if err == nil || !errors.As(err, &taskErr) {
		return results, err
	}
	for _, ar := range r.groupAsyncResults {
		if _, merr := ar.TouchWithContext(ctx); merr != nil {
			var memberErr *TaskError
			if errors.As(merr, &memberErr) {
				return nil, merr
			}
		}
	}
	return nil, err
}
