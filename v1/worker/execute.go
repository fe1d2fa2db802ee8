package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/telemetry"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/retry"
	"github.com/b6192125/machinist/v1/tasks"
)

// Process runs sig to the end without a broker delivery, as machinery's
// Worker.Process does: states are written, callbacks sent, and a retry is
// sent again with an ETA through SendFunc, or, with RetryInline (eager
// mode), run again here when it is due: a loop, never a recursion. It returns an error only when a state or callback could not be
// written.
func (w *Worker) Process(ctx context.Context, sig *tasks.Signature) error {
	rt := w.newRuntime(ctx, sig, nil, w.arch.Logger)
	for attempt := 0; ; attempt++ {
		err := w.processOnce(ctx, sig, attempt, rt)
		var again *retryAt
		if !errors.As(err, &again) {
			return err
		}
		// RetryInline: run it again here, when its retry is due.
		t := w.arch.Clock.NewTimer(w.arch.Clock.Until(again.at))
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// processOnce is one attempt of Process, under its own span.
func (w *Worker) processOnce(ctx context.Context, sig *tasks.Signature, attempt int, rt *runtime) error {
	ctx, span := w.p.Tracing.StartProcess(ctx, sig, telemetry.Delivery{Queue: sig.RoutingKey, Retried: attempt})
	defer span.End()
	log := w.taskLog(sig, "", span)
	fn, err := w.p.Tasks.GetRegisteredTask(sig.Name)
	if err != nil {
		if sig.IgnoreWhenTaskNotRegistered {
			telemetry.Outcome(ctx, telemetry.OutcomeHandedOn, nil)
			return nil
		}
		return w.fail(ctx, sig, nil, fmt.Sprintf("task %q is not registered", sig.Name), log)
	}
	start := time.Now()
	rt.attempt(ctx, attempt)
	results, runErr, permanent := w.run(tasks.WithRuntime(ctx, rt), sig, nil, fn, attempt == 0, log)
	w.p.Metrics.Ran(ctx, sig.RoutingKey, sig.Name, outcome(sig, runErr, permanent), time.Since(start))
	return w.settle(withFinalProgress(context.WithoutCancel(ctx), rt.finish()), sig, nil, nil, results, runErr, permanent, log)
}

// run calls the task function, with STARTED written once it has run for
// StartedAfter. permanent reports an error that retrying cannot fix: the
// arguments do not fit.
//
// RECEIVED is not written: STARTED would replace it microseconds later, and
// skipping it saves a write per task. (SetStateReceived remains in the
// Backend interface for compatibility.)
// first says it is the task's first attempt, whose wait in the queue is
// measured.
func (w *Worker) run(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, fn interface{}, first bool, log *slog.Logger) (results []*tasks.TaskResult, err error, permanent bool) {
	deadline, hasDeadline := sig.Deadline()
	if hasDeadline {
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("its deadline, %s, has passed: %w", deadline.Format(time.RFC3339Nano), context.DeadlineExceeded), true
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	if sig.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sig.Timeout)
		defer cancel()
	}
	if sig.WorkflowNode != "" {
		w.linkParents(ctx, sig)
		ctx = tasks.WithParents(ctx, func(ctx context.Context) ([]tasks.ParentState, error) {
			return w.parents(ctx, sig)
		})
	}
	task, err := tasks.NewWithContext(ctx, fn, sig)
	if err != nil {
		return nil, err, true
	}
	if err := ctx.Err(); err != nil {
		return nil, err, false // lease lost or worker stopped before the start
	}
	defer w.markStarted(ctx, sig, d, log)()
	if w.p.PreTaskFunc != nil {
		w.p.PreTaskFunc(sig)
	}
	if w.p.PostTaskFunc != nil {
		defer w.p.PostTaskFunc(sig)
	}
	var queuedSince time.Time
	if first {
		queuedSince = telemetry.QueuedSince(sig)
	}
	m := w.p.Metrics
	m.Started(ctx, sig.RoutingKey, sig.Name, queuedSince)
	m.InFlight(ctx, w.p.ConsumerTag, 1)
	defer m.InFlight(ctx, w.p.ConsumerTag, -1)
	start := time.Now()
	results, err = task.Call()
	if err != nil && hasDeadline && !time.Now().Before(deadline) {
		permanent = true // a retry would start after the deadline
	}
	if err != nil {
		var perr *tasks.PanicError
		if errors.As(err, &perr) {
			log.Error("task panicked", slog.Any("panic", perr.Value), slog.String("stack", string(perr.Stack)))
			telemetry.Panicked(ctx, perr.Value, perr.Stack)
		}
		log.Debug("task failed", slog.Duration("duration", time.Since(start)), slog.Any("error", err))
	} else {
		log.Debug("task succeeded", slog.Duration("duration", time.Since(start)))
	}
	return results, err, permanent
}

// StartedAfter is how long a task runs before its state becomes STARTED. A
// task that ends sooner goes from PENDING straight to its outcome: its
// STARTED would be overwritten at once, and skipping it saves a round trip
// and three Redis commands per short task.
const StartedAfter = time.Millisecond

// markStarted arranges for STARTED to be written if the task is still
// running after StartedAfter, and returns the function to call when it
// returns: after that, STARTED is never written, so it cannot land after
// the task's outcome.
// The write is made under the task's lease (see write).
func (w *Worker) markStarted(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, log *slog.Logger) (finished func()) {
	var mu sync.Mutex
	done := false
	timer := w.arch.Clock.AfterFunc(StartedAfter, func() {
		mu.Lock()
		defer mu.Unlock()
		if done || ctx.Err() != nil {
			return
		}
		_, err := w.write(ctx, sig, d, tasks.NewStartedTaskState(sig), false)
		switch {
		case err == nil, errors.Is(err, brokers.ErrLeaseLost):
		case ctx.Err() != nil:
			// The task was stopped while STARTED was being written (it was
			// cancelled, its lease lost, or the worker stopped at once):
			// the write was cut short with it, as it should be.
			log.Debug("writing state STARTED stopped with the task", slog.Any("error", err))
		default:
			log.Warn("writing state STARTED failed", slog.Any("error", err))
		}
	})
	return func() {
		timer.Stop()
		mu.Lock()
		done = true
		mu.Unlock()
	}
}

// settle records the outcome of a run: success, retry or failure. d is nil
// when the task came without a broker delivery (Process). A success may
// take the next task for the slot, as h says (nil: none).
// The outcome is recorded on the span of ctx and counted once it is
// written.
func (w *Worker) settle(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, h *handoff, results []*tasks.TaskResult, err error, permanent bool, log *slog.Logger) error {
	switch outcome(sig, err, permanent) {
	case telemetry.OutcomeSuccess:
		return w.succeed(ctx, sig, d, h, results, log)
	case telemetry.OutcomeRetry:
		var in time.Duration
		if retriable := tasks.Retriable(nil); errors.As(err, &retriable) {
			in = retryDelay(retriable.RetryIn())
		} else {
			sig.RetryCount--
			sig.RetryTimeout = fibonacciNext(sig.RetryTimeout)
			in = retryDelay(time.Duration(sig.RetryTimeout) * time.Second)
		}
		rerr := w.retry(ctx, sig, d, in, err, log)
		if again := (*retryAt)(nil); rerr == nil || errors.As(rerr, &again) {
			telemetry.Retrying(ctx, err, in.Milliseconds())
			w.settled(ctx, sig.RoutingKey, sig.Name, telemetry.OutcomeRetry)
		}
		return rerr
	}
	w.reportError(err)
	return w.fail(ctx, sig, d, err.Error(), log)
}

// outcome says what settle does with a run of sig that returned err:
// success; retry (the task asked for it, or has retries left), unless the
// error is permanent; failure.
func outcome(sig *tasks.Signature, err error, permanent bool) string {
	switch {
	case err == nil:
		return telemetry.OutcomeSuccess
	case permanent:
		return telemetry.OutcomeFailure
	}
	var retriable tasks.Retriable
	if errors.As(err, &retriable) || sig.RetryCount > 0 {
		return telemetry.OutcomeRetry
	}
	return telemetry.OutcomeFailure
}

func (w *Worker) succeed(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, h *handoff, results []*tasks.TaskResult, log *slog.Logger) error {
	if next, ok := w.oneStep(sig, d, results); ok {
		// The result, what follows it and the acknowledgement in one step,
		// under the task's lease; each callback sent has its send span.
		spans := make([]trace.Span, len(next))
		for i, cb := range next {
			_, spans[i] = w.p.Tracing.StartSend(ctx, cb.RoutingKey, next[i:i+1])
		}
		taken, err := w.store.Settle(ctx, d, store.Settlement{
			Kind: store.SettleSuccess, State: w.successState(ctx, sig, results), Next: next, Take: h.wants()})
		if h != nil {
			h.next = taken
		}
		chordDue := errors.Is(err, brokers.ErrChordDue)
		if chordDue {
			err = nil // written and committed; the acknowledgement follows the election
		}
		for _, span := range spans {
			telemetry.Ended(span, err)
			span.End()
		}
		if unstorable(err) {
			return w.failUnstorable(ctx, sig, d, err, log)
		}
		if err == nil {
			w.settleStep("settled")
			w.succeeded(ctx, sig)
			for _, cb := range next {
				w.p.Metrics.Sent(ctx, cb.RoutingKey, cb.Name, 1)
			}
			if chordDue {
				// Not acknowledged yet: when this worker stops before it
				// is, the task's next holder finds the committed outcome
				// and runs the election again.
				if err := w.completeChordMember(ctx, sig, d); err != nil {
					return err
				}
				if err := w.ack(ctx, d, h); err != nil {
					return fmt.Errorf("worker: acknowledge task %s: %w", sig.UUID, err)
				}
			}
			log.Debug("task done")
			return nil
		}
		if errors.Is(err, brokers.ErrLeaseLost) {
			return fmt.Errorf("worker: acknowledge task %s: %w", sig.UUID, err)
		}
		// Nothing was written, or it was and the task is gone (then the
		// commit below finds the lease lost): the steps one by one say
		// which callback, if any, cannot be sent.
		log.Debug("settling in one step failed; settling step by step", slog.Any("error", err))
	}
	groupDone, err := w.write(ctx, sig, d, w.successState(ctx, sig, results), true)
	if unstorable(err) {
		return w.failUnstorable(ctx, sig, d, err, log)
	}
	if err != nil {
		return fmt.Errorf("worker: write state SUCCESS of task %s: %w", sig.UUID, err)
	}
	w.settleStep("committed")
	w.succeeded(ctx, sig)
	return w.afterSuccess(ctx, sig, d, h, results, groupDone, log)
}

// successState is sig's SUCCESS state with results; a chord member's,
// and a workflow node's, names the span that ran it, so that the chord's
// callback, or the nodes after it, link to its run.
func (w *Worker) successState(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) *tasks.TaskState {
	state := finalState(ctx, tasks.NewSuccessTaskState(sig, results))
	if (sig.ChordCallback != nil && sig.GroupUUID != "") || sig.WorkflowNode != "" {
		state.Trace = telemetry.Format(trace.SpanContextFromContext(ctx))
	}
	return state
}

// succeeded records sig's success, written, on the span of ctx and in the
// metrics.
func (w *Worker) succeeded(ctx context.Context, sig *tasks.Signature) {
	telemetry.Outcome(ctx, telemetry.OutcomeSuccess, nil)
	w.settled(ctx, sig.RoutingKey, sig.Name, telemetry.OutcomeSuccess)
}

// oneStep returns the OnSuccess callbacks of sig, ready to travel, when
// the store can settle d with its result and send them in one call
// (store.SettleSuccess; a chord member whose success completes its group
// is written in that call, and acknowledged after the election): there is
// a delivery, and no callback or PrepareFunc readies them.
func (w *Worker) oneStep(sig *tasks.Signature, d *brokers.Delivery, results []*tasks.TaskResult) ([]*tasks.Signature, bool) {
	if d == nil {
		return nil, false
	}
	if len(sig.OnSuccess) > 0 && w.p.PrepareFunc == nil {
		return nil, false
	}
	next := make([]*tasks.Signature, len(sig.OnSuccess))
	for i, cb := range sig.OnSuccess {
		next[i] = successCallback(sig, cb, results)
		w.p.PrepareFunc(next[i])
	}
	return next, true
}

// successCallback returns cb, an OnSuccess callback of sig, with sig's
// results appended to its args unless either is Immutable.
func successCallback(sig, cb *tasks.Signature, results []*tasks.TaskResult) *tasks.Signature {
	next := tasks.CopySignature(cb)
	if !sig.Immutable && !next.Immutable {
		next.Args = append(next.Args, tasks.ResultArgs(results)...)
	}
	return next
}

// afterSuccess does what follows sig's recorded success: it sends the
// OnSuccess callbacks with the results, the chord callback when sig
// completed its group (groupDone) and wins the election, and acknowledges
// the task, taking the next task for the slot as h says.
func (w *Worker) afterSuccess(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, h *handoff, results []*tasks.TaskResult, groupDone bool, log *slog.Logger) error {
	var errs []error
	for _, cb := range sig.OnSuccess {
		next := successCallback(sig, cb, results)
		if err := w.sendCallback(ctx, d, next); err != nil {
			errs = append(errs, fmt.Errorf("worker: send OnSuccess task %s of task %s: %w", next.UUID, sig.UUID, err))
		}
	}
	if sig.GroupUUID != "" && sig.ChordCallback != nil && groupDone {
		if err := w.completeChordMember(ctx, sig, d); err != nil {
			errs = append(errs, err)
		}
	}
	if sig.WorkflowNode != "" {
		errs = append(errs, w.releaseNodes(ctx, sig, d, results, log)...)
	}
	if err := errors.Join(errs...); err != nil {
		// Not acknowledged: when the lease runs out, the worker that takes
		// the task finds its committed outcome and sends what was not sent
		// (what was sent is not sent twice).
		return err
	}
	if d != nil {
		if err := w.ack(ctx, d, h); err != nil {
			return fmt.Errorf("worker: acknowledge task %s: %w", sig.UUID, err)
		}
	}
	log.Debug("task done")
	return nil
}

// releaseNodes records the success of sig, a node of its workflow's
// graph, and sends the nodes that follow it and are ready (those a run
// before a recovery sent are not sent again).
func (w *Worker) releaseNodes(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, results []*tasks.TaskResult, log *slog.Logger) []error {
	next, err := w.store.NodeSucceeded(ctx, sig, results)
	if errors.Is(err, store.ErrWorkflowNotFound) {
		log.Warn("the workflow's graph is gone (it outlived its TTL): no node follows this one",
			slog.String("workflow", sig.WorkflowUUID), slog.String("node", sig.WorkflowNode))
		return nil
	}
	if err != nil {
		return []error{fmt.Errorf("worker: record the success of node %q of workflow %s: %w", sig.WorkflowNode, sig.WorkflowUUID, err)}
	}
	w.settleStep("released")
	return w.sendNodes(ctx, sig, d, next)
}

// sendNodes sends next, the nodes that sig's outcome released (those a
// run before a recovery sent are not sent again).
func (w *Worker) sendNodes(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, next []*tasks.Signature) []error {
	var errs []error
	for _, n := range next {
		if err := w.sendCallback(ctx, d, n); err != nil {
			errs = append(errs, fmt.Errorf("worker: send node %q (task %s) of workflow %s: %w", n.WorkflowNode, n.UUID, sig.WorkflowUUID, err))
			continue
		}
		w.settleStep("sent " + n.UUID)
	}
	return errs
}

// parents returns the parents of sig, a node of its workflow, with their
// tasks' states (tasks.WorkflowParents).
func (w *Worker) parents(ctx context.Context, sig *tasks.Signature) ([]tasks.ParentState, error) {
	out := make([]tasks.ParentState, len(sig.WorkflowParents))
	for i, p := range sig.WorkflowParents {
		st, err := w.store.GetStateContext(ctx, p.UUID)
		if err != nil {
			return nil, fmt.Errorf("worker: parents of node %q: state of %q: %w", sig.WorkflowNode, p.Key, err)
		}
		out[i] = tasks.ParentState{Key: p.Key, State: st}
	}
	return out, nil
}

// linkParents adds to the span of ctx, when it records, a link to the
// span that ran each of sig's parents (a workflow node's), read from
// their states: a join has them all as causes.
func (w *Worker) linkParents(ctx context.Context, sig *tasks.Signature) {
	span := trace.SpanFromContext(ctx)
	if len(sig.WorkflowParents) == 0 || !span.IsRecording() {
		return
	}
	for _, p := range sig.WorkflowParents {
		st, err := w.store.GetStateContext(ctx, p.UUID)
		if err != nil {
			continue // its state expired: no link
		}
		if sc, ok := telemetry.Parse(st.Trace); ok {
			span.AddLink(trace.Link{SpanContext: sc})
		}
	}
}

// ack acknowledges d, taking the next task for the slot as h says.
func (w *Worker) ack(ctx context.Context, d *brokers.Delivery, h *handoff) error {
	next, err := w.store.Settle(ctx, d, store.Settlement{Kind: store.SettleAck, Take: h.wants()})
	if h != nil {
		h.next = next
	}
	return err
}

// failUnstorable fails sig, whose results cannot be stored (a NaN, a
// channel, a function...): running it again cannot help, so it fails once,
// with the reason.
func (w *Worker) failUnstorable(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, err error, log *slog.Logger) error {
	msg := fmt.Sprintf("task results cannot be stored: %v", err)
	w.reportError(errors.New(msg))
	return w.fail(ctx, sig, d, msg, log)
}

// write writes state, a state of sig, and for the final state of a group
// member records it in the group; it reports whether sig's group completed
// with it. With commit (a final state) it is first committed as the outcome
// of d. A worker that lost d's lease writes nothing (store.WriteState).
// Without a delivery (Process), the state is written as it is.
func (w *Worker) write(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, state *tasks.TaskState, commit bool) (bool, error) {
	return w.store.WriteState(ctx, store.WriteParams{Delivery: d, Signature: sig, State: state, Commit: commit})
}

// finishCommitted finishes a delivery whose outcome an earlier holder
// committed and then stopped (it died, hung or lost Redis while writing the
// state, sending callbacks or electing the chord's callback): the task is
// not run again; its state is written again (the same write, now under this
// delivery's lease) and what follows it is done.
func (w *Worker) finishCommitted(ctx context.Context, d *brokers.Delivery, log *slog.Logger) error {
	sig, out := d.Signature, d.Outcome
	log.Info("finishing a task whose outcome an earlier worker committed", slog.String("state", out.State))
	groupDone, err := w.write(ctx, sig, d, out, false)
	if err != nil {
		return fmt.Errorf("worker: write state %s of task %s: %w", out.State, sig.UUID, err)
	}
	if out.State == tasks.StateSuccess {
		return w.afterSuccess(ctx, sig, d, nil, out.Results, groupDone, log)
	}
	return w.afterFailure(ctx, sig, d, out.Error)
}

// completeChordMember sends the chord callback, sig's success having
// completed its group, when this member wins the election.
func (w *Worker) completeChordMember(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery) error {
	won, err := w.store.TriggerChordContext(ctx, sig.GroupUUID, sig.UUID)
	if err != nil {
		return fmt.Errorf("worker: trigger chord of group %s: %w", sig.GroupUUID, err)
	}
	if !won {
		return nil
	}
	states, err := w.store.GroupTaskStatesContext(ctx, sig.GroupUUID, sig.GroupTaskCount)
	if err != nil {
		return fmt.Errorf("worker: read states of group %s: %w", sig.GroupUUID, err)
	}
	callback := tasks.CopySignature(sig.ChordCallback)
	var links []trace.Link // only when traced: a member's span records
	for _, st := range states {
		if st.IsFailure() {
			// A member failed, and its own election came after ours (the
			// group completed in between): the error path is ours to run.
			return w.failChord(ctx, sig, d, st.TaskUUID, st.TaskName, st.Error)
		}
		if !callback.Immutable {
			callback.Args = append(callback.Args, tasks.ResultArgs(st.Results)...)
		}
		if sc, ok := telemetry.Parse(st.Trace); ok && trace.SpanFromContext(ctx).IsRecording() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	// The callback is sent under the chord's send span, with a link to
	// each member's run: it has them all as causes, not the last one.
	sendCtx := telemetry.ContextWithLinks(w.p.Tracing.SentFrom(ctx, sig), links)
	if err := w.sendCallback(sendCtx, d, callback); err != nil {
		return fmt.Errorf("worker: send chord callback %s of group %s: %w", callback.UUID, sig.GroupUUID, err)
	}
	return nil
}

func (w *Worker) retry(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, in time.Duration, cause error, log *slog.Logger) error {
	at := w.arch.Clock.Now().Add(in)
	log.Info("task will be retried", slog.Duration("retry_in", in), slog.Int("retries_left", sig.RetryCount), slog.Any("error", cause))
	if d != nil {
		_, err := w.store.Settle(ctx, d, store.Settlement{
			Kind: store.SettleRetry, State: tasks.NewRetryTaskState(sig), RetryAt: at, Reason: cause.Error()})
		if err != nil {
			return fmt.Errorf("worker: retry task %s: %w", sig.UUID, err)
		}
		return nil
	}
	if _, err := w.write(ctx, sig, d, tasks.NewRetryTaskState(sig), false); err != nil {
		return fmt.Errorf("worker: write state RETRY of task %s: %w", sig.UUID, err)
	}
	if w.p.RetryInline {
		return &retryAt{at: at}
	}
	sig.ETA = &at
	if err := w.p.SendFunc(ctx, sig); err != nil {
		return fmt.Errorf("worker: send retry of task %s: %w", sig.UUID, err)
	}
	return nil
}

// retryAt is what retry returns to Process, with RetryInline, for a task
// to run again at at.
type retryAt struct{ at time.Time }

func (r *retryAt) Error() string { return "worker: run again at " + r.at.Format(time.RFC3339Nano) }

// The bounds of the delay before a retry, on every broker. MinRetryDelay
// keeps a task that asks to be retried at once (ErrRetryTaskLater with no
// delay) from spinning: it runs at most about 50 times a second.
// MaxRetryDelay caps what RetryTimeout's Fibonacci sequence or a task's
// ErrRetryTaskLater asks for, so that no delay overflows a time.Time.
const (
	MinRetryDelay = 20 * time.Millisecond
	MaxRetryDelay = 7 * 24 * time.Hour
)

// retryDelay clamps d to [MinRetryDelay, MaxRetryDelay].
func retryDelay(d time.Duration) time.Duration { return min(max(d, MinRetryDelay), MaxRetryDelay) }

// fail records that sig failed for good with msg: FAILURE state, OnError
// callbacks, the chord's error callbacks, and the archive.
// The failure is recorded on the span of ctx and counted once written.
func (w *Worker) fail(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, msg string, log *slog.Logger) error {
	log.Error("task failed", slog.String("error", msg))
	if _, err := w.write(ctx, sig, d, finalState(ctx, tasks.NewFailureTaskState(sig, msg)), true); err != nil {
		return fmt.Errorf("worker: write state FAILURE of task %s: %w", sig.UUID, err)
	}
	telemetry.Outcome(ctx, telemetry.OutcomeFailure, errors.New(msg))
	w.settled(ctx, sig.RoutingKey, sig.Name, telemetry.OutcomeFailure)
	return w.afterFailure(ctx, sig, d, msg)
}

// FailTaken records that sig, a task an operator took out of its queue
// (deleted, archived or cancelled it), failed for good with msg: its state
// becomes FAILURE, and when it is a chord member the chord's error path
// runs (the callback fails), so that nobody waits for it forever. Its own
// OnError callbacks are sent, with msg as their error, only with onError.
func (w *Worker) FailTaken(ctx context.Context, sig *tasks.Signature, msg string, onError bool) error {
	if _, err := w.write(ctx, sig, nil, tasks.NewFailureTaskState(sig, msg), true); err != nil {
		return fmt.Errorf("worker: write state FAILURE of task %s: %w", sig.UUID, err)
	}
	if !onError {
		taken := *sig
		taken.OnError = nil
		sig = &taken
	}
	return w.afterFailure(ctx, sig, nil, msg)
}

// afterFailure does what follows sig's recorded failure with msg: it sends
// the OnError callbacks, runs the chord's error path when sig wins its
// election, and archives the task.
func (w *Worker) afterFailure(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, msg string) error {
	var errs []error
	errs = append(errs, w.sendErrorCallbacks(ctx, d, sig.OnError, msg)...)
	if sig.WorkflowNode != "" {
		if err := w.failGraph(ctx, sig, d, msg); err != nil {
			errs = append(errs, err)
		}
	}
	if sig.GroupUUID != "" && sig.ChordCallback != nil {
		won, err := w.store.TriggerChordContext(ctx, sig.GroupUUID, sig.UUID)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("worker: trigger chord of group %s: %w", sig.GroupUUID, err))
		case won:
			if err := w.failChord(ctx, sig, d, sig.UUID, sig.Name, msg); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if d != nil {
		if _, err := w.store.Settle(ctx, d, store.Settlement{Kind: store.SettleArchive, Reason: msg}); err != nil {
			return fmt.Errorf("worker: archive task %s: %w", sig.UUID, err)
		}
		w.p.Metrics.Archived(ctx, d.Queue, sig.Name, 1)
	}
	return nil
}

// failGraph records that sig, a node of its workflow, failed for good
// with msg. A node allowed to fail releases the nodes that follow it, as
// a success does. Otherwise the workflow fails: no node of it is sent
// after this; the nodes sent that still wait in their queues are taken
// out of them (archived, their state FAILURE as cancelled), and those
// running finish with nothing following them, or are cancelled when the
// workflow says so; the nodes never sent get state FAILURE as
// cancelled, with their OnError callbacks sent. What cannot be taken out
// or written is logged, not returned: the workflow has failed already,
// and a run again would not see those nodes.
func (w *Worker) failGraph(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, msg string) error {
	f, err := w.store.FailGraph(ctx, sig.WorkflowUUID, sig.WorkflowNode, msg)
	if errors.Is(err, store.ErrWorkflowNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("worker: fail workflow %s at node %q: %w", sig.WorkflowUUID, sig.WorkflowNode, err)
	}
	if f.Allowed {
		return errors.Join(w.sendNodes(ctx, sig, d, f.Ready)...)
	}
	reason := fmt.Sprintf("%s: its workflow failed at node %q", tasks.CancelledMessage, sig.WorkflowNode)
	logFailed := func(n *tasks.Signature, what string, err error) {
		w.arch.Logger.Warn("a node of a failed workflow could not be "+what,
			slog.String("workflow", sig.WorkflowUUID), slog.String("task", n.UUID), slog.Any("error", err))
	}
	for _, n := range f.Open {
		var taken *tasks.Signature
		if f.CancelRunning {
			taken, _, err = w.store.CancelTask(ctx, n.RoutingKey, n.UUID, reason, 0)
		} else {
			taken, err = w.store.TakeWaiting(ctx, n.RoutingKey, n.UUID, store.TakeArchive, reason)
		}
		if errors.Is(err, store.ErrTaskNotFound) || errors.Is(err, store.ErrTaskNotWaiting) {
			continue // running or finished
		}
		if err == nil {
			_, err = w.write(ctx, taken, nil, tasks.NewFailureTaskState(taken, reason), true)
		}
		if err != nil {
			logFailed(n, "taken out of its queue; it runs, and nothing follows it", err)
		}
	}
	for _, n := range f.Unsent {
		if _, err := w.write(ctx, n, nil, tasks.NewFailureTaskState(n, reason), true); err != nil {
			logFailed(n, "marked as cancelled; its state stays PENDING", err)
		}
		if err := errors.Join(w.sendErrorCallbacks(ctx, d, n.OnError, reason)...); err != nil {
			logFailed(n, "followed by its OnError callbacks", err)
		}
	}
	return nil
}

// failChord runs a chord's error path, once per group (its caller won the
// election): the callback's state becomes FAILURE naming the member that
// failed, and the callback's OnError signatures are sent with its error.
func (w *Worker) failChord(ctx context.Context, member *tasks.Signature, d *brokers.Delivery, failedUUID, failedName, msg string) error {
	cb := member.ChordCallback
	cbMsg := fmt.Sprintf("chord member %s (%s) failed: %s", failedUUID, failedName, msg)
	var errs []error
	if err := w.store.SetStateFailureContext(ctx, cb, cbMsg); err != nil {
		errs = append(errs, fmt.Errorf("worker: write state FAILURE of chord callback %s: %w", cb.UUID, err))
	}
	errs = append(errs, w.sendErrorCallbacks(ctx, d, cb.OnError, msg)...)
	return errors.Join(errs...)
}

func (w *Worker) sendErrorCallbacks(ctx context.Context, d *brokers.Delivery, callbacks []*tasks.Signature, msg string) []error {
	var errs []error
	for _, cb := range callbacks {
		cb = tasks.CopySignature(cb)
		cb.Args = append([]tasks.Arg{{Type: "string", Value: msg}}, cb.Args...)
		if err := w.sendCallback(ctx, d, cb); err != nil {
			errs = append(errs, fmt.Errorf("worker: send OnError task %s: %w", cb.UUID, err))
		}
	}
	return errs
}

// sendCallback sends cb with SendFunc. A task that runs again after a
// recovery may have sent its callbacks already, and they may have run and
// been forgotten by the broker: such a task first reads cb's state and
// leaves alone a callback that has started or finished.
func (w *Worker) sendCallback(ctx context.Context, d *brokers.Delivery, cb *tasks.Signature) error {
	if sent, err := w.store.SentBefore(ctx, d, cb); sent || err != nil {
		if err != nil {
			return fmt.Errorf("worker: callback %s: %w", cb.UUID, err)
		}
		return nil // sent by the earlier run, and under way or done
	}
	return w.p.SendFunc(ctx, cb)
}

// unstorable reports whether err says a task's results cannot be encoded
// (a NaN, a channel, a function...), or make a callback's message larger
// than MaxMessageSize: no retry will change that.
func unstorable(err error) bool {
	var value *json.UnsupportedValueError
	var typ *json.UnsupportedTypeError
	var marshaler *json.MarshalerError
	return errors.As(err, &value) || errors.As(err, &typ) || errors.As(err, &marshaler) ||
		errors.Is(err, brokers.ErrMessageTooLarge)
}

// fibonacciNext returns the first Fibonacci number greater than n:
// 0→1→2→3→5→8…, the retry timeouts in seconds, up to MaxRetryDelay
// (retry.FibonacciNext takes at most 92 steps; machinery's loop never
// ended for a huge n).
func fibonacciNext(n int) int {
	return min(retry.FibonacciNext(n), int(MaxRetryDelay/time.Second))
}
