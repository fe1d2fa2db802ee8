// Package telemetry is machinist's OpenTelemetry instrumentation: the spans
// of sending and processing tasks, with the trace context carried in
// Signature.Headers, and the metrics of queues and workers.
//
// Spans follow OpenTelemetry's semantic conventions for messaging: a
// PRODUCER span "send <queue>" when tasks are sent (one for a group, whose
// members share it), a CONSUMER span "process <queue>" for each attempt at
// running a task, child of the context its message carries, so that a
// chain reads as send → process → send → process, and a retried or
// recovered task as several attempts under one send. A chord's callback is
// sent under the chord's send span, with a link to the span of every
// member (its many causes), not as the child of the member that happened
// to finish last.
//
// With no provider configured the global ones are used: those of the
// program's otel.Set… calls, or, set after the Server was made, of the
// first such call (OpenTelemetry's global delegation happens once).
// OpenTelemetry's default global tracer records nothing, and attributes
// are only built for a span that records.
package telemetry

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// ScopeName is the instrumentation scope of machinist's spans and metrics.
const ScopeName = "github.com/b6192125/machinist"

// System is machinist's messaging.system.
const System = "machinist"

// Attribute keys of machinist's own, beside the semantic conventions'.
const (
	TaskNameKey      = attribute.Key("machinist.task.name")
	RetriedKey       = attribute.Key("machinist.task.retried")
	RecoveredKey     = attribute.Key("machinist.task.recovered")
	RetriesLeftKey   = attribute.Key("machinist.task.retries_left")
	OutcomeKey       = attribute.Key("machinist.task.outcome")
	RetryInKey       = attribute.Key("machinist.task.retry_in_ms")
	WorkflowKey      = attribute.Key("machinist.workflow.type")
	GroupIDKey       = attribute.Key("machinist.workflow.group_id")
	WorkflowIDKey    = attribute.Key("machinist.workflow.id")
	ChordCallbackKey = attribute.Key("machinist.workflow.chord_callback_id")
	ChainLengthKey   = attribute.Key("machinist.workflow.chain_length")
	AggregationKey   = attribute.Key("machinist.aggregation.key")
	ProgressDoneKey  = attribute.Key("machinist.progress.done")
	ProgressTotalKey = attribute.Key("machinist.progress.total")
	DataBytesKey     = attribute.Key("machinist.data.bytes")
	StepNameKey      = attribute.Key("machinist.step.name")
	StepKeptKey      = attribute.Key("machinist.step.kept")
)

// Outcomes of a process span (OutcomeKey).
const (
	OutcomeSuccess   = "success"
	OutcomeRetry     = "retry"
	OutcomeFailure   = "failure"
	OutcomeLeaseLost = "lease_lost"
	OutcomeAbandoned = "abandoned"
	OutcomeCancelled = "cancelled"
	OutcomeHandedOn  = "handed_on" // not run here: rerouted, tried later, dropped
)

// Tracing starts machinist's spans. Its zero value is not usable: make it
// with NewTracing.
type Tracing struct {
	tr   trace.Tracer
	prop propagation.TextMapPropagator
}

// NewTracing returns the Tracing of tp and prop; nil ones mean the global
// provider and propagator (otel.GetTracerProvider,
// otel.GetTextMapPropagator), which follow the first global set made
// later.
func NewTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) *Tracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if prop == nil {
		prop = otel.GetTextMapPropagator()
	}
	return &Tracing{tr: tp.Tracer(ScopeName), prop: prop}
}

func (t *Tracing) tracer() trace.Tracer { return t.tr }

func (t *Tracing) propagator() propagation.TextMapPropagator { return t.prop }

// Carrier is Signature.Headers as a propagation.TextMapCarrier. Values
// that are not strings are not trace context: Get ignores them.
type Carrier tasks.Headers

var _ propagation.TextMapCarrier = Carrier(nil)

// Get returns the string value of key, or "".
func (c Carrier) Get(key string) string {
	s, _ := c[key].(string)
	return s
}

// Set sets key to value.
func (c Carrier) Set(key, value string) { c[key] = value }

// Keys lists the keys.
func (c Carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

type linksKey struct{}

// ContextWithLinks returns ctx carrying links for the next send span
// started from it (StartSend): how a chord's callback names its members.
func ContextWithLinks(ctx context.Context, links []trace.Link) context.Context {
	return context.WithValue(ctx, linksKey{}, links)
}

// StartSend starts the PRODUCER span of sending sigs to queue (one span
// for them all: a group's members share it; queue "" when they go to
// several, named "send" without a destination) and writes its context
// into each one's Headers (made when nil). attrs describe the workflow.
func (t *Tracing) StartSend(ctx context.Context, queue string, sigs []*tasks.Signature, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	queue = store.LogicalQueue(queue) // a shard's task is its queue's
	opts := producer
	if links, _ := ctx.Value(linksKey{}).([]trace.Link); len(links) > 0 {
		opts = []trace.SpanStartOption{producer[0], trace.WithLinks(links...)}
		ctx = context.WithValue(ctx, linksKey{}, nil) // for this span only
	}
	name := "send"
	if queue != "" {
		name = spanName("send ", queue)
	}
	ctx, span := t.tracer().Start(ctx, name, opts...)
	if span.IsRecording() {
		span.SetAttributes(
			semconv.MessagingSystemKey.String(System),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
		)
		if queue != "" {
			span.SetAttributes(semconv.MessagingDestinationName(queue))
		}
		if len(sigs) == 1 {
			span.SetAttributes(semconv.MessagingMessageID(sigs[0].UUID), TaskNameKey.String(sigs[0].Name))
			if sigs[0].AggregationKey != "" {
				span.SetAttributes(AggregationKey.String(sigs[0].AggregationKey))
			}
		} else {
			span.SetAttributes(semconv.MessagingBatchMessageCount(len(sigs)))
		}
		span.SetAttributes(attrs...)
	}
	if !span.SpanContext().IsValid() {
		return ctx, span // nothing to carry
	}
	prop := t.propagator()
	for _, sig := range sigs {
		if sig.Headers == nil {
			sig.Headers = tasks.Headers{}
		}
		prop.Inject(ctx, Carrier(sig.Headers))
	}
	return ctx, span
}

// The span kinds' start options, made once.
var (
	producer = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
	consumer = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
)

// spanNames caches "<operation> <queue>": a queue's spans share a name.
var spanNames sync.Map // [2]string → string

func spanName(op, queue string) string {
	k := [2]string{op, queue}
	if n, ok := spanNames.Load(k); ok {
		return n.(string)
	}
	n := op + queue
	spanNames.Store(k, n)
	return n
}

// Delivery is what StartProcess needs of a delivered task beside its
// signature.
type Delivery struct {
	Queue              string
	Retried, Recovered int
}

// StartProcess starts the CONSUMER span of one attempt at running sig,
// child of the context its Headers carry.
func (t *Tracing) StartProcess(ctx context.Context, sig *tasks.Signature, d Delivery) (context.Context, trace.Span) {
	if len(sig.Headers) > 0 {
		ctx = t.propagator().Extract(ctx, Carrier(sig.Headers))
	}
	queue := store.LogicalQueue(d.Queue) // a shard's task is its queue's
	ctx, span := t.tracer().Start(ctx, spanName("process ", queue), consumer...)
	if span.IsRecording() {
		span.SetAttributes(
			semconv.MessagingSystemKey.String(System),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(queue),
			semconv.MessagingMessageID(sig.UUID),
			TaskNameKey.String(sig.Name),
			RetriedKey.Int(d.Retried),
			RecoveredKey.Int(d.Recovered),
			RetriesLeftKey.Int(sig.RetryCount),
		)
		if sig.GroupUUID != "" {
			span.SetAttributes(GroupIDKey.String(sig.GroupUUID))
		}
		if sig.ChordCallback != nil {
			span.SetAttributes(ChordCallbackKey.String(sig.ChordCallback.UUID))
		}
		if sig.AggregationKey != "" {
			span.SetAttributes(AggregationKey.String(sig.AggregationKey))
		}
	}
	return ctx, span
}

// SentBy returns the context of the span that sent sig, from its Headers;
// it is not valid when they carry none.
func (t *Tracing) SentBy(sig *tasks.Signature) trace.SpanContext {
	if len(sig.Headers) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(t.propagator().Extract(context.Background(), Carrier(sig.Headers)))
}

// SentFrom returns ctx with, as its current span, the span that sent sig
// (from its Headers), or ctx when they carry none.
func (t *Tracing) SentFrom(ctx context.Context, sig *tasks.Signature) context.Context {
	if sc := t.SentBy(sig); sc.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// Ended records on span how a send or an attempt ended: nothing for a nil
// err, else the error and status Error.
func Ended(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
}

// Outcome records an attempt's outcome on the span of ctx; err, when not
// nil, is recorded with status Error.
func Outcome(ctx context.Context, outcome string, err error) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(OutcomeKey.String(outcome))
	Ended(span, err)
}

// Retrying records on the span of ctx that the attempt failed with err and
// the task runs again in ms milliseconds.
func Retrying(ctx context.Context, err error, inMs int64) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("retry", trace.WithAttributes(RetryInKey.Int64(inMs)))
	Outcome(ctx, OutcomeRetry, err)
}

// Panicked records a panic of the task on the span of ctx, with the stack
// where it happened.
func Panicked(ctx context.Context, value any, stack []byte) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent(semconv.ExceptionEventName, trace.WithAttributes(
		semconv.ExceptionTypeKey.String(fmt.Sprintf("panic: %T", value)),
		semconv.ExceptionMessageKey.String(fmt.Sprint(value)),
		semconv.ExceptionStacktraceKey.String(string(stack)),
	))
}

// Event adds an event named name to the span of ctx.
func Event(ctx context.Context, name string, attrs ...attribute.KeyValue) {
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

// Format returns sc as a W3C traceparent ("00-<trace id>-<span id>-<flags>"),
// or "" when sc is not valid: how a task's state names the span that ran
// it (TaskState.Trace).
func Format(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + fmt.Sprintf("%02x", byte(sc.TraceFlags()))
}

// Parse reads what Format writes; ok is false for anything else.
func Parse(s string) (sc trace.SpanContext, ok bool) {
	parts := strings.Split(s, "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return trace.SpanContext{}, false
	}
	var tid trace.TraceID
	var sid trace.SpanID
	if _, err := hex.Decode(tid[:], []byte(parts[1])); err != nil {
		return trace.SpanContext{}, false
	}
	if _, err := hex.Decode(sid[:], []byte(parts[2])); err != nil {
		return trace.SpanContext{}, false
	}
	flags, err := strconv.ParseUint(parts[3], 16, 8)
	if err != nil {
		return trace.SpanContext{}, false
	}
	sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags), Remote: true})
	return sc, sc.IsValid()
}
