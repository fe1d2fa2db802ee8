package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/pair"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/telemetry"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Registry finds the function registered under a task name.
type Registry interface {
	GetRegisteredTask(name string) (interface{}, error)
	// GetRegisteredTaskNames returns every name registered. The worker
	// announces them to the broker (brokers.LeaseBroker.Announce), so
	// that the tasks it lacks are rerouted to workers that have them.
	GetRegisteredTaskNames() []string
}

// Params configures a Worker.
type Params struct {
	// Broker and Backend hold the tasks and their states. The worker runs
	// on them joined into one store (internal/pair), which settles a task
	// with its state in one step where the broker writes the backend's
	// states itself. Run needs a brokers.LeaseBroker; Process runs a task
	// handed over by any broker, one written for machinery included.
	Broker  brokers.Broker
	Backend backends.Backend
	// BrokerName and BackendName say which broker and backend these are,
	// in the line Run logs when the worker starts: their URLs, passwords
	// redacted, or their types. Empty: their types.
	BrokerName, BackendName string
	// Config must have been through WithDefaults.
	Config *config.Config
	Logger *slog.Logger
	Tasks  Registry
	// SendFunc sends a callback (OnSuccess, OnError, chord callback, or a
	// retried task when there is no broker delivery) the way
	// Server.SendTask does. It should treat brokers.ErrDuplicateTask as
	// success: a callback sent again after a recovery is already queued.
	// (A task that runs again after a recovery first checks each
	// callback's state and does not send one that has already started.)
	SendFunc func(ctx context.Context, sig *tasks.Signature) error
	// PrepareFunc readies a callback to travel as SendFunc would before
	// publishing it (its UUID, queue and headers, the pre-publish
	// handler), for a broker paired with the backend to publish it in the
	// same step as it settles the task that sends it
	// (store.SettleSuccess). Without it, callbacks go through
	// SendFunc.
	PrepareFunc func(sig *tasks.Signature)
	// Tracing starts the span of each attempt at a task, and of the
	// callbacks a broker paired with the backend publishes in one step
	// with it (internal/telemetry). Nil: the global OpenTelemetry
	// provider and propagator.
	Tracing *telemetry.Tracing
	// Metrics records the tasks started, their duration, outcome and wait
	// in the queue, and the tasks in flight. Nil: the global
	// OpenTelemetry meter provider.
	Metrics *telemetry.Metrics

	// RetryInline makes Process run a task's retries itself, in a loop,
	// instead of sending them through SendFunc (eager mode, where sending
	// would run them inside the retry, one call deeper each time).
	RetryInline bool

	ConsumerTag string
	Concurrency int
	// Queues are the queues to consume, with Weights (default 1 each):
	// each fetch tries them in a random order weighted by Weights, or,
	// with StrictPriority, highest weight first.
	Queues         []string
	Weights        []int
	StrictPriority bool

	ErrorHandlerFunc func(err error)
	PreTaskFunc      func(sig *tasks.Signature)
	PostTaskFunc     func(sig *tasks.Signature)
	// PreConsumeFunc gates each fetch: while it returns false the worker
	// takes nothing and asks again every Redis.NormalTasksPollPeriod.
	PreConsumeFunc func() bool

	// Clock times the worker: STARTED, retries, lease renewal, shutdown.
	// Default the wall clock.
	Clock clock.Clock

	// StartedFunc, if set, is called once Run has announced the worker's
	// task names and aggregators to the broker (or tried to for a
	// LeaseDuration, reporting each failure) and is about to fetch.
	StartedFunc func()

	// AggregationStepFunc, if set, is called after each step of a batch,
	// with the step's name, from the goroutine building the batch (several
	// at once when Concurrency is more than 1): "claimed" (ClaimBatch
	// returned the batch), "built" (the aggregator built its aggregate),
	// "states" (the aggregate's PENDING state and the members' states are
	// written), "completed" (CompleteBatch published the aggregate and
	// forgot the batch) or "lost" (the batch's lease ended first: nothing
	// more is written; a batch whose aggregate was handed over to another
	// slot, Batch.Aggregate, is finished by whoever takes it next). For
	// fault-injection tests: a test kills or pauses the worker at a step.
	// Default none.
	AggregationStepFunc func(step string)

	// SettleStepFunc, if set, is called after each step of a task's
	// success, with the step's name, from the goroutine that ran it:
	// "settled" (written, what follows sent and acknowledged in one step
	// where the store can), or, settled step by step, "committed" (the
	// outcome committed and the state written), "released" (a workflow
	// node's success recorded in its graph) and "sent <uuid>" (a task
	// that follows sent). For fault-injection tests. Default none.
	SettleStepFunc func(step string)
}

// Worker fetches tasks from a broker and runs them. Run it once.
type Worker struct {
	p Params
	// arch is the logger and clock of the worker and of its loops.
	arch   *service.Archetype
	queues *queueOrder
	store  *pair.Store
	// fetching ends when the worker stops taking tasks (Run's fetch
	// context): a settle then takes no next task.
	fetching context.Context

	abort     chan struct{}
	abortOnce sync.Once

	mu     sync.Mutex
	active map[*running]struct{}
	// building holds the batches whose aggregates the worker is building:
	// the heartbeat renews their leases with the tasks' (aggregate.go).
	building map[*brokers.Batch]struct{}
	// cancelled holds, until when they matter, the UUIDs of tasks
	// cancelled while this worker had not yet started them (the gap
	// between a fetch and start): start stops them.
	cancelled map[string]time.Time
	// abandoning is set, under mu, when shutdown gives up on the tasks
	// still running: a task a settle takes after that is put back, not
	// started.
	abandoning bool
	wg         sync.WaitGroup

	names     atomic.Pointer[brokers.TaskNames] // the registry's names, as last announced
	announced atomic.Int64                      // when the last announcement lapses, in Unix ns

	// identity is what the heartbeat reports of the worker, and tally
	// the tasks it finished since (monitor.go).
	identity brokers.WorkerInfo
	tally    tally
	// unmonitored is set once the store says it keeps no workers
	// (store.ErrUnsupported): the worker then neither beats nor tallies.
	unmonitored atomic.Bool
}

// running is one task being run. Its owner (the task's goroutine, which
// settles it, or shutdown, which abandons it) is decided once by claim.
type running struct {
	d      *brokers.Delivery
	cancel context.CancelFunc
	done   chan struct{}
	owner  atomic.Int32 // 0 running, 1 settling, 2 abandoned
	// cancelled: the task was cancelled while it ran (WatchCancels).
	cancelled atomic.Bool
}

const (
	ownerRunning int32 = iota
	ownerSettling
	ownerAbandoned
)

func (r *running) claim(owner int32) bool { return r.owner.CompareAndSwap(ownerRunning, owner) }

// New returns a worker; Run starts it.
func New(p Params) *Worker {
	if p.Concurrency < 1 {
		p.Concurrency = 1
	}
	arch := service.NewArchetype(p.Logger, p.Clock)
	if p.Tracing == nil {
		p.Tracing = telemetry.NewTracing(nil, nil)
	}
	if p.Metrics == nil {
		p.Metrics = telemetry.NewMetrics(nil)
	}
	w := &Worker{
		p:      p,
		arch:   arch.With(slog.String("worker", p.ConsumerTag)),
		store:  pair.New(p.Broker, p.Backend, arch.Logger),
		queues: newQueueOrder(p.Queues, p.Weights, p.StrictPriority),
		abort:  make(chan struct{}),
		active: make(map[*running]struct{}),
	}
	if p.SettleStepFunc != nil {
		w.store.SetSettleSteps(p.SettleStepFunc)
	}
	w.identity = w.newIdentity()
	return w
}

// settleStep calls Params.SettleStepFunc, if set, after step.
func (w *Worker) settleStep(step string) {
	if w.p.SettleStepFunc != nil {
		w.p.SettleStepFunc(step)
	}
}

// ErrAborted is returned by Run after Abort.
var ErrAborted = errors.New("worker: stopped abruptly")

// Abort stops the worker hard: running tasks are cancelled and put back in
// their queue at once. Safe to call more than once, and before Run.
func (w *Worker) Abort() {
	w.abortOnce.Do(func() { close(w.abort) })
}

// Run fetches and runs tasks until ctx ends, then shuts down gracefully (see
// the package documentation), or until Abort. It returns nil after a
// graceful shutdown, ErrAborted after Abort, and an error wrapping
// brokers.ErrClosed when the broker was closed under it.
func (w *Worker) Run(ctx context.Context) error {
	fetchCtx, stopFetch := context.WithCancel(ctx)
	defer stopFetch()
	w.fetching = fetchCtx
	go func() {
		select {
		case <-w.abort:
			stopFetch()
		case <-fetchCtx.Done():
		}
	}()

	// Task contexts outlive ctx: a graceful stop lets them finish.
	taskCtx, cancelTasks := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTasks()
	// Leases are renewed until the last task is settled or requeued,
	// after ctx has ended: the heartbeat's context does not end with it.
	w.identity.StartedAt = w.arch.Clock.Now()
	heartbeat := w.newHeartbeat()
	if err := heartbeat.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("worker: start the lease renewal: %w", err)
	}

	w.announceFirst(fetchCtx)
	announcer := w.newAnnouncer()
	if err := announcer.Start(context.WithoutCancel(ctx)); err != nil {
		heartbeat.Stop()
		return fmt.Errorf("worker: start the announcements: %w", err)
	}
	w.arch.Logger.Info("worker started", slog.String("broker", w.brokerName()), slog.String("result_backend", w.backendName()),
		slog.Int("concurrency", w.p.Concurrency), slog.Any("queues", w.p.Queues))
	if w.p.StartedFunc != nil {
		w.p.StartedFunc()
	}
	// Cancellations stop running tasks at once; without them a cancelled
	// task stops when its lease renewal is refused. The watch is set up
	// before the first fetch (waited for a moment at most).
	watch := w.newCancelWatch()
	if w.store.Cancels() {
		_ = watch.Start(taskCtx) // a new service starts
		t := w.arch.Clock.NewTimer(min(w.p.Config.LeaseRenewInterval, time.Second))
		select {
		case <-watch.ready:
		case <-t.C():
			w.arch.Logger.Warn("watching cancellations is not set up yet; fetching anyway")
		}
		t.Stop()
	}
	// Aggregation runs beside fetching: it claims no batch once fetching
	// stops, and the batches being built are let finish, as running tasks
	// are, up to the shutdown timeout.
	batches := &batches{w: w}
	if len(w.aggregators()) > 0 {
		_ = batches.Start(taskCtx) // a new service starts
	} else {
		batches.Stop() // Stopped is closed
	}
	fetchErr := w.fetchLoop(fetchCtx, taskCtx)
	stopFetch()
	// Batches being built and running tasks share one shutdown timeout,
	// counted from here. An aggregator still building when it passes, or
	// at Abort, has its context cancelled and is not waited for: its
	// batch's lease ends, and another worker builds it again.
	deadline := w.arch.Clock.Now().Add(w.p.Config.ShutdownTimeout)
	aggTimer := w.arch.Clock.NewTimer(w.p.Config.ShutdownTimeout)
	select {
	case <-batches.Stopped():
	case <-aggTimer.C():
		w.arch.Logger.Warn("an aggregator did not return within the shutdown timeout; its batch is taken again")
	case <-w.abort:
	}
	batches.Stop()
	aggTimer.Stop()

	// Shutdown, in order: fetching has stopped; wait for running tasks
	// for what is left of the timeout; abandon and requeue the rest; then
	// stop watching cancellations (no task runs any more), announcing and
	// renewing leases.
	w.waitRunning(max(w.arch.Clock.Until(deadline), 0))
	w.abandonRunning()
	watch.Stop()
	announcer.Stop()
	heartbeat.Stop()
	w.unregister()
	w.arch.Logger.Info("worker stopped")

	switch {
	case fetchErr != nil:
		return fetchErr
	case w.aborted():
		return ErrAborted
	}
	return nil
}

func (w *Worker) aborted() bool {
	select {
	case <-w.abort:
		return true
	default:
		return false
	}
}

// fetchLoop takes tasks while slots are free, until ctx ends.
func (w *Worker) fetchLoop(ctx, taskCtx context.Context) error {
	slots := make(chan struct{}, w.p.Concurrency)
	release := func(n int) {
		for i := 0; i < n; i++ {
			<-slots
		}
	}
	// A failing Fetch (Redis down) is tried again after a jittered
	// backoff, and logged once, then once per 30 s with a count. The
	// backoff stops at 1 s: one attempt a second costs Redis nothing, and
	// work resumes within a second of Redis coming back.
	backoff := service.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	fails := w.arch.FailureLog("fetch")
	failures := 0
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := 1
	more:
		for n < w.p.Concurrency {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		if w.aborted() {
			// Abort cancels ctx from another goroutine; do not let a Fetch
			// slip in before that happens.
			release(n)
			return nil
		}
		if w.p.PreConsumeFunc != nil && !w.p.PreConsumeFunc() {
			release(n)
			if !w.sleep(ctx, time.Duration(w.p.Config.Redis.NormalTasksPollPeriod)*time.Millisecond) {
				return nil
			}
			continue
		}
		fctx, stopGate := w.gated(ctx)
		ds, err := w.store.Fetch(fctx, w.queues.next(), n, w.names.Load())
		closed := fctx.Err() != nil && ctx.Err() == nil
		stopGate()
		if err != nil {
			release(n)
			if ctx.Err() != nil {
				return nil
			}
			if closed {
				continue // the gate closed while the fetch waited
			}
			if errors.Is(err, brokers.ErrClosed) {
				return err
			}
			failures++
			w.reportError(fmt.Errorf("worker: fetch: %w", err))
			fails.Failed(err)
			if !w.sleep(ctx, backoff.Delay(failures)) {
				return nil
			}
			continue
		}
		if failures > 0 {
			failures = 0
			fails.Succeeded()
		}
		release(n - len(ds))
		for _, d := range ds {
			w.start(taskCtx, d, func() { release(1) })
		}
	}
}

// gated returns the context of one fetch: with a pre-consume gate, it ends
// when the gate, asked again every poll period while the fetch waits (as
// machinery asks it before each BLPOP), closes or does not answer within
// a poll period; the fetch loop then asks it again itself before the next
// fetch. Errors of the fetch itself (Redis hung or down) are the fetch's,
// not the gate's. stop ends the watch.
func (w *Worker) gated(ctx context.Context) (fctx context.Context, stop func()) {
	if w.p.PreConsumeFunc == nil {
		return ctx, func() {}
	}
	period := time.Duration(w.p.Config.Redis.NormalTasksPollPeriod) * time.Millisecond
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer cancel()
		timer := w.arch.Clock.NewTimer(period)
		defer timer.Stop()
		for {
			select {
			case <-done:
				return
			case <-timer.C():
			}
			// A gate that blocks is given up on, not waited for: its
			// goroutine returns whenever the gate does.
			answer := make(chan bool, 1)
			go func() { answer <- w.p.PreConsumeFunc() }()
			timer.Reset(period)
			select {
			case <-done:
				return
			case open := <-answer:
				if !open {
					return
				}
			case <-timer.C():
				return
			}
		}
	}()
	return fctx, func() {
		close(done)
		cancel()
	}
}

// start runs d in its own goroutine; done is called when it has finished.
// A task its settle took for the slot it freed (handoff) runs next in the
// same slot, on the same goroutine (its stack already grown to what a run
// needs): done is called when the last of them has finished.
func (w *Worker) start(parent context.Context, d *brokers.Delivery, done func()) {
	r, ctx := w.admit(parent, d, done)
	if r == nil {
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for r != nil {
			next := w.runOne(ctx, r)
			// r leaves the running tasks only once the task its settle
			// took is among them, or put back: shutdown, which waits for
			// r, then waits for that task too.
			var nr *running
			var nctx context.Context
			if next != nil {
				nr, nctx = w.admit(parent, next, done)
			} else {
				done()
			}
			w.mu.Lock()
			delete(w.active, r)
			w.mu.Unlock()
			close(r.done)
			r, ctx = nr, nctx
		}
	}()
}

// admit adds d to the running tasks and returns it with its context, or
// nil when shutdown has given up on the running tasks: then d is put back
// and done called.
func (w *Worker) admit(parent context.Context, d *brokers.Delivery, done func()) (*running, context.Context) {
	ctx, cancel := context.WithCancel(parent)
	r := &running{d: d, cancel: cancel, done: make(chan struct{})}
	w.mu.Lock()
	if w.abandoning {
		// Taken by a settle after shutdown gave up on the running tasks.
		w.mu.Unlock()
		cancel()
		w.putBack(d)
		done()
		return nil, nil
	}
	w.active[r] = struct{}{}
	if _, ok := w.cancelled[d.Signature.UUID]; ok {
		delete(w.cancelled, d.Signature.UUID)
		r.cancelled.Store(true)
		d.Lease.Lose() // cancelled between its fetch and now
	}
	w.mu.Unlock()
	return r, ctx
}

// runOne runs r until it is settled, and returns the task its settle took
// for the slot, if any.
func (w *Worker) runOne(ctx context.Context, r *running) *brokers.Delivery {
	defer r.cancel()
	defer context.AfterFunc(r.d.Lease.Context(), r.cancel)() // a lost lease stops the task
	return w.handle(ctx, r)
}

// putBack requeues d, a task this worker took but will not run.
func (w *Worker) putBack(d *brokers.Delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.store.Requeue(ctx, d); err != nil {
		w.arch.Logger.Error("requeueing a task taken at shutdown failed; it comes back when its lease expires",
			slog.String("task", d.Signature.UUID), slog.Any("error", err))
	}
	d.Lease.Lose()
}

// handoff is what a settle may do with the slot its task frees: take the
// next task of the task's queue for it (brokers.Relay), as take says (nil:
// nothing), and next is the task it took.
type handoff struct {
	take *brokers.Take
	next *brokers.Delivery
}

// handoffFor returns the handoff of d's settle: a take when the broker can
// take in a settle, the worker is still fetching, has no pre-consume gate,
// and would fetch from d's queue first; else nil. The take is only ever
// of a queue a fetch would try first, so a worker's tasks are those it
// would have fetched.
func (w *Worker) handoffFor(d *brokers.Delivery) *handoff {
	if w.fetching.Err() != nil || w.p.PreConsumeFunc != nil || !w.queues.first(d.Queue) {
		return nil
	}
	return &handoff{take: &brokers.Take{Names: w.names.Load()}}
}

// wants returns the take of h, or nil for a nil h.
func (h *handoff) wants() *brokers.Take {
	if h == nil {
		return nil
	}
	return h.take
}

// handle runs one delivered task and settles it. It returns the task the
// settle took for the slot (handoff), or nil.
func (w *Worker) handle(ctx context.Context, r *running) *brokers.Delivery {
	d := r.d
	sig := d.Signature
	ctx, span := w.p.Tracing.StartProcess(ctx, sig, telemetry.Delivery{Queue: d.Queue, Retried: d.Retried, Recovered: d.Recovered})
	defer span.End()
	log := w.taskLog(sig, d.Queue, span)

	// A delivery that is not to be run is settled at once: a message that
	// cannot be decoded fails with the reason; a task whose outcome an
	// earlier holder committed is finished; a member of an aggregation
	// group is never run alone (the broker strands it when no worker
	// aggregates it any more); a task this worker does not have is handed
	// back.
	var settleNow func(ctx context.Context) error
	fn, err := w.p.Tasks.GetRegisteredTask(sig.Name)
	switch {
	case d.Err != nil:
		settleNow = func(ctx context.Context) error {
			w.reportError(fmt.Errorf("worker: task %s in queue %s: %w", sig.UUID, d.Queue, d.Err))
			return w.fail(ctx, sig, d, d.Err.Error(), log)
		}
	case d.Outcome != nil:
		settleNow = func(ctx context.Context) error {
			telemetry.Event(ctx, "finishing the outcome an earlier attempt committed")
			telemetry.Outcome(ctx, strings.ToLower(d.Outcome.State), nil)
			return w.finishCommitted(ctx, d, log)
		}
	case sig.AggregationKey != "":
		settleNow = func(ctx context.Context) error {
			w.tryLater(ctx, d, log, fmt.Sprintf("no worker alive aggregates task %q on queue %q (key %q)", sig.Name, d.Queue, sig.AggregationKey))
			return nil
		}
	case err != nil:
		settleNow = func(ctx context.Context) error { w.settleUnregistered(ctx, d, log); return nil }
	}
	if settleNow != nil {
		if !r.claim(ownerSettling) || !d.Lease.Valid() {
			_ = w.lost(ctx, r)
			return nil
		}
		sctx, cancel := detach(ctx)
		defer cancel()
		if err := settleNow(sctx); err != nil {
			w.reportError(err)
			log.Error("settling task failed", slog.Any("error", err))
		}
		return nil
	}

	start := time.Now()
	rt := w.newRuntime(ctx, sig, d, log)
	results, runErr, permanent := w.run(tasks.WithRuntime(ctx, rt), sig, d, fn, d.Retried == 0 && d.Recovered == 0, log)
	ctx = withFinalProgress(ctx, rt.finish())
	ran := func(outcome string) { w.p.Metrics.Ran(ctx, sig.RoutingKey, sig.Name, outcome, time.Since(start)) }

	if !r.claim(ownerSettling) {
		log.Warn("task finished after the worker gave it up; its outcome is not recorded")
		ran(w.lost(ctx, r))
		return nil
	}
	if !d.Lease.Valid() {
		if w.wasCancelled(ctx, r) {
			log.Info("task cancelled while it ran; its outcome is not recorded")
		} else {
			log.Warn("task lease lost while it ran; its outcome is not recorded, the task runs again elsewhere")
		}
		ran(w.lost(ctx, r))
		return nil
	}
	ran(outcome(sig, runErr, permanent))
	sctx, cancel := detach(ctx)
	defer cancel()
	h := w.handoffFor(d)
	if err := w.settle(sctx, sig, d, h, results, runErr, permanent, log); err != nil {
		switch {
		case errors.Is(err, brokers.ErrLeaseLost) && w.wasCancelled(sctx, r):
			// Cancelled as it finished: nothing was written.
			log.Info("task cancelled while it ran; its outcome is not recorded")
			_ = w.lost(ctx, r)
		case errors.Is(err, brokers.ErrLeaseLost):
			telemetry.Outcome(ctx, telemetry.OutcomeLeaseLost, err)
			fallthrough
		default:
			w.reportError(err)
			log.Error("settling task failed", slog.Any("error", err))
		}
	}
	if h == nil {
		return nil
	}
	return h.next
}

// taskLog returns the logger of one attempt at sig: the task, its queue
// and, when it is traced, its trace and span ids.
func (w *Worker) taskLog(sig *tasks.Signature, queue string, span trace.Span) *slog.Logger {
	attrs := []any{slog.String("task_id", sig.UUID), slog.String("task_name", sig.Name)}
	if queue != "" {
		attrs = append(attrs, slog.String("queue", queue))
	}
	if sc := span.SpanContext(); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return w.arch.Logger.With(attrs...)
}

// lost records on the span of ctx why r's outcome is not recorded, and
// returns it: its lease was lost, or shutdown gave it up (it runs again
// elsewhere).
func (w *Worker) lost(ctx context.Context, r *running) string {
	if r.cancelled.Load() {
		telemetry.Outcome(ctx, telemetry.OutcomeCancelled, errors.New(tasks.CancelledMessage))
		return telemetry.OutcomeCancelled
	}
	if r.owner.Load() == ownerAbandoned {
		telemetry.Outcome(ctx, telemetry.OutcomeAbandoned, errors.New("cancelled: the worker stopped; the task was put back in its queue"))
		return telemetry.OutcomeAbandoned
	}
	telemetry.Outcome(ctx, telemetry.OutcomeLeaseLost, brokers.ErrLeaseLost)
	return telemetry.OutcomeLeaseLost
}

// wasCancelled reports whether r, whose lease is gone, was cancelled
// rather than lost: the watch said so, or, when the lease renewal found
// the lease gone first (the watch's message had not come yet, or the watch
// was down), the broker holds the task archived as cancelled (a running
// task is archived in the step that takes its lease: see
// brokers.Canceller). Then the task does not run again, and its worker
// says it was cancelled.
func (w *Worker) wasCancelled(ctx context.Context, r *running) bool {
	if r.cancelled.Load() {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	info, err := w.store.GetTask(ctx, r.d.Queue, r.d.Signature.UUID)
	if err != nil || info.Status != brokers.StatusArchived || !strings.HasPrefix(info.LastError, tasks.CancelledMessage) {
		return false
	}
	r.cancelled.Store(true)
	return true
}

// detach returns a context for the writes that settle a task: not cancelled
// with the task (whose deadline may have passed), but bounded.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// settleUnregistered settles a task whose name this worker has not
// registered: it is dropped (IgnoreWhenTaskNotRegistered), or rerouted to
// the workers alive on its queue that announced its name, or, when there is
// none, tried again after UnregisteredTaskDelay (a worker that has it may
// be starting) and failed after UnregisteredTaskTries.
func (w *Worker) settleUnregistered(ctx context.Context, d *brokers.Delivery, log *slog.Logger) {
	sig := d.Signature
	if sig.IgnoreWhenTaskNotRegistered {
		log.Info("dropping task: not registered, and IgnoreWhenTaskNotRegistered is set")
		telemetry.Outcome(ctx, telemetry.OutcomeHandedOn, nil)
		if _, err := w.store.Settle(ctx, d, store.Settlement{Kind: store.SettleAck}); err != nil {
			log.Error("acknowledging dropped task failed", slog.Any("error", err))
		}
		return
	}
	rerouted, err := w.store.Reroute(ctx, d)
	switch {
	case err != nil:
		log.Error("rerouting unregistered task failed", slog.Any("error", err))
		return
	case rerouted:
		log.Debug("task not registered here; rerouted to the workers that have it")
		telemetry.Outcome(ctx, telemetry.OutcomeHandedOn, nil)
		return
	}
	w.tryLater(ctx, d, log, fmt.Sprintf("task %q is not registered on any worker alive on queue %q", sig.Name, d.Queue))
}

// tryLater hands back d's task, which no worker alive can take as it is
// (why says what is missing), to be tried again after
// UnregisteredTaskDelay (a worker that can may be starting), or fails it
// once it was tried UnregisteredTaskTries times.
func (w *Worker) tryLater(ctx context.Context, d *brokers.Delivery, log *slog.Logger, why string) {
	tries := d.Retried + 1
	if tries >= w.p.Config.UnregisteredTaskTries {
		msg := fmt.Sprintf("%s (%d tries, %s apart)", why, tries, w.p.Config.UnregisteredTaskDelay)
		log.Error("failing task: "+why, slog.Int("tries", tries))
		if err := w.fail(ctx, d.Signature, d, msg, log); err != nil {
			log.Error("failing task failed", slog.Any("error", err))
		}
		return
	}
	telemetry.Retrying(ctx, errors.New(why), w.p.Config.UnregisteredTaskDelay.Milliseconds())
	log.Warn("trying task again later: "+why,
		slog.Duration("retry_in", w.p.Config.UnregisteredTaskDelay), slog.Int("tries", tries))
	at := w.arch.Clock.Now().Add(w.p.Config.UnregisteredTaskDelay)
	if _, err := w.store.Settle(ctx, d, store.Settlement{Kind: store.SettleRetry, RetryAt: at, Reason: why}); err != nil {
		log.Error("handing back task failed", slog.Any("error", err))
	}
}

// brokerName and backendName say which broker and backend the worker
// uses (see Params.BrokerName).
func (w *Worker) brokerName() string {
	if w.p.BrokerName != "" {
		return w.p.BrokerName
	}
	return fmt.Sprintf("%T", w.p.Broker)
}

func (w *Worker) backendName() string {
	if w.p.BackendName != "" {
		return w.p.BackendName
	}
	return fmt.Sprintf("%T", w.p.Backend)
}

// reportError hands err to the error handler, if there is one.
func (w *Worker) reportError(err error) {
	if w.p.ErrorHandlerFunc != nil {
		w.p.ErrorHandlerFunc(err)
	}
}

// waitRunning waits up to timeout for running tasks to finish, or until Abort.
func (w *Worker) waitRunning(timeout time.Duration) {
	finished := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(finished)
	}()
	if w.aborted() {
		timeout = 0
	}
	timer := w.arch.Clock.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-finished:
	case <-timer.C():
	case <-w.abort:
	}
}

// abandonRunning cancels the tasks still running, puts them back at the
// head of their queue, and waits for those that were already settling.
func (w *Worker) abandonRunning() {
	w.mu.Lock()
	w.abandoning = true
	rs := make([]*running, 0, len(w.active))
	for r := range w.active {
		rs = append(rs, r)
	}
	w.mu.Unlock()
	var abandoned []*brokers.Delivery
	for _, r := range rs {
		if r.claim(ownerAbandoned) {
			r.cancel()
			abandoned = append(abandoned, r.d)
			continue
		}
		<-r.done // settling: bounded by the task's lease
	}
	if len(abandoned) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.store.Requeue(ctx, abandoned...); err != nil {
		w.arch.Logger.Error("requeueing unfinished tasks failed; they come back when their leases expire",
			slog.Int("tasks", len(abandoned)), slog.Any("error", err))
	} else {
		w.arch.Logger.Info("requeued unfinished tasks", slog.Int("tasks", len(abandoned)))
	}
	for _, d := range abandoned {
		d.Lease.Lose()
	}
}

// sleep waits for d or until ctx ends; it reports whether the wait ran out.
func (w *Worker) sleep(ctx context.Context, d time.Duration) bool {
	t := w.arch.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
