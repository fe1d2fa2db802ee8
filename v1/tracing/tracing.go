// Package tracing is machinery's tracing package on OpenTelemetry: the
// same functions, with OpenTelemetry's span types where machinery had
// opentracing's. machinist itself traces every send and run (see
// Config.TracerProvider); these are for a program that starts spans of its
// own around tasks, as it did with machinery. They use the global tracer
// provider and propagator (otel.GetTracerProvider,
// otel.GetTextMapPropagator), as machinery used opentracing's global
// tracer, and carry a span's context in a signature's Headers as machinist's
// own spans do.
//
// What differs from machinery's: spans are trace.Span (End, not Finish;
// SetAttributes, not SetTag); ConsumerOption links the consumer's span to
// its producer's (opentracing's FollowsFrom) without setting its kind,
// and ProducerOption sets the kind, each a trace.SpanStartOption for
// trace.Tracer.Start.
package tracing

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/b6192125/machinist/internal/telemetry"
	"github.com/b6192125/machinist/v1/tasks"
)

// The attributes machinery tagged its spans with.
var (
	MachineryTag     = attribute.String("component", "machinery")
	WorkflowGroupTag = attribute.String("machinery.workflow", "group")
	WorkflowChordTag = attribute.String("machinery.workflow", "chord")
	WorkflowChainTag = attribute.String("machinery.workflow", "chain")
)

// tracer is the tracer of the spans these functions start.
func tracer() trace.Tracer { return otel.GetTracerProvider().Tracer(telemetry.ScopeName) }

// StartSpanFromHeaders starts a CONSUMER span named operationName, the
// child of the span whose context headers carry (a root span when they
// carry none), tagged with MachineryTag. End it when the work is done.
func StartSpanFromHeaders(headers tasks.Headers, operationName string) trace.Span {
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), telemetry.Carrier(headers))
	_, span := tracer().Start(ctx, operationName, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(MachineryTag))
	return span
}

// HeadersWithSpan returns headers (made when nil) with span's context
// written into them, for the task they go with to carry.
func HeadersWithSpan(headers tasks.Headers, span trace.Span) tasks.Headers {
	if headers == nil {
		headers = tasks.Headers{}
	}
	ctx := trace.ContextWithSpan(context.Background(), span)
	otel.GetTextMapPropagator().Inject(ctx, telemetry.Carrier(headers))
	return headers
}

// ConsumerOption links the span it starts to producer, the span that sent
// the task (machinery's FollowsFrom). machinery's also made the span a
// consumer's; an OpenTelemetry option cannot do two things, so pass
// trace.WithSpanKind(trace.SpanKindConsumer) beside it
// (StartSpanFromHeaders does).
func ConsumerOption(producer trace.SpanContext) trace.SpanStartOption {
	return trace.WithLinks(trace.Link{SpanContext: producer})
}

// ProducerOption makes the span it starts a PRODUCER span.
func ProducerOption() trace.SpanStartOption {
	return trace.WithSpanKind(trace.SpanKindProducer)
}

// AnnotateSpanWithSignatureInfo sets signature's name, UUID, group and
// chord callback on span.
func AnnotateSpanWithSignatureInfo(span trace.Span, signature *tasks.Signature) {
	span.SetAttributes(attribute.String("signature.name", signature.Name), attribute.String("signature.uuid", signature.UUID))
	if signature.GroupUUID != "" {
		span.SetAttributes(attribute.String("signature.group.uuid", signature.GroupUUID))
	}
	if cb := signature.ChordCallback; cb != nil {
		span.SetAttributes(attribute.String("signature.chord.callback.uuid", cb.UUID), attribute.String("signature.chord.callback.name", cb.Name))
	}
}

// AnnotateSpanWithChainInfo sets the chain's length on span and writes
// span's context into every task's Headers.
func AnnotateSpanWithChainInfo(span trace.Span, chain *tasks.Chain) {
	span.SetAttributes(WorkflowChainTag, attribute.Int("chain.tasks.length", len(chain.Tasks)))
	for _, sig := range chain.Tasks {
		sig.Headers = HeadersWithSpan(sig.Headers, span)
	}
}

// AnnotateSpanWithGroupInfo sets the group's UUID, size, send concurrency
// and task UUIDs (a JSON array) on span, and writes span's context into
// every task's Headers.
func AnnotateSpanWithGroupInfo(span trace.Span, group *tasks.Group, sendConcurrency int) {
	span.SetAttributes(WorkflowGroupTag, attribute.String("group.uuid", group.GroupUUID),
		attribute.Int("group.tasks.length", len(group.Tasks)), attribute.Int("group.concurrency", sendConcurrency))
	if raw, err := json.Marshal(group.GetUUIDs()); err == nil {
		span.SetAttributes(attribute.String("group.tasks", string(raw)))
	}
	for _, sig := range group.Tasks {
		sig.Headers = HeadersWithSpan(sig.Headers, span)
	}
}

// AnnotateSpanWithChordInfo sets the callback's UUID and the group's
// attributes on span, and writes span's context into the callback's and
// every member's Headers.
func AnnotateSpanWithChordInfo(span trace.Span, chord *tasks.Chord, sendConcurrency int) {
	AnnotateSpanWithGroupInfo(span, chord.Group, sendConcurrency)
	span.SetAttributes(WorkflowChordTag) // after the group's tag, which it replaces
	if cb := chord.Callback; cb != nil {
		span.SetAttributes(attribute.String("chord.callback.uuid", cb.UUID))
		cb.Headers = HeadersWithSpan(cb.Headers, span)
	}
}
