package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/b6192125/machinist/internal/telemetry"
	"github.com/b6192125/machinist/v1/tasks"
)

// A span's context written into a task's headers is the parent of the
// span started from them on the other side; the annotations machinery
// wrote are set as attributes.
func TestSpanTravelsInHeaders(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	otel.SetTextMapPropagator(propagation.TraceContext{})

	_, producer := otel.Tracer("test").Start(context.Background(), "SendTask", ProducerOption())
	sig := &tasks.Signature{UUID: "task_1", Name: "add", GroupUUID: "group_1"}
	sig.Headers = HeadersWithSpan(sig.Headers, producer)
	producer.End()

	consumer := StartSpanFromHeaders(sig.Headers, "add")
	AnnotateSpanWithSignatureInfo(consumer, sig)
	member := &tasks.Signature{UUID: "task_2", Name: "add"}
	callback := &tasks.Signature{UUID: "chord_1", Name: "sum"}
	group := &tasks.Group{GroupUUID: "group_1", Tasks: []*tasks.Signature{member}}
	AnnotateSpanWithChordInfo(consumer, &tasks.Chord{Group: group, Callback: callback}, 2)
	consumer.End()
	// The chord's member and callback carry the annotated span.
	for _, s := range []*tasks.Signature{member, callback} {
		ctx := otel.GetTextMapPropagator().Extract(context.Background(), telemetry.Carrier(s.Headers))
		if got := trace.SpanContextFromContext(ctx).SpanID(); got != consumer.SpanContext().SpanID() {
			t.Errorf("%s's headers carry span %v, want the annotated %v", s.UUID, got, consumer.SpanContext().SpanID())
		}
	}

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want 2", len(spans))
	}
	p, c := spans[0], spans[1]
	if p.SpanKind() != trace.SpanKindProducer || c.SpanKind() != trace.SpanKindConsumer {
		t.Fatalf("kinds %v and %v, want producer and consumer", p.SpanKind(), c.SpanKind())
	}
	if c.Parent().SpanID() != p.SpanContext().SpanID() || c.Parent().TraceID() != p.SpanContext().TraceID() {
		t.Fatalf("the consumer's parent is %v, want the producer %v", c.Parent(), p.SpanContext())
	}
	got := map[attribute.Key]string{}
	for _, kv := range c.Attributes() {
		got[kv.Key] = kv.Value.Emit()
	}
	for k, v := range map[attribute.Key]string{
		"component": "machinery", "signature.name": "add", "signature.uuid": "task_1", "signature.group.uuid": "group_1",
		"machinery.workflow": "chord", "chord.callback.uuid": "chord_1", "group.tasks.length": "1", "group.concurrency": "2",
		"group.tasks": `["task_2"]`,
	} {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, got[k], v)
		}
	}
}
