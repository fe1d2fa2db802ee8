package log

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// TraceHandler returns h adding trace_id and span_id to each record logged
// with a context that holds a span (slog's …Context methods), as the
// worker's own records of a task attempt have them. Inside a task, log with
// the task's context.Context: it holds the attempt's span.
//
//	logger := slog.New(log.TraceHandler(slog.NewJSONHandler(os.Stderr, nil)))
//	logger.InfoContext(ctx, "indexed", "rows", n)
func TraceHandler(h slog.Handler) slog.Handler { return traceHandler{h} }

type traceHandler struct{ next slog.Handler }

func (t traceHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return t.next.Enabled(ctx, l)
}

func (t traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return t.next.Handle(ctx, r)
}

func (t traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{t.next.WithAttrs(as)}
}

func (t traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{t.next.WithGroup(name)}
}
