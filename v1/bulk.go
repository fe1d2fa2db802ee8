package machinery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/telemetry"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// MaxSendTasks is the most signatures one SendTasks call takes.
const MaxSendTasks = 100000

// sendTasksParallel is how many of a SendTasks call's sends are under way
// at once: the store gathers concurrent sends to a queue into shared
// script runs (up to a few hundred tasks each).
const sendTasksParallel = 1024

// ErrBadBatch is wrapped by the error of a SendTasks call refused before
// anything was sent: no signatures, more than MaxSendTasks, or one that
// is nil or not valid.
var ErrBadBatch = errors.New("machinist: send tasks: bad batch")

// SendTasksError is the error of a SendTasks call some of whose tasks were
// not sent: Errs is aligned with the signatures given, nil for each task
// sent. errors.Is and errors.As look into each.
type SendTasksError struct {
	Errs []error
}

func (e *SendTasksError) Error() string {
	failed, first := 0, -1
	for i, err := range e.Errs {
		if err != nil {
			failed++
			if first < 0 {
				first = i
			}
		}
	}
	return fmt.Sprintf("machinist: send tasks: %d of %d not sent; the first, #%d: %v", failed, len(e.Errs), first, e.Errs[first])
}

// Unwrap returns the errors of the tasks not sent.
func (e *SendTasksError) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// SendTasks sends sigs, each as SendTaskWithContext sends one (its ETA,
// unique key, limit and aggregation key honoured), many to a script run:
// it returns a result for each, aligned with sigs (nil for a task not
// sent), and, when some were not sent, a *SendTasksError whose Errs say
// why, each as SendTaskWithContext would (a UUID already queued, or given
// twice in sigs: brokers/iface.ErrDuplicateTask; ErrNotSent or
// ErrMaybeSent when ctx ended or Redis failed). On one Redis server the
// tasks of a queue go up to 1,000 to a script run, each all or nothing;
// on a Cluster as concurrent sends, which the store gathers into runs of
// a few hundred. The batch as a whole is not atomic: a failure leaves the
// tasks sent before it sent.
//
// A batch of no signatures, of more than MaxSendTasks, or with a nil or
// invalid signature is refused whole, before anything is sent, with an
// error wrapping ErrBadBatch and ErrNotSent.
func (s *Server) SendTasks(ctx context.Context, sigs []*tasks.Signature) ([]*result.AsyncResult, error) {
	if err := checkBatch(sigs); err != nil {
		return nil, store.NotSent(err)
	}
	results := make([]*result.AsyncResult, len(sigs))
	errs := make([]error, len(sigs))
	seen := make(map[string]int, len(sigs))
	for i, sig := range sigs {
		if sig.UUID == "" {
			continue
		}
		if first, dup := seen[sig.UUID]; dup {
			errs[i] = store.NotSent(fmt.Errorf("machinist: send task %s: also #%d of the batch: %w", sig.UUID, first, brokers.ErrDuplicateTask))
			continue
		}
		seen[sig.UUID] = i
	}
	if s.eager == nil && s.invalid == nil && s.sendEach(ctx, sigs, results, errs) {
		return results, batchError(errs)
	}
	// A few long-lived senders take the tasks in turn: their stacks grow
	// once, not once per task as a goroutine per task would.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(sendTasksParallel, len(sigs)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(sigs); i = int(next.Add(1)) - 1 {
				if errs[i] == nil {
					results[i], errs[i] = s.SendTaskWithContext(ctx, sigs[i])
				}
			}
		})
	}
	wg.Wait()
	return results, batchError(errs)
}

// batchError is the error of a batch whose tasks' errors are errs: nil
// when all were sent.
func batchError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return &SendTasksError{Errs: errs}
		}
	}
	return nil
}

// sendEach sends the tasks of sigs whose errs are nil through the store's
// batch send, filling in results and errs, and reports whether the store
// has one (else nothing was sent: the caller sends them one by one).
func (s *Server) sendEach(ctx context.Context, sigs []*tasks.Signature, results []*result.AsyncResult, errs []error) bool {
	// Asked first: the tasks sent one by one are prepared, and run past
	// the pre-publish hook, by each send.
	if !s.store().SendsEach() {
		return false
	}
	var live []*tasks.Signature
	var at []int
	for i, sig := range sigs {
		if errs[i] == nil {
			s.prepare(sig)
			live = append(live, sig)
			at = append(at, i)
		}
	}
	s.runPrePublish(live...)
	ctx, span := s.tracing.StartSend(ctx, commonQueue(live), live)
	defer span.End()
	sent := s.store().SendEach(ctx, live)
	backend := s.GetBackend()
	var failed error
	for j, err := range sent {
		i, sig := at[j], live[j]
		if err != nil {
			errs[i] = s.keptOut(ctx, sig, fmt.Errorf("machinist: send task %s (%s): %w", sig.UUID, sig.Name, err))
			failed = errs[i]
			continue
		}
		results[i] = result.NewAsyncResult(sig, backend)
		s.metrics.Sent(ctx, sig.RoutingKey, sig.Name, 1)
	}
	telemetry.Ended(span, failed)
	return true
}

// checkBatch refuses a batch SendTasks cannot take, naming why.
func checkBatch(sigs []*tasks.Signature) error {
	switch {
	case len(sigs) == 0:
		return fmt.Errorf("%w: no signatures", ErrBadBatch)
	case len(sigs) > MaxSendTasks:
		return fmt.Errorf("%w: %d signatures, more than MaxSendTasks (%d)", ErrBadBatch, len(sigs), MaxSendTasks)
	}
	var bad []string
	for i, sig := range sigs {
		var err error
		if sig == nil {
			err = tasks.ErrNilSignature
		} else {
			err = sig.Validate()
		}
		if err != nil && len(bad) < 3 {
			bad = append(bad, fmt.Sprintf("#%d: %v", i, err))
		} else if err != nil {
			bad = append(bad, "…")
			break
		}
	}
	if bad != nil {
		return fmt.Errorf("%w: %s", ErrBadBatch, strings.Join(bad, "; "))
	}
	return nil
}
