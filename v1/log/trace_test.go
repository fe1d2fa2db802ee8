package log

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A record logged with a span's context carries its ids; one without, none.
func TestTraceHandlerAddsTheSpanIDs(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("test").Start(context.Background(), "task")
	defer span.End()
	var buf bytes.Buffer
	logger := slog.New(TraceHandler(slog.NewJSONHandler(&buf, nil))).With("task", "index")
	logger.InfoContext(ctx, "indexed", "rows", 3)
	logger.Info("no span")
	dec := json.NewDecoder(&buf)
	var with, without map[string]any
	if err := dec.Decode(&with); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&without); err != nil {
		t.Fatal(err)
	}
	sc := span.SpanContext()
	if with["trace_id"] != sc.TraceID().String() || with["span_id"] != sc.SpanID().String() || with["task"] != "index" || with["rows"] != 3.0 {
		t.Fatalf("record logged in the span: %v; want its trace and span ids beside its own attributes", with)
	}
	if _, ok := without["trace_id"]; ok {
		t.Fatalf("record logged without a span has a trace_id: %v", without)
	}
}
