package maintenance_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/maintenance"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/syncbuf"
)

// TestMain fails the run if a test leaves a maintainer's goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// The queue maintained and the process's name in its elections.
const (
	queue  = "q"
	holder = "me"
)

// waitLimit bounds every wait of these tests; a passing test waits far
// less.
const waitLimit = 30 * time.Second

// env is a Maintainer under test and what it runs on.
type env struct {
	t       *testing.T
	clk     *clock.Fake
	store   *fakeStore
	metrics *fakeMetrics
	logs    *syncbuf.Buffer
	m       *maintenance.Maintainer
}

// run starts a Maintainer of queue on s with p's intervals, timed by s's
// clock and logging to a buffer, and stops it at the end of the test.
func run(t *testing.T, s *fakeStore, p maintenance.Params) *env {
	t.Helper()
	e := &env{t: t, clk: s.clk, store: s, metrics: &fakeMetrics{}, logs: &syncbuf.Buffer{}}
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	p.Queue, p.Holder, p.Store, p.Metrics = queue, holder, s, e.metrics
	p.Archetype = service.NewArchetype(logger, s.clk)
	e.m = maintenance.New(p)
	if err := e.m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.m.Stop)
	return e
}

// waitArmed waits until n timers of the clock are armed: the loop has
// handled what fired and armed its timers again.
func (e *env) waitArmed(n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := e.clk.BlockUntilContext(ctx, n); err != nil {
		e.t.Fatalf("at %v, waiting for %d armed timers (%d are): %v", e.now(), n, e.clk.Armed(), err)
	}
}

// step checks that the next deadline is at (since start), moves the clock
// there and waits until armed timers are armed again.
func (e *env) step(at time.Duration, armed int) {
	e.t.Helper()
	next, ok := e.clk.NextDeadline()
	if !ok || next.Sub(start) != at {
		e.t.Fatalf("at %v the next deadline is %v (%t), want %v", e.now(), next.Sub(start), ok, at)
	}
	e.clk.Set(next)
	e.waitArmed(armed)
}

// runUntil waits until armed timers are armed, then moves the clock to at
// (since start) deadline by deadline, waiting after each for armed timers
// to be armed again.
func (e *env) runUntil(at time.Duration, armed int) {
	e.t.Helper()
	e.waitArmed(armed)
	for {
		next, ok := e.clk.NextDeadline()
		if !ok || next.Sub(start) > at {
			break
		}
		e.clk.Set(next)
		e.waitArmed(armed)
	}
	e.clk.Set(start.Add(at))
}

// nextIn returns how long the clock is from its next deadline.
func (e *env) nextIn() time.Duration {
	next, _ := e.clk.NextDeadline()
	return next.Sub(e.clk.Now())
}

func (e *env) now() time.Duration { return e.clk.Since(start) }

// lines returns the lines logged, without their time.
func (e *env) lines() []string {
	s := strings.TrimSuffix(e.logs.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// checkLogs fails the test unless the lines logged are want.
func (e *env) checkLogs(want ...string) {
	e.t.Helper()
	if got := e.lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		e.t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// maintaining is the line a process logs when it becomes the maintainer.
const maintaining = `level=DEBUG msg="maintaining queue" queue=q`
