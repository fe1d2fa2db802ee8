package integration_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// traced is a sending Server and a working one on a shared broker and
// backend, as two processes, recording their spans.
type traced struct {
	sender, worker *machinery.Server
	rec            *tracetest.SpanRecorder
}

func newTraced(t *testing.T, p pair, mutate ...func(*config.Config)) *traced {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := processes(t, p, 2, append([]func(*config.Config){func(c *config.Config) {
		c.TracerProvider = tp
		c.Propagator = propagation.TraceContext{}
	}}, mutate...)...)
	tr := &traced{sender: s[0], worker: s[1], rec: rec}
	if err := tr.worker.RegisterTasks(map[string]interface{}{
		"add": func(a, b int64) (int64, error) { return a + b, nil },
		"sum": func(xs ...int64) (int64, error) {
			var n int64
			for _, x := range xs {
				n += x
			}
			return n, nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	return tr
}

func (tr *traced) launch(t *testing.T) {
	t.Helper()
	w := tr.worker.NewWorker("traced", 4)
	launch(t, w)
	<-w.Started()
}

// spans waits until n spans have ended and returns them.
func (tr *traced) spans(t *testing.T, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var ended []sdktrace.ReadOnlySpan
	waitFor(t, fmt.Sprintf("%d spans to end", n), func() bool {
		ended = tr.rec.Ended()
		return len(ended) >= n
	})
	if len(ended) != n {
		t.Fatalf("%d spans ended, want %d:\n%s", len(ended), n, describeSpans(ended))
	}
	return ended
}

func describeSpans(spans []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %s span %s parent %s id %s\n", s.SpanKind(), s.Name(), s.SpanContext().SpanID(), s.Parent().SpanID(), attr(s, "messaging.message.id"))
	}
	return b.String()
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// find returns the spans of kind whose attribute key is value.
func find(spans []sdktrace.ReadOnlySpan, kind trace.SpanKind, key, value string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == kind && attr(s, key) == value {
			out = append(out, s)
		}
	}
	return out
}

func one(t *testing.T, spans []sdktrace.ReadOnlySpan, kind trace.SpanKind, key, value string) sdktrace.ReadOnlySpan {
	t.Helper()
	found := find(spans, kind, key, value)
	if len(found) != 1 {
		t.Fatalf("%d %s spans with %s=%s, want 1:\n%s", len(found), kind, key, value, describeSpans(spans))
	}
	return found[0]
}

func wantParent(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("%s %s (%s) has parent %s, want %s %s (%s)", child.SpanKind(), child.Name(), attr(child, "messaging.message.id"),
			child.Parent().SpanID(), parent.SpanKind(), parent.Name(), parent.SpanContext().SpanID())
	}
}

func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := attr(s, k); got != v {
			t.Errorf("%s %s: %s = %q, want %q", s.SpanKind(), s.Name(), k, got, v)
		}
	}
}

// A chain reads as one trace: its send, then each step's process and the
// send of the next step under it.
func TestTraceOfAChain(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		tr := newTraced(t, p)
		tr.launch(t)
		ctx := testCtx(t)
		steps := []*tasks.Signature{sig("add", i64(1), i64(1)), sig("add", i64(2)), sig("add", i64(3))}
		chain, err := tasks.NewChain(steps...)
		if err != nil {
			t.Fatal(err)
		}
		r, err := tr.sender.SendChainWithContext(ctx, chain)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		spans := tr.spans(t, 6) // 3 sends, 3 processes
		queue := config.DefaultQueueName
		first := one(t, spans, trace.SpanKindProducer, "machinist.workflow.type", "chain")
		if first.Name() != "send "+queue || first.Parent().IsValid() {
			t.Fatalf("chain's send span %q with parent %v, want a root %q", first.Name(), first.Parent().SpanID(), "send "+queue)
		}
		wantAttrs(t, first, map[string]string{
			"messaging.system": "machinist", "messaging.operation.type": "send", "messaging.destination.name": queue,
			"messaging.message.id": steps[0].UUID, "machinist.workflow.chain_length": "3",
		})
		send := first
		for i, step := range steps {
			proc := one(t, spans, trace.SpanKindConsumer, "messaging.message.id", step.UUID)
			wantParent(t, proc, send)
			if proc.Name() != "process "+queue {
				t.Fatalf("process span named %q", proc.Name())
			}
			wantAttrs(t, proc, map[string]string{
				"messaging.system": "machinist", "messaging.operation.type": "process", "messaging.destination.name": queue,
				"machinist.task.name": "add", "machinist.task.outcome": "success", "machinist.task.retried": "0",
			})
			if proc.Status().Code == codes.Error {
				t.Fatalf("step %d's span has status %v", i, proc.Status())
			}
			if i+1 < len(steps) {
				send = one(t, spans, trace.SpanKindProducer, "messaging.message.id", steps[i+1].UUID)
				wantParent(t, send, proc)
			}
		}
	})
}

// A chord: its members share the send span; its callback is sent under
// it too, with a link to every member's span, and runs under its own send.
func TestTraceOfAChord(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		tr := newTraced(t, p)
		tr.launch(t)
		ctx := testCtx(t)
		const n = 4
		var members []*tasks.Signature
		for i := range n {
			members = append(members, sig("add", i64(int64(i)), i64(1)))
		}
		group, err := tasks.NewGroup(members...)
		if err != nil {
			t.Fatal(err)
		}
		chord, err := tasks.NewChord(group, sig("sum"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := tr.sender.SendChordWithContext(ctx, chord, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		spans := tr.spans(t, n+3) // one send for the group, n processes, the callback's send and process
		send := one(t, spans, trace.SpanKindProducer, "machinist.workflow.type", "chord")
		wantAttrs(t, send, map[string]string{
			"messaging.batch.message_count": fmt.Sprint(n), "machinist.workflow.group_id": group.GroupUUID,
			"machinist.workflow.chord_callback_id": chord.Callback.UUID,
		})
		var memberSpans []trace.SpanContext
		for _, m := range members {
			proc := one(t, spans, trace.SpanKindConsumer, "messaging.message.id", m.UUID)
			wantParent(t, proc, send)
			wantAttrs(t, proc, map[string]string{"machinist.workflow.group_id": group.GroupUUID})
			memberSpans = append(memberSpans, proc.SpanContext())
		}
		cbSend := one(t, spans, trace.SpanKindProducer, "messaging.message.id", chord.Callback.UUID)
		wantParent(t, cbSend, send)
		var linked []trace.SpanContext
		for _, l := range cbSend.Links() {
			linked = append(linked, l.SpanContext.WithRemote(false))
		}
		for _, sc := range memberSpans {
			if !slices.ContainsFunc(linked, func(l trace.SpanContext) bool { return l.Equal(sc.WithRemote(false)) }) {
				t.Fatalf("the callback's send span links %d spans, not member span %s", len(linked), sc.SpanID())
			}
		}
		if len(linked) != n {
			t.Fatalf("the callback's send span has %d links, want one per member (%d)", len(linked), n)
		}
		cbProc := one(t, spans, trace.SpanKindConsumer, "messaging.message.id", chord.Callback.UUID)
		wantParent(t, cbProc, cbSend)
	})
}

// A DAG is one trace: every node's run is under the workflow's send
// span, and the join's run links to the runs of its two parents.
func TestTraceOfADAG(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		tr := newTraced(t, p)
		tr.launch(t)
		ctx := testCtx(t)
		wf, err := tasks.NewDAG("diamond").
			Add("a", sig("add", i64(1), i64(1))).
			Add("b", sig("add", i64(1)), "a").
			Add("c", sig("add", i64(2)), "a").
			Add("d", sig("add"), "b", "c").
			Build()
		if err != nil {
			t.Fatal(err)
		}
		r, err := tr.sender.SendWorkflowWithContext(ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		nodes := wf.Nodes()
		var spans []sdktrace.ReadOnlySpan
		waitFor(t, "the join's run to end", func() bool {
			spans = tr.rec.Ended()
			return len(find(spans, trace.SpanKindConsumer, "messaging.message.id", nodes[3].Signature.UUID)) == 1
		})
		send := one(t, spans, trace.SpanKindProducer, "machinist.workflow.type", "graph")
		wantAttrs(t, send, map[string]string{"machinist.workflow.id": wf.ID})
		runs := map[string]sdktrace.ReadOnlySpan{}
		for _, n := range nodes {
			proc := one(t, spans, trace.SpanKindConsumer, "messaging.message.id", n.Signature.UUID)
			if proc.SpanContext().TraceID() != send.SpanContext().TraceID() {
				t.Fatalf("node %s ran in trace %s, not the workflow's %s", n.Key, proc.SpanContext().TraceID(), send.SpanContext().TraceID())
			}
			runs[n.Key] = proc
		}
		var linked []trace.SpanID
		for _, l := range runs["d"].Links() {
			linked = append(linked, l.SpanContext.SpanID())
		}
		want := []trace.SpanID{runs["b"].SpanContext().SpanID(), runs["c"].SpanContext().SpanID()}
		if !slices.Equal(linked, want) {
			t.Fatalf("the join's run links %v, want its parents' runs %v, in order", linked, want)
		}
	})
}

// A long-running task's run has events for its progress (at most one a
// second), its checkpoints and its steps.
func TestTraceOfALongRunningTask(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		tr := newTraced(t, p)
		if err := tr.worker.RegisterTask("long", func(ctx context.Context) (int64, error) {
			for i := range int64(3) {
				if err := tasks.SetProgress(ctx, tasks.Progress{Done: i + 1, Total: 3}); err != nil {
					return 0, err
				}
			}
			if err := tasks.Checkpoint(ctx, 3); err != nil {
				return 0, err
			}
			return tasks.Step(ctx, "upload", func() (int64, error) { return 7, nil })
		}); err != nil {
			t.Fatal(err)
		}
		tr.launch(t)
		ctx := testCtx(t)
		s := sig("long")
		r, err := tr.sender.SendTaskWithContext(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		spans := tr.spans(t, 2)
		proc := one(t, spans, trace.SpanKindConsumer, "messaging.message.id", s.UUID)
		got := map[string]int{}
		for _, e := range proc.Events() {
			got[e.Name]++
		}
		if got["progress"] != 1 || got["checkpoint"] != 1 || got["step"] != 1 {
			t.Fatalf("the run's events %v, want one progress (of three within a second), one checkpoint, one step", eventNames(proc))
		}
	})
}

// A group's members share its send span.
func TestTraceOfAGroup(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		tr := newTraced(t, p)
		tr.launch(t)
		ctx := testCtx(t)
		members := []*tasks.Signature{sig("add", i64(1), i64(1)), sig("add", i64(2), i64(2)), sig("add", i64(3), i64(3))}
		group, err := tasks.NewGroup(members...)
		if err != nil {
			t.Fatal(err)
		}
		results, err := tr.sender.SendGroupWithContext(ctx, group, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if _, err := r.GetWithContext(ctx, poll); err != nil {
				t.Fatal(err)
			}
		}
		spans := tr.spans(t, 4)
		send := one(t, spans, trace.SpanKindProducer, "machinist.workflow.type", "group")
		for _, m := range members {
			wantParent(t, one(t, spans, trace.SpanKindConsumer, "messaging.message.id", m.UUID), send)
		}
	})
}

// recordingHandler keeps the records logged.
type recordingHandler struct {
	mu      *sync.Mutex
	records *[]slog.Record
	attrs   []slog.Attr
}

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.mu.Lock()
	*h.records = append(*h.records, r)
	h.mu.Unlock()
	return nil
}
func (h recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(slices.Clone(h.attrs), as...)
	return h
}
func (h recordingHandler) WithGroup(string) slog.Handler { return h }

// The attempts at a retried task are spans under its one send; a failed,
// a retried and a panicked attempt say so, with status Error; the worker's
// log records of an attempt carry its trace and span ids.
func TestTraceOfFailures(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		var mu sync.Mutex
		var records []slog.Record
		tr := newTraced(t, p, func(c *config.Config) {
			c.Logger = slog.New(recordingHandler{mu: &mu, records: &records})
		})
		var flakyCalls sync.Map
		if err := tr.worker.RegisterTasks(map[string]interface{}{
			"flaky": func(ctx context.Context) error {
				uuid := tasks.SignatureFromContext(ctx).UUID
				if _, again := flakyCalls.LoadOrStore(uuid, true); !again {
					return tasks.NewErrRetryTaskLater("not yet", 10*time.Millisecond)
				}
				return nil
			},
			"bad":  func() error { return errors.New("bad input") },
			"boom": func() error { panic("boom") },
		}); err != nil {
			t.Fatal(err)
		}
		tr.launch(t)
		ctx := testCtx(t)
		send := func(s *tasks.Signature) *tasks.Signature {
			t.Helper()
			r, err := tr.sender.SendTaskWithContext(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = r.GetWithContext(ctx, poll)
			return s
		}
		flaky, bad, boom := send(sig("flaky")), send(sig("bad")), send(sig("boom"))
		spans := tr.spans(t, 3+4)

		sent := one(t, spans, trace.SpanKindProducer, "messaging.message.id", flaky.UUID)
		attempts := find(spans, trace.SpanKindConsumer, "messaging.message.id", flaky.UUID)
		if len(attempts) != 2 {
			t.Fatalf("%d attempts at the retried task, want 2", len(attempts))
		}
		slices.SortFunc(attempts, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
		for _, a := range attempts {
			wantParent(t, a, sent)
		}
		wantAttrs(t, attempts[0], map[string]string{"machinist.task.outcome": "retry", "machinist.task.retried": "0"})
		wantAttrs(t, attempts[1], map[string]string{"machinist.task.outcome": "success", "machinist.task.retried": "1"})
		if attempts[0].Status().Code != codes.Error || !hasEvent(attempts[0], "retry") {
			t.Fatalf("the retried attempt: status %v, events %v; want Error and a retry event", attempts[0].Status(), eventNames(attempts[0]))
		}

		failed := one(t, spans, trace.SpanKindConsumer, "messaging.message.id", bad.UUID)
		wantAttrs(t, failed, map[string]string{"machinist.task.outcome": "failure"})
		if failed.Status().Code != codes.Error || !strings.Contains(failed.Status().Description, "bad input") || !hasEvent(failed, "exception") {
			t.Fatalf("the failed attempt: status %v, events %v; want Error with the error recorded", failed.Status(), eventNames(failed))
		}

		panicked := one(t, spans, trace.SpanKindConsumer, "messaging.message.id", boom.UUID)
		wantAttrs(t, panicked, map[string]string{"machinist.task.outcome": "failure"})
		if panicked.Status().Code != codes.Error {
			t.Fatalf("the panicked attempt: status %v, want Error", panicked.Status())
		}
		var stack string
		for _, e := range panicked.Events() {
			for _, kv := range e.Attributes {
				if kv.Key == "exception.stacktrace" {
					stack = kv.Value.AsString()
				}
			}
		}
		if !strings.Contains(stack, "tracing_test.go") {
			t.Fatalf("the panic's exception event has stack %q, want where it panicked", stack)
		}

		// The worker's records of the failed attempt carry its ids.
		mu.Lock()
		defer mu.Unlock()
		found := false
		for _, r := range records {
			if r.Message != "task failed" {
				continue
			}
			ids := map[string]string{}
			r.Attrs(func(a slog.Attr) bool { ids[a.Key] = a.Value.String(); return true })
			if ids["task_id"] == bad.UUID {
				found = true
				if ids["trace_id"] != failed.SpanContext().TraceID().String() || ids["span_id"] != failed.SpanContext().SpanID().String() {
					t.Fatalf("the log record of the failed task has trace_id %q span_id %q, want its span's %s %s",
						ids["trace_id"], ids["span_id"], failed.SpanContext().TraceID(), failed.SpanContext().SpanID())
				}
			}
		}
		if !found {
			t.Fatal("no log record of the failed task")
		}
	})
}

// A task whose worker died runs again as a new attempt under its send,
// counted as recovered. (An attempt that lost its lease ends with outcome
// lease_lost: v1/worker's TestSpanOfAnAttemptThatDidNotSettle.)
func TestTraceOfARecoveredTask(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		tr := newTraced(t, p, func(c *config.Config) {
			c.LeaseDuration = time.Second
			c.RecoverInterval = 50 * time.Millisecond
		})
		ctx := testCtx(t)
		s := sig("add", i64(1), i64(2))
		r, err := tr.sender.SendTaskWithContext(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		// A worker that takes the task and dies: nothing settles it.
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ds, err := tr.worker.GetBroker().(brokers.LeaseBroker).Fetch(fctx, []string{config.DefaultQueueName}, 1, nil)
		cancel()
		if err != nil || len(ds) != 1 {
			t.Fatalf("Fetch: %d, %v", len(ds), err)
		}
		tr.launch(t)
		if _, err := r.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		spans := tr.spans(t, 2)
		proc := one(t, spans, trace.SpanKindConsumer, "messaging.message.id", s.UUID)
		wantParent(t, proc, one(t, spans, trace.SpanKindProducer, "messaging.message.id", s.UUID))
		wantAttrs(t, proc, map[string]string{"machinist.task.recovered": "1", "machinist.task.outcome": "success"})
	})
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) bool {
	return slices.Contains(eventNames(s), name)
}

func eventNames(s sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, e := range s.Events() {
		names = append(names, e.Name)
	}
	return names
}

func i64(v int64) tasks.Arg { return tasks.Arg{Type: "int64", Value: v} }

// An aggregate is sent with a link to the send of each of its members, and
// runs under that send.
func TestTraceOfAnAggregate(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		tr := newTraced(t, p)
		if err := tr.worker.RegisterAggregator("notify", machinery.AggregationPolicy{MaxSize: 3},
			func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
				return &tasks.Signature{Name: "sum"}, nil
			}); err != nil {
			t.Fatal(err)
		}
		tr.launch(t)
		ctx := testCtx(t)
		var members []*tasks.Signature
		var results []*result.AsyncResult
		for range 3 {
			m := &tasks.Signature{Name: "notify", AggregationKey: "k"}
			r, err := tr.sender.SendTaskWithContext(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			members, results = append(members, m), append(results, r)
		}
		for _, r := range results {
			if _, err := r.GetWithContext(ctx, poll); err != nil {
				t.Fatal(err)
			}
		}
		spans := tr.spans(t, 3+2) // the members' sends, the aggregate's send and process
		send := one(t, spans, trace.SpanKindProducer, "machinist.workflow.type", "aggregate")
		wantAttrs(t, send, map[string]string{"machinist.aggregation.key": "k"})
		if len(send.Links()) != len(members) {
			t.Fatalf("the aggregate's send span has %d links, want one per member (%d)", len(send.Links()), len(members))
		}
		for _, m := range members {
			sc := one(t, spans, trace.SpanKindProducer, "messaging.message.id", m.UUID).SpanContext()
			if !slices.ContainsFunc(send.Links(), func(l sdktrace.Link) bool { return l.SpanContext.SpanID() == sc.SpanID() }) {
				t.Fatalf("the aggregate's send span does not link member %s's send", m.UUID)
			}
		}
		wantParent(t, one(t, spans, trace.SpanKindConsumer, "machinist.task.name", "sum"), send)
	})
}

// go-redis's own instrumentation, switched on by the user on a client given
// to NewServerWithRedisClient, traces the Redis commands of sending and
// running tasks beside machinist's spans.
func TestTraceWithRedisotel(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opt, err := goredis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	if err := redisotel.InstrumentTracing(client, redisotel.WithTracerProvider(tp)); err != nil {
		t.Fatal(err)
	}
	cnf := redisConfig(srv.URL(), srv.Prefix(t))
	cnf.NoUnixSignals = true
	cnf.Logger = slog.New(slog.DiscardHandler)
	cnf.TracerProvider, cnf.Propagator = tp, propagation.TraceContext{}
	s, err := machinery.NewServerWithRedisClient(cnf, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.RegisterTask("add", func(a, b int64) (int64, error) { return a + b, nil }); err != nil {
		t.Fatal(err)
	}
	w := s.NewWorker("w", 1)
	launch(t, w)
	<-w.Started()
	ctx := testCtx(t)
	r, err := s.SendTaskWithContext(ctx, sig("add", i64(1), i64(2)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetWithContext(ctx, poll); err != nil {
		t.Fatal(err)
	}
	var clientSpans, ours int
	waitFor(t, "machinist's spans and go-redis's", func() bool {
		clientSpans, ours = 0, 0
		for _, s := range rec.Ended() {
			switch {
			case s.SpanKind() == trace.SpanKindClient && attr(s, "db.system") == "redis" || attr(s, "db.system.name") == "redis":
				clientSpans++
			case attr(s, "messaging.message.id") == r.Signature.UUID:
				ours++
			}
		}
		return clientSpans > 0 && ours == 2
	})
}
