package worker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/waitfor"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// logLines is a slog.Handler that keeps each record's message and level.
type logLines struct {
	mu    sync.Mutex
	lines []string // "LEVEL message"
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Level.String()+" "+r.Message)
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

// count returns how many lines hold s, and all the lines.
func (l *logLines) count(s string) (int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n, append([]string(nil), l.lines...)
}

// startedBlockingBackend holds each STARTED write until its context ends,
// as a write in flight when its task is stopped is.
type startedBlockingBackend struct {
	fullBackend
	writing chan struct{} // closed when the first STARTED write begins
	once    sync.Once
}

func (b *startedBlockingBackend) SetStateStartedContext(ctx context.Context, sig *tasks.Signature) error {
	b.once.Do(func() { close(b.writing) })
	<-ctx.Done()
	return ctx.Err()
}

// blockingTask registers "block", a task that says it started and returns
// when its context ends.
func blockingTask(h *harness) <-chan struct{} {
	started := make(chan struct{}, 1)
	h.reg["block"] = func(ctx context.Context) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	return started
}

// A task cancelled while its STARTED state is being written logs that it
// was cancelled, once, and not that the write failed (the write is cut
// short because the task stopped, as it should be) nor that its lease was
// lost.
func TestCancelWhileWritingStartedLogsCancelledOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{})
	blockingTask(h)
	be := &startedBlockingBackend{fullBackend: h.backend, writing: make(chan struct{})}
	logs := &logLines{}
	p := h.params()
	p.Broker = h.mem // a Canceller: the worker watches cancellations
	p.Backend = be
	p.Logger = slog.New(logs)
	r := h.start(p)
	sig := newSig("block")
	h.publish(sig)
	recv(t, be.writing, "the STARTED write to begin")
	if _, running, err := h.mem.CancelTask(context.Background(), testQueue, sig.UUID, tasks.CancelledMessage+" by an operator", 0); err != nil || !running {
		t.Fatalf("CancelTask = %v, %v; want the running task cancelled", running, err)
	}
	waitFor(t, "the cancelled task to be logged", func() bool {
		n, _ := logs.count("task cancelled while it ran")
		return n > 0
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	waitTasksDone(t, r.w)
	cancelled, lines := logs.count("task cancelled while it ran")
	started, _ := logs.count("WARN writing state STARTED failed")
	lost, _ := logs.count("lease lost")
	if cancelled != 1 || started != 0 || lost != 0 {
		t.Fatalf("logged %d cancelled, %d STARTED failed, %d lease lost lines; want 1, 0, 0:\n%s",
			cancelled, started, lost, strings.Join(lines, "\n"))
	}
}

// A running task cancelled while the worker does not watch cancellations
// (its watch is down, or the lease renewal came before the watch's
// message) stops at its next lease renewal, and its worker logs that it
// was cancelled, not that its lease was lost and it runs again elsewhere.
func TestCancelSeenByLeaseRenewalLogsCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{LeaseDuration: time.Second})
	started := blockingTask(h)
	logs := &logLines{}
	p := h.params()
	// The memory broker without its Canceller side: no watch.
	p.Broker = struct {
		brokers.LeaseBroker
		brokers.Inspector
	}{h.mem, h.mem}
	p.Logger = slog.New(logs)
	r := h.start(p)
	sig := newSig("block")
	h.publish(sig)
	recv(t, started, "the task to start")
	if _, running, err := h.mem.CancelTask(context.Background(), testQueue, sig.UUID, tasks.CancelledMessage+" by an operator", 0); err != nil || !running {
		t.Fatalf("CancelTask = %v, %v; want the running task cancelled", running, err)
	}
	waitFor(t, "the task to stop", func() bool {
		n, _ := logs.count("while it ran")
		return n > 0
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	waitTasksDone(t, r.w)
	cancelled, lines := logs.count("task cancelled while it ran")
	lost, _ := logs.count("lease lost")
	if cancelled != 1 || lost != 0 {
		t.Fatalf("logged %d cancelled and %d lease lost lines; want 1 and 0:\n%s", cancelled, lost, strings.Join(lines, "\n"))
	}
}

// flakyCanceller's watch fails fails times, then holds until its context
// ends.
type flakyCanceller struct {
	brokers.Canceller
	fails int

	mu    sync.Mutex
	calls int
}

func (c *flakyCanceller) WatchCancels(ctx context.Context, fn func(uuid string)) error {
	c.mu.Lock()
	c.calls++
	n := c.calls
	c.mu.Unlock()
	if n <= c.fails {
		return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	}
	fn("") // set up
	<-ctx.Done()
	return ctx.Err()
}

// A watch of cancellations that keeps failing (Redis down) is logged as
// every background loop's failures are: once, then once per 30 s with a
// count, and once when it is back; not once per attempt.
func TestWatchCancelsFailuresAreNotRepeated(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{})
	clk := clock.NewFake(time.Unix(0, 0))
	logs := &logLines{}
	p := h.params()
	p.Logger = slog.New(logs)
	p.Clock = clk
	const fails = 14 // backoff 0.1 s doubling to 5 s: about 46 s of failures
	c := &flakyCanceller{Canceller: h.mem, fails: fails}
	p.Broker = struct {
		brokers.LeaseBroker
		brokers.Canceller
	}{h.mem, c}
	w := New(p)
	watch := w.newCancelWatch()
	if err := watch.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range fails {
		waitfor.Armed(t, waitTimeout, clk, 1) // the watch waits before trying again
		next, _ := clk.NextDeadline()
		clk.Set(next)
	}
	recv(t, watch.ready, "the watch to be set up")
	watch.Stop()
	failed, lines := logs.count("watching cancellations failed")
	recovered, _ := logs.count("watching cancellations recovered after failing 14 times")
	if failed != 2 || recovered != 1 {
		t.Fatalf("logged %d failure and %d recovery lines over %d failures in about 46 s; want 2 (the first, then one 30 s on) and 1:\n%s",
			failed, recovered, fails, strings.Join(lines, "\n"))
	}
}
