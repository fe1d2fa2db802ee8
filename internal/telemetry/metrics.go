package telemetry

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// The metrics. The semantic conventions' names where they have one
// (messaging.client.sent.messages, messaging.client.consumed.messages,
// messaging.process.duration), machinist.-prefixed ones where they do
// not. Their attributes are the queue (messaging.destination.name), the
// task name, the outcome and a state or a worker's consumer tag: never a
// task UUID or its args, whose values are unbounded.
const (
	SentMetric      = "messaging.client.sent.messages"
	ConsumedMetric  = "messaging.client.consumed.messages"
	DurationMetric  = "messaging.process.duration"
	SucceededMetric = "machinist.tasks.succeeded"
	FailedMetric    = "machinist.tasks.failed"
	RetriedMetric   = "machinist.tasks.retried"
	RecoveredMetric = "machinist.tasks.recovered"
	ArchivedMetric  = "machinist.tasks.archived"
	LatencyMetric   = "machinist.task.queue_latency"
	InFlightMetric  = "machinist.worker.tasks_in_flight"
	DepthMetric     = "machinist.queue.tasks"
)

// More attribute keys of the metrics.
const (
	StateKey  = attribute.Key("machinist.task.state")
	WorkerKey = attribute.Key("machinist.worker")
)

// Metrics records machinist's metrics. Its instruments are made at first
// use, from the provider it was given or, when nil, the global one (whose
// instruments follow an SDK set later). With OpenTelemetry's default
// global provider every instrument is disabled and a record costs a check.
type Metrics struct {
	provider metric.MeterProvider

	once      sync.Once
	meter     metric.Meter
	sent      metric.Int64Counter
	consumed  metric.Int64Counter
	duration  metric.Float64Histogram
	latency   metric.Float64Histogram
	succeeded metric.Int64Counter
	failed    metric.Int64Counter
	retried   metric.Int64Counter
	recovered metric.Int64Counter
	archived  metric.Int64Counter
	inFlight  metric.Int64UpDownCounter

	sets sync.Map // setKey → attribute.Set, so a record allocates none
}

// NewMetrics returns the Metrics of mp (nil: the global provider).
func NewMetrics(mp metric.MeterProvider) *Metrics { return &Metrics{provider: mp} }

func (m *Metrics) init() {
	m.once.Do(func() {
		mp := m.provider
		if mp == nil {
			mp = otel.GetMeterProvider()
		}
		m.meter = mp.Meter(ScopeName)
		// An instrument that cannot be made is a no-op one: metrics never
		// stop tasks.
		m.sent, _ = m.meter.Int64Counter(SentMetric, metric.WithUnit("{message}"),
			metric.WithDescription("Tasks sent (published to a queue)."))
		m.consumed, _ = m.meter.Int64Counter(ConsumedMetric, metric.WithUnit("{message}"),
			metric.WithDescription("Tasks started by a worker (each attempt)."))
		m.duration, _ = m.meter.Float64Histogram(DurationMetric, metric.WithUnit("s"),
			metric.WithDescription("How long a task ran, by outcome."))
		m.latency, _ = m.meter.Float64Histogram(LatencyMetric, metric.WithUnit("s"),
			metric.WithDescription("From a task's sending (or its ETA) to its first start."))
		m.succeeded, _ = m.meter.Int64Counter(SucceededMetric, metric.WithUnit("{task}"),
			metric.WithDescription("Tasks that succeeded."))
		m.failed, _ = m.meter.Int64Counter(FailedMetric, metric.WithUnit("{task}"),
			metric.WithDescription("Tasks that failed for good (FAILURE)."))
		m.retried, _ = m.meter.Int64Counter(RetriedMetric, metric.WithUnit("{task}"),
			metric.WithDescription("Attempts that failed and will run again."))
		m.recovered, _ = m.meter.Int64Counter(RecoveredMetric, metric.WithUnit("{task}"),
			metric.WithDescription("Tasks put back in their queue after their worker lost the lease (died, hung or lost Redis)."))
		m.archived, _ = m.meter.Int64Counter(ArchivedMetric, metric.WithUnit("{task}"),
			metric.WithDescription("Tasks moved to the archive (dead letters)."))
		m.inFlight, _ = m.meter.Int64UpDownCounter(InFlightMetric, metric.WithUnit("{task}"),
			metric.WithDescription("Tasks a worker is running."))
	})
}

// setKey names a cached attribute set.
type setKey struct {
	kind              byte
	queue, name, more string
}

func (m *Metrics) set(k setKey, make func() []attribute.KeyValue) metric.MeasurementOption {
	if s, ok := m.sets.Load(k); ok {
		return metric.WithAttributeSet(s.(attribute.Set))
	}
	s := attribute.NewSet(make()...)
	m.sets.Store(k, s)
	return metric.WithAttributeSet(s)
}

func (m *Metrics) taskSet(kind byte, op, queue, name string) metric.MeasurementOption {
	queue = store.LogicalQueue(queue) // a shard counts for its queue
	return m.set(setKey{kind: kind, queue: queue, name: name}, func() []attribute.KeyValue {
		kvs := []attribute.KeyValue{semconv.MessagingSystemKey.String(System), semconv.MessagingOperationName(op),
			semconv.MessagingDestinationName(queue)}
		if name != "" {
			kvs = append(kvs, TaskNameKey.String(name))
		}
		return kvs
	})
}

// Sent counts n tasks of name sent to queue.
func (m *Metrics) Sent(ctx context.Context, queue, name string, n int) {
	m.init()
	if m.sent.Enabled(ctx) {
		m.sent.Add(ctx, int64(n), m.taskSet('s', "send", queue, name))
	}
}

// SentAtHeader is the Signature.Headers key of when a task was sent, in
// Unix milliseconds, written by a sender whose queue latency metric is
// enabled and read by the worker that starts it.
const SentAtHeader = "machinist-sent-at"

// Stamp writes the time into sig's Headers (SentAtHeader) when the queue
// latency metric is enabled.
func (m *Metrics) Stamp(sig *tasks.Signature) {
	m.init()
	if m.latency.Enabled(context.Background()) {
		if sig.Headers == nil {
			sig.Headers = tasks.Headers{}
		}
		sig.Headers[SentAtHeader] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	}
}

// QueuedSince returns when sig's wait in its queue began for its first
// attempt: its ETA, or when it was sent (SentAtHeader), the later; zero
// when neither is known.
func QueuedSince(sig *tasks.Signature) time.Time {
	var base time.Time
	if v, ok := sig.Headers[SentAtHeader].(string); ok {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			base = time.UnixMilli(ms)
		}
	}
	if sig.ETA != nil && sig.ETA.After(base) {
		base = *sig.ETA
	}
	return base
}

// Started counts an attempt at a task of name from queue starting, and,
// for a first attempt, records how long it waited since base (its send
// or its ETA; zero: unknown).
func (m *Metrics) Started(ctx context.Context, queue, name string, base time.Time) {
	m.init()
	if m.consumed.Enabled(ctx) {
		m.consumed.Add(ctx, 1, m.taskSet('c', "process", queue, name))
	}
	if !base.IsZero() && m.latency.Enabled(ctx) {
		m.latency.Record(ctx, max(time.Since(base), 0).Seconds(), m.taskSet('l', "process", queue, name))
	}
}

// Ran records how long an attempt ran and its outcome (OutcomeSuccess,
// OutcomeRetry, OutcomeFailure, ...).
func (m *Metrics) Ran(ctx context.Context, queue, name, outcome string, took time.Duration) {
	m.init()
	if !m.duration.Enabled(ctx) {
		return
	}
	queue = store.LogicalQueue(queue) // a shard counts for its queue
	opt := m.set(setKey{kind: 'd', queue: queue, name: name, more: outcome}, func() []attribute.KeyValue {
		kvs := []attribute.KeyValue{semconv.MessagingSystemKey.String(System), semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(queue), TaskNameKey.String(name), OutcomeKey.String(outcome)}
		if outcome != OutcomeSuccess {
			// The attempt failed; its kind is the outcome.
			kvs = append(kvs, semconv.ErrorTypeOther)
		}
		return kvs
	})
	m.duration.Record(ctx, took.Seconds(), opt)
}

// Settled counts a task of name on queue whose success, failure for good
// or retry was written.
func (m *Metrics) Settled(ctx context.Context, queue, name, outcome string) {
	m.init()
	var c metric.Int64Counter
	switch outcome {
	case OutcomeSuccess:
		c = m.succeeded
	case OutcomeFailure:
		c = m.failed
	case OutcomeRetry:
		c = m.retried
	default:
		return
	}
	if c.Enabled(ctx) {
		c.Add(ctx, 1, m.taskSet('o', "process", queue, name))
	}
}

// Recovered counts n tasks of queue put back after their lease ended.
func (m *Metrics) Recovered(ctx context.Context, queue string, n int) {
	m.init()
	if n > 0 && m.recovered.Enabled(ctx) {
		m.recovered.Add(ctx, int64(n), m.taskSet('r', "settle", queue, ""))
	}
}

// Archived counts n tasks of name (empty: not known) archived on queue.
func (m *Metrics) Archived(ctx context.Context, queue, name string, n int) {
	m.init()
	if n > 0 && m.archived.Enabled(ctx) {
		m.archived.Add(ctx, int64(n), m.taskSet('a', "settle", queue, name))
	}
}

// InFlight adds delta to the tasks worker (its consumer tag) is running.
func (m *Metrics) InFlight(ctx context.Context, worker string, delta int) {
	m.init()
	if m.inFlight.Enabled(ctx) {
		m.inFlight.Add(ctx, int64(delta), m.set(setKey{kind: 'w', more: worker}, func() []attribute.KeyValue {
			return []attribute.KeyValue{semconv.MessagingSystemKey.String(System), WorkerKey.String(worker)}
		}))
	}
}

// Depth is the number of tasks of a queue in one state.
type Depth struct {
	Queue, State string
	Tasks        int64
}

// Depths returns the depth of each state of the queue info describes.
func Depths(info *store.QueueInfo) []Depth {
	return []Depth{
		{info.Queue, "pending", int64(info.Pending)},
		{info.Queue, "active", int64(info.Active)},
		{info.Queue, "scheduled", int64(info.Scheduled)},
		{info.Queue, "retry", int64(info.Retry)},
		{info.Queue, "archived", int64(info.Archived)},
		{info.Queue, "aggregating", int64(info.Aggregating)},
	}
}

// ObserveDepths registers observe as the source of the machinist.queue.tasks
// gauge: it is called at each collection and returns the depths of the
// queues this process reports (the caller decides which, and how often it
// reads them afresh). The returned function unregisters it.
func (m *Metrics) ObserveDepths(observe func(ctx context.Context) []Depth) (unregister func(), err error) {
	m.init()
	gauge, err := m.meter.Int64ObservableGauge(DepthMetric, metric.WithUnit("{task}"),
		metric.WithDescription("Tasks in a queue by state (pending, active, scheduled, retry, archived, aggregating), read by the queue's elected maintainer."))
	if err != nil {
		return nil, err
	}
	reg, err := m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		for _, d := range observe(ctx) {
			o.ObserveInt64(gauge, d.Tasks, m.set(setKey{kind: 'q', queue: d.Queue, more: d.State}, func() []attribute.KeyValue {
				return []attribute.KeyValue{semconv.MessagingSystemKey.String(System),
					semconv.MessagingDestinationName(d.Queue), StateKey.String(d.State)}
			}))
		}
		return nil
	}, gauge)
	if err != nil {
		return nil, err
	}
	return func() { _ = reg.Unregister() }, nil
}
