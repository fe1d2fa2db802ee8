package worker

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/b6192125/machinist/internal/telemetry"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// recordSpans gives p a tracer provider that records, and returns the
// recorder.
func recordSpans(t *testing.T, p *Params) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p.Tracing = telemetry.NewTracing(tp, nil)
	return rec
}

// attemptOutcome waits for the one process span to end and returns its
// outcome attribute and status.
func attemptOutcome(t *testing.T, rec *tracetest.SpanRecorder) (string, sdktrace.Status) {
	t.Helper()
	var ended []sdktrace.ReadOnlySpan
	waitFor(t, "the attempt's span to end", func() bool {
		ended = rec.Ended()
		return len(ended) > 0
	})
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want the attempt's", len(ended))
	}
	for _, kv := range ended[0].Attributes() {
		if kv.Key == telemetry.OutcomeKey {
			return kv.Value.AsString(), ended[0].Status()
		}
	}
	return "", ended[0].Status()
}

// An attempt given up by a stopping worker, and one whose lease was lost,
// end with status Error and say which.
func TestSpanOfAnAttemptThatDidNotSettle(t *testing.T) {
	t.Parallel()
	t.Run("abandoned", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &config.Config{})
		started := make(chan struct{})
		h.reg["hold"] = func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() }
		h.publish(newSig("hold"))
		p := h.params()
		rec := recordSpans(t, &p)
		r := h.start(p)
		recv(t, started, "the task to start")
		r.w.Abort()
		_ = r.wait(t)
		outcome, status := attemptOutcome(t, rec)
		if outcome != telemetry.OutcomeAbandoned || status.Code != codes.Error {
			t.Fatalf("abandoned attempt: outcome %q, status %v; want %q and Error", outcome, status, telemetry.OutcomeAbandoned)
		}
	})
	t.Run("lease lost", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, &config.Config{})
		h.reg["hold"] = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		sig := newSig("hold")
		h.publish(sig)
		p := h.params()
		p.Broker = &losingBroker{LeaseBroker: h.spy}
		rec := recordSpans(t, &p)
		h.start(p)
		outcome, status := attemptOutcome(t, rec)
		if outcome != telemetry.OutcomeLeaseLost || status.Code != codes.Error {
			t.Fatalf("attempt that lost its lease: outcome %q, status %v; want %q and Error", outcome, status, telemetry.OutcomeLeaseLost)
		}
		if got := h.state(sig.UUID); got == tasks.StateSuccess || got == tasks.StateFailure {
			t.Fatalf("state %s written after the lease was lost", got)
		}
	})
}
