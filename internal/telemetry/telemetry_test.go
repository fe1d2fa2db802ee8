package telemetry

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/b6192125/machinist/v1/tasks"
)

// What telemetry adds to one task, sent and run: with OpenTelemetry's
// default global providers (nothing configured), and with the SDK.
func BenchmarkOneTask(b *testing.B) {
	for _, tc := range []struct {
		name string
		tr   *Tracing
		m    *Metrics
	}{
		{"noop", NewTracing(nil, nil), NewMetrics(nil)},
		{"sdk", NewTracing(sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter())), propagation.TraceContext{}),
			NewMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				sig := &tasks.Signature{UUID: "task_1", Name: "add", RoutingKey: "q", Headers: tasks.Headers{}}
				tc.m.Stamp(sig)
				sctx, span := tc.tr.StartSend(ctx, "q", []*tasks.Signature{sig})
				tc.m.Sent(sctx, "q", "add", 1)
				span.End()
				pctx, span := tc.tr.StartProcess(ctx, sig, Delivery{Queue: "q"})
				tc.m.Started(pctx, "q", "add", QueuedSince(sig))
				tc.m.InFlight(pctx, "w", 1)
				tc.m.InFlight(pctx, "w", -1)
				tc.m.Ran(pctx, "q", "add", OutcomeSuccess, time.Millisecond)
				Outcome(pctx, OutcomeSuccess, nil)
				tc.m.Settled(pctx, "q", "add", OutcomeSuccess)
				span.End()
			}
		})
	}
}

// Format and Parse round-trip a span context; Parse refuses anything else.
func TestFormatParse(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	_, span := tp.Tracer("t").Start(context.Background(), "s")
	sc := span.SpanContext()
	got, ok := Parse(Format(sc))
	if !ok || got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || got.TraceFlags() != sc.TraceFlags() {
		t.Fatalf("Parse(Format(%v)) = %v, %v", sc, got, ok)
	}
	for _, bad := range []string{"", "00-abc", "01-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01",
		"00-" + sc.TraceID().String() + "-zzzzzzzzzzzzzzzz-01", "00-00000000000000000000000000000000-" + sc.SpanID().String() + "-01"} {
		if _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if Format(trace0()) != "" {
		t.Error("Format of an invalid span context is not empty")
	}
}

func trace0() (sc trace.SpanContext) { return }
