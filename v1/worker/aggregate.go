package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/telemetry"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// AggregatorFunc builds the task that runs in place of a batch of members
// of one aggregation group: key is their AggregationKey, members their
// signatures, oldest first. It returns the task to run, or an error (the
// batch is tried again, then its members are archived with the error).
type AggregatorFunc func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error)

// Aggregation is an aggregator registered for a task name, with its policy.
type Aggregation struct {
	Policy brokers.AggregationPolicy
	Func   AggregatorFunc
}

// AggregatorRegistry is a Registry that also holds aggregators, by the task
// name of their members. A worker whose registry is one, on a broker that is
// a brokers.Aggregator, announces them and builds the aggregates of its
// queues' due groups.
type AggregatorRegistry interface {
	GetAggregators() map[string]Aggregation
}

// aggregators returns the registry's aggregators, or none.
func (w *Worker) aggregators() map[string]Aggregation {
	if r, ok := w.p.Tasks.(AggregatorRegistry); ok {
		return r.GetAggregators()
	}
	return nil
}

// announceAggregators tells the broker the registry's aggregators, for a
// LeaseDuration, when it aggregates and there are any.
func (w *Worker) announceAggregators(ctx context.Context) error {
	regs := w.aggregators()
	if len(regs) == 0 {
		return nil
	}
	policies := make(map[string]brokers.AggregationPolicy, len(regs))
	for name, a := range regs {
		policies[name] = a.Policy
	}
	err := w.store.AnnounceAggregators(ctx, w.p.Queues, policies, w.p.Config.LeaseDuration)
	if err != nil && !errors.Is(err, store.ErrUnsupported) { // the aggregate loop says so
		return fmt.Errorf("worker: announce the aggregators: %w", err)
	}
	return nil
}

// batches builds the aggregates of the due groups of the worker's queues
// whose names it aggregates, up to Concurrency batches at once, as it runs
// up to Concurrency tasks: it claims batches while it has room, each built
// on a goroutine of its own, and with nothing due (or no room) it waits:
// for the broker to say a group or batch is due (WaitDue, at most a poll
// period), or for a batch to be built. It claims no batch once the worker
// stops fetching; the batches it took are let finish until Stop, whose
// context their builds run under. Stopped is closed once claiming has
// ended and the batches taken are built, or at Stop.
type batches struct {
	service.Base
	w *Worker
}

// Start launches the loop; ctx bounds the builds.
func (b *batches) Start(ctx context.Context) error {
	ctx, shouldStart, stopped, err := b.StartInit(ctx)
	if !shouldStart {
		return err
	}
	go func() {
		defer close(stopped)
		var building sync.WaitGroup
		b.claim(ctx, &building)
		// An aggregator that outlasts the shutdown is not waited for
		// after Stop: its batch's lease ends, and another worker builds
		// it again.
		built := make(chan struct{})
		go func() {
			building.Wait()
			close(built)
		}()
		select {
		case <-built:
		case <-ctx.Done():
		}
	}()
	return nil
}

// claim claims batches and starts their builds under buildCtx until the
// worker stops fetching or buildCtx ends.
func (b *batches) claim(buildCtx context.Context, building *sync.WaitGroup) {
	w := b.w
	ctx, cancel := context.WithCancel(w.fetching)
	defer cancel()
	defer context.AfterFunc(buildCtx, cancel)()
	poll := time.Duration(w.p.Config.Redis.NormalTasksPollPeriod) * time.Millisecond
	// As the fetch loop: a failing broker is tried again after a jittered
	// backoff, and logged once, then once per interval with a count.
	backoff := service.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	fails := w.arch.FailureLog("aggregation")
	failures := 0
	room := make(chan struct{}, max(1, w.p.Concurrency))
	for ctx.Err() == nil {
		select {
		case room <- struct{}{}:
		case <-ctx.Done():
			return
		}
		regs := w.aggregators()
		names := brokers.NewTaskNames(slices.Collect(maps.Keys(regs)))
		batch, err := w.store.ClaimBatch(ctx, w.p.Queues, names)
		if err == nil && batch != nil {
			building.Go(func() {
				defer func() { <-room }()
				w.aggregationStep("claimed")
				w.aggregate(buildCtx, batch, regs[batch.Name])
			})
		} else {
			<-room
			if err == nil {
				err = w.store.WaitDue(ctx, w.p.Queues, names, poll)
			}
		}
		switch {
		case ctx.Err() != nil, errors.Is(err, brokers.ErrClosed):
			return
		case errors.Is(err, store.ErrUnsupported):
			w.arch.Logger.Error("aggregators are registered, but the broker does not aggregate: their members are refused when sent", slog.Any("error", err))
			return
		case err == nil:
			if failures > 0 {
				failures = 0
				fails.Succeeded()
			}
			continue
		}
		failures++
		w.reportError(fmt.Errorf("worker: aggregation: %w", err))
		fails.Failed(err)
		if !w.sleep(ctx, backoff.Delay(failures)) {
			return
		}
	}
}

// aggregate builds b's aggregate with a and hands it to the broker: the
// aggregate's PENDING state, then the members' states pointing at it, then
// the aggregate published and the batch forgotten in one step. An
// aggregator that fails, panics or outlasts AggregatorTimeout has its batch
// tried again after 1, 2, 3 … seconds, AggregatorRetries times, then the
// members are archived, their states FAILURE with the error.
func (w *Worker) aggregate(ctx context.Context, b *brokers.Batch, a Aggregation) {
	log := w.arch.Logger.With(slog.String("batch", b.ID), slog.String("queue", b.Queue),
		slog.String("task_name", b.Name), slog.String("aggregation_key", b.Key), slog.Int("members", len(b.Members)))
	sctx, cancel := detach(ctx)
	defer cancel()
	if b.Aggregate != nil {
		w.finishHandOver(sctx, b, log)
		return
	}
	if limit := w.p.Config.MaxRecoveries; limit >= 0 && b.Recovered > limit {
		// Its workers keep dying, or stopping to renew its lease, while
		// building it.
		reason := fmt.Sprintf("batch lost its worker %d times: a batch whose aggregator keeps killing or hanging its worker process is archived after MaxRecoveries (%d)", b.Recovered, limit)
		w.archiveBatch(sctx, b, reason, log)
		return
	}
	// The heartbeat renews the batch's lease, as a running task's, until
	// it is settled; the aggregator's context ends if it is lost.
	w.renewing(b)
	defer w.settling(b)
	aggregate, err := w.buildAggregate(ctx, b, a)
	if err != nil && ctx.Err() != nil {
		// The worker is stopping: the aggregator's error is the stop's, not
		// its own. The batch comes back when its lease ends.
		log.Info("worker stopping while building a batch; it is taken again", slog.Any("error", err))
		return
	}
	if err != nil && !b.Lease.Valid() {
		// Its context ended with the lease: another worker may hold the
		// batch now, and tries it again if it must.
		log.Warn("aggregation batch lost its lease while its aggregator ran; it is taken again", slog.Any("error", err))
		w.aggregationStep("lost")
		return
	}
	if err == nil {
		w.aggregationStep("built")
		err = w.publishAggregate(sctx, b, aggregate)
		if errors.Is(err, brokers.ErrLeaseLost) {
			if b.Aggregate != nil {
				log.Warn("aggregation batch lost its lease while its aggregate was handed over; whoever takes it next finishes the hand-over", slog.Any("error", err))
			} else {
				log.Warn("aggregation batch lost its lease; another worker builds it again", slog.Any("error", err))
			}
			w.aggregationStep("lost")
			return
		}
		if err == nil {
			w.aggregationStep("completed")
			log.Debug("aggregated", slog.String("aggregate", aggregate.UUID))
			return
		}
	}
	w.reportError(fmt.Errorf("worker: aggregate batch %s of %s/%s: %w", b.ID, b.Name, b.Key, err))
	if b.Aggregate != nil {
		// Handed over: the batch is only ever completed with this
		// aggregate, by whoever takes it when its lease ends.
		log.Error("handing the aggregate over failed; it is finished when the batch's lease ends", slog.Any("error", err))
		return
	}
	if b.Failed < w.p.Config.AggregatorRetries {
		in := time.Duration(fibonacciNext(b.Failed)) * time.Second
		log.Warn("aggregator failed; the batch is tried again", slog.Any("error", err), slog.Duration("retry_in", in))
		w.settling(b)
		if rerr := w.store.RetryBatch(sctx, b, w.arch.Clock.Now().Add(in), err.Error()); rerr != nil {
			log.Error("giving the batch back failed; it is taken again when its lease ends", slog.Any("error", rerr))
		}
		return
	}
	w.archiveBatch(sctx, b, fmt.Sprintf("aggregator of %q failed %d times: %v", b.Name, b.Failed+1, err), log)
}

// finishHandOver completes b, which came back with the aggregate a worker
// that died had built and begun to hand over (Batch.Aggregate): its states
// were written before the hand-over began, and the aggregate may have run
// since, so only the broker's steps are left.
func (w *Worker) finishHandOver(ctx context.Context, b *brokers.Batch, log *slog.Logger) {
	err := w.store.CompleteBatch(ctx, b, b.Aggregate)
	switch {
	case err == nil:
		w.aggregationStep("completed")
		log.Info("finished handing over the aggregate of a batch whose worker died", slog.String("aggregate", b.Aggregate.UUID))
	case errors.Is(err, brokers.ErrLeaseLost):
		w.aggregationStep("lost")
		log.Warn("aggregation batch lost its lease while its hand-over was finished; it is taken again", slog.Any("error", err))
	default:
		w.reportError(fmt.Errorf("worker: finish handing over batch %s of %s/%s: %w", b.ID, b.Name, b.Key, err))
		log.Error("finishing the hand-over failed; it is tried again when the batch's lease ends", slog.Any("error", err))
	}
}

// archiveBatch archives b's members with reason and writes their FAILURE
// states.
func (w *Worker) archiveBatch(ctx context.Context, b *brokers.Batch, reason string, log *slog.Logger) {
	log.Error("archiving the members of an aggregation batch", slog.String("reason", reason))
	w.settling(b)
	if err := w.store.ArchiveBatch(ctx, b, reason); err != nil {
		log.Error("archiving the members failed; the batch is taken again when its lease ends", slog.Any("error", err))
		return
	}
	for _, m := range b.Members {
		w.settled(ctx, b.Queue, m.Name, telemetry.OutcomeFailure)
		w.p.Metrics.Archived(ctx, b.Queue, m.Name, 1)
		if err := w.store.SetStateFailureContext(ctx, m, reason); err != nil {
			log.Error("writing a member's FAILURE failed", slog.String("task_id", m.UUID), slog.Any("error", err))
		}
	}
}

// buildAggregate calls the aggregator, a panic becoming its error, with a
// context that ends when the batch's lease is lost (the heartbeat renews
// it meanwhile), the worker stops, or AggregatorTimeout passes (then the
// call fails, and is not waited for), and readies what it returns: a UUID
// derived from the batch (the same if the batch is built again after a
// crash; one the aggregator set is replaced), b's queue unless it names
// another, and the Server's preparation.
func (w *Worker) buildAggregate(ctx context.Context, b *brokers.Batch, a Aggregation) (aggregate *tasks.Signature, err error) {
	if a.Func == nil {
		return nil, fmt.Errorf("no aggregator of %q is registered here", b.Name)
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.Lease.Context(), cancel)()
	timeout := w.p.Config.AggregatorTimeout
	members := make([]*tasks.Signature, len(b.Members))
	for i, m := range b.Members {
		members[i] = tasks.CopySignature(m)
	}
	// The call runs on a goroutine of its own, so that one that never
	// returns, past AggregatorTimeout, holds the batch no longer: its
	// context ends, and the batch fails without it.
	type built struct {
		aggregate *tasks.Signature
		err       error
	}
	out := make(chan built, 1)
	go func() {
		var r built
		defer func() {
			if p := recover(); p != nil {
				r = built{err: fmt.Errorf("aggregator panicked: %v", p)}
				w.arch.Logger.Error("aggregator panicked", slog.String("batch", b.ID), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			}
			out <- r
		}()
		r.aggregate, r.err = a.Func(actx, b.Key, members)
	}()
	timer := w.arch.Clock.NewTimer(timeout)
	defer timer.Stop()
	select {
	case r := <-out:
		aggregate, err = r.aggregate, r.err
	case <-timer.C():
		cancel()
		w.arch.Logger.Error("aggregator did not return within AggregatorTimeout; the batch fails without it", slog.String("batch", b.ID), slog.Duration("timeout", timeout))
		return nil, fmt.Errorf("aggregator did not return within %s (AggregatorTimeout)", timeout)
	}
	switch {
	case err != nil:
		return nil, err
	case aggregate == nil:
		return nil, errors.New("aggregator returned no task")
	case aggregate.AggregationKey != "":
		return nil, fmt.Errorf("aggregator returned a task with an AggregationKey (%q): an aggregate is not a member", aggregate.AggregationKey)
	case aggregate.UniqueFor != 0 || aggregate.UniqueKey != "":
		return nil, fmt.Errorf("aggregator returned a task with UniqueFor or a UniqueKey: %w", tasks.ErrUniqueInWorkflow)
	}
	// The UUID comes from the batch, so that a batch built again after its
	// worker died makes the same task, which cannot be published twice.
	aggregate.UUID = "aggregate_" + b.ID
	if aggregate.RoutingKey == "" {
		aggregate.RoutingKey = b.Queue
	}
	if w.p.PrepareFunc != nil {
		w.p.PrepareFunc(aggregate)
	}
	if err := aggregate.Validate(); err != nil {
		return nil, fmt.Errorf("aggregator returned a task that cannot be sent: %w", err)
	}
	return aggregate, nil
}

// publishAggregate writes the aggregate's PENDING state and the members'
// states pointing at it (both safe to repeat), then publishes it and
// forgets the batch, under the batch's lease.
func (w *Worker) publishAggregate(ctx context.Context, b *brokers.Batch, aggregate *tasks.Signature) error {
	// A worker that lost the batch's lease (it was paused past it) writes
	// nothing: another built the same aggregate, and may have finished it,
	// whose state a PENDING write would hide.
	if !b.Lease.Valid() {
		return fmt.Errorf("batch %s: %w", b.ID, brokers.ErrLeaseLost)
	}
	if st, err := w.store.GetStateContext(ctx, aggregate.UUID); err == nil && st.IsCompleted() {
		return fmt.Errorf("batch %s: its aggregate %s has finished: %w", b.ID, aggregate.UUID, brokers.ErrLeaseLost)
	}
	// The aggregate's send span links to the send of every member: it has
	// them all as causes.
	links := make([]trace.Link, 0, len(b.Members))
	for _, m := range b.Members {
		if sc := w.p.Tracing.SentBy(m); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := w.p.Tracing.StartSend(telemetry.ContextWithLinks(ctx, links), aggregate.RoutingKey, []*tasks.Signature{aggregate},
		telemetry.WorkflowKey.String("aggregate"), telemetry.AggregationKey.String(b.Key))
	defer span.End()
	err := w.completeBatch(ctx, b, aggregate)
	telemetry.Ended(span, err)
	if err == nil {
		w.p.Metrics.Sent(ctx, aggregate.RoutingKey, aggregate.Name, 1)
	}
	return err
}

// completeBatch writes the aggregate's and the members' states, then
// publishes the aggregate and forgets the batch.
func (w *Worker) completeBatch(ctx context.Context, b *brokers.Batch, aggregate *tasks.Signature) error {
	if err := w.store.SetStatePendingContext(ctx, aggregate); err != nil {
		return fmt.Errorf("set the aggregate's state: %w", err)
	}
	if err := w.store.SetStateAggregatedContext(ctx, aggregate.UUID, b.Members...); err != nil {
		return fmt.Errorf("set the members' states: %w", err)
	}
	w.aggregationStep("states")
	w.settling(b)
	return w.store.CompleteBatch(ctx, b, aggregate)
}

// renewing has the heartbeat renew b's lease, with the running tasks',
// until settling(b).
func (w *Worker) renewing(b *brokers.Batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.building == nil {
		w.building = make(map[*brokers.Batch]struct{})
	}
	w.building[b] = struct{}{}
}

// settling stops the heartbeat renewing b's lease, before b is settled: a
// renewal that found it settled by a call whose reply was lost would mark
// the lease lost, and so stop that call's own retries (evalSettle's).
func (w *Worker) settling(b *brokers.Batch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.building, b)
}

// aggregationStep calls Params.AggregationStepFunc, if set, after step.
func (w *Worker) aggregationStep(step string) {
	if w.p.AggregationStepFunc != nil {
		w.p.AggregationStepFunc(step)
	}
}
