package worker

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/telemetry"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// ProgressEvery is the least time between two writes of a running task's
// progress (tasks.SetProgress): the reports in between are coalesced,
// the last one winning, and the last one is written with the task's
// final state.
const ProgressEvery = 100 * time.Millisecond

// runtime is what a running task's context gives tasks.SetProgress,
// Checkpoint and Step (tasks.Runtime). With a delivery its data is kept
// by the broker under the task's lease (store.TaskData); without one (a
// task run by Process, in eager mode) in memory, across its attempts.
type runtime struct {
	w    *Worker
	sig  *tasks.Signature
	d    *brokers.Delivery // nil: in memory
	log  *slog.Logger
	span trace.Span // the run's: progress, checkpoints and steps are its events

	mu        sync.Mutex
	data      map[string][]byte // nil until read (with a delivery)
	progress  *tasks.Progress   // the last reported
	dirty     bool              // progress not written yet
	scheduled bool              // a write of it is due
	lastWrite time.Time
	lastEvent time.Time // of progress, on the span
	closed    bool
	try       int // the attempt running, from 1

	writing sync.Mutex // one progress write at a time, in order
}

// progressEventEvery is the least time between two progress events on a
// run's span.
const progressEventEvery = time.Second

func (w *Worker) newRuntime(ctx context.Context, sig *tasks.Signature, d *brokers.Delivery, log *slog.Logger) *runtime {
	rt := &runtime{w: w, sig: sig, d: d, log: log, span: trace.SpanFromContext(ctx), try: 1}
	if d == nil {
		rt.data = map[string][]byte{}
	} else {
		rt.try = d.Retried + d.Recovered + 1
	}
	return rt
}

func (r *runtime) TaskUUID() string { return r.sig.UUID }

// attempt starts attempt n (from 0) of a task run by Process, which runs
// them all with one runtime: the span of ctx is the one events go on.
func (r *runtime) attempt(ctx context.Context, n int) {
	r.mu.Lock()
	r.span, r.try, r.closed = trace.SpanFromContext(ctx), n+1, false
	r.mu.Unlock()
}

// Emit appends data to the task's event stream.
func (r *runtime) Emit(ctx context.Context, data []byte) error {
	r.mu.Lock()
	try := r.try
	r.mu.Unlock()
	return r.w.store.AppendEvent(ctx, r.sig.UUID, tasks.Event{Kind: "data", Attempt: try, At: r.w.arch.Clock.Now(), Data: data})
}

// Progress records p and schedules its write: at once when the last
// write was ProgressEvery ago or more, else when it will be.
func (r *runtime) Progress(p tasks.Progress) {
	clk := r.w.arch.Clock
	r.mu.Lock()
	r.progress, r.dirty = &p, true
	schedule := !r.scheduled && !r.closed
	r.scheduled = r.scheduled || schedule
	wait := max(ProgressEvery-clk.Since(r.lastWrite), 0)
	span := r.span
	event := span.IsRecording() && clk.Since(r.lastEvent) >= progressEventEvery
	if event {
		r.lastEvent = clk.Now()
	}
	r.mu.Unlock()
	if event {
		span.AddEvent("progress", trace.WithAttributes(
			telemetry.ProgressDoneKey.Int64(p.Done), telemetry.ProgressTotalKey.Int64(p.Total)))
	}
	if schedule {
		clk.AfterFunc(wait, r.writeProgress)
	}
}

// writeProgress writes the last progress reported, under the task's
// lease (a lease lost meanwhile writes nothing, which is as it should),
// and appends it to the task's event stream.
func (r *runtime) writeProgress() {
	r.writing.Lock()
	defer r.writing.Unlock()
	r.mu.Lock()
	r.scheduled = false
	if !r.dirty || r.closed {
		r.mu.Unlock()
		return
	}
	p := *r.progress
	r.dirty, r.lastWrite = false, r.w.arch.Clock.Now()
	try := r.try
	r.mu.Unlock()
	raw, err := json.Marshal(p)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if r.d != nil {
			err = r.w.store.WriteTaskData(ctx, r.d, map[string][]byte{store.ProgressKey: raw})
		}
		if err == nil {
			err = r.w.store.AppendEvent(ctx, r.sig.UUID, tasks.Event{Kind: "progress", Attempt: try, At: p.At, Data: raw})
		}
		cancel()
	}
	if err != nil {
		r.log.Debug("writing the task's progress failed", slog.Any("error", err))
	}
}

// finish ends the run: no progress is written after it returns, and it
// returns the last progress reported, for the task's final state.
func (r *runtime) finish() *tasks.Progress {
	r.mu.Lock()
	r.closed = true
	p := r.progress
	r.mu.Unlock()
	r.writing.Lock() // a write under way ends first
	r.writing.Unlock()
	return p
}

// load reads the task's data once.
func (r *runtime) load(ctx context.Context) error {
	r.mu.Lock()
	loaded := r.data != nil
	r.mu.Unlock()
	if loaded {
		return nil
	}
	data, err := r.w.store.ReadTaskData(ctx, r.d)
	if err != nil {
		return err
	}
	delete(data, store.ProgressKey)
	r.mu.Lock()
	if r.data == nil {
		r.data = data
	}
	r.mu.Unlock()
	return nil
}

func (r *runtime) ReadData(ctx context.Context, key string) ([]byte, bool, error) {
	if err := r.load(ctx); err != nil {
		return nil, false, err
	}
	r.mu.Lock()
	v, ok := r.data[key]
	span := r.span
	r.mu.Unlock()
	if name, step := strings.CutPrefix(key, "step:"); step && ok {
		span.AddEvent("step", trace.WithAttributes(telemetry.StepNameKey.String(name), telemetry.StepKeptKey.Bool(true)))
	}
	return v, ok, nil
}

func (r *runtime) DataKeys(ctx context.Context) (int, error) {
	if err := r.load(ctx); err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.data), nil
}

func (r *runtime) WriteData(ctx context.Context, key string, value []byte) error {
	if r.d != nil {
		if err := r.w.store.WriteTaskData(ctx, r.d, map[string][]byte{key: value}); err != nil {
			return err
		}
	}
	r.mu.Lock()
	if r.data != nil { // else the first read reads it with the rest
		r.data[key] = value
	}
	span := r.span
	r.mu.Unlock()
	if name, step := strings.CutPrefix(key, "step:"); step {
		span.AddEvent("step", trace.WithAttributes(telemetry.StepNameKey.String(name), telemetry.StepKeptKey.Bool(false),
			telemetry.DataBytesKey.Int(len(value))))
	} else {
		span.AddEvent(key, trace.WithAttributes(telemetry.DataBytesKey.Int(len(value))))
	}
	return nil
}

type finalProgressKey struct{}

// withFinalProgress returns ctx carrying p, the last progress of the
// task whose outcome is settled under ctx (finalState reads it).
func withFinalProgress(ctx context.Context, p *tasks.Progress) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, finalProgressKey{}, p)
}

// finalState adds to state the last progress of its task, if any.
func finalState(ctx context.Context, state *tasks.TaskState) *tasks.TaskState {
	if p, ok := ctx.Value(finalProgressKey{}).(*tasks.Progress); ok {
		state.Progress = p
	}
	return state
}
