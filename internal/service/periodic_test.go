package service_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
)

// runs records when a RunFunc ran, and fails the runs it is told to.
type runs struct {
	clk  *clock.Fake
	mu   sync.Mutex
	at   []time.Duration // since start
	fail func(n int) error
}

func (r *runs) run(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, r.clk.Since(start))
	if r.fail != nil {
		return r.fail(len(r.at))
	}
	return nil
}

func (r *runs) times() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.at)
}

// startPeriodic starts a Periodic on p and stops it at the end of the test.
func startPeriodic(t *testing.T, p service.PeriodicParams) *service.Periodic {
	t.Helper()
	loop := service.NewPeriodic(p)
	if err := loop.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(loop.Stop)
	return loop
}

// step advances clk to its next deadline, after checking that it is d away,
// and waits for the loop to arm its timer again.
func step(t *testing.T, clk *clock.Fake, d time.Duration) {
	t.Helper()
	waitArmed(t, clk, 1)
	next, ok := clk.NextDeadline()
	if !ok || next.Sub(clk.Now()) != d {
		t.Fatalf("at %v the loop waits %v, want %v", clk.Since(start), next.Sub(clk.Now()), d)
	}
	clk.Advance(d)
	waitArmed(t, clk, 1)
}

func TestPeriodicRunsEveryInterval(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	r := &runs{clk: clk}
	startPeriodic(t, service.PeriodicParams{Interval: time.Minute, RunFunc: r.run, Archetype: service.NewArchetype(nil, clk)})

	for range 3 {
		step(t, clk, time.Minute)
	}
	if want := []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute}; !slices.Equal(r.times(), want) {
		t.Errorf("ran at %v, want %v", r.times(), want)
	}
}

func TestPeriodicRunAtStart(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	r := &runs{clk: clk}
	startPeriodic(t, service.PeriodicParams{Interval: time.Minute, RunAtStart: true, RunFunc: r.run, Archetype: service.NewArchetype(nil, clk)})
	waitArmed(t, clk, 1) // armed again after the first run
	step(t, clk, time.Minute)
	if want := []time.Duration{0, time.Minute}; !slices.Equal(r.times(), want) {
		t.Errorf("ran at %v, want %v", r.times(), want)
	}
}

func TestPeriodicBacksOffOnFailuresAndResetsOnSuccess(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	logger, logs := newLog()
	r := &runs{clk: clk, fail: func(n int) error {
		if n <= 5 || n == 7 { // runs 1-5 and 7 fail
			return errors.New("redis down")
		}
		return nil
	}}
	startPeriodic(t, service.PeriodicParams{
		Name:      "forwarder",
		Interval:  10 * time.Second,
		RunFunc:   r.run,
		Backoff:   service.Backoff{Min: time.Second, Max: 4 * time.Second, Jitter: -1},
		Archetype: service.NewArchetype(logger, clk),
		LogEvery:  5 * time.Second,
	})
	// Each wait, after the run before it.
	for _, d := range []time.Duration{
		10 * time.Second, // first run: fails
		time.Second,      // fails again
		2 * time.Second,  // and again
		4 * time.Second,  // and again, capped
		4 * time.Second,  // fails: 5 in a row
		4 * time.Second,  // succeeds
		10 * time.Second, // the interval again; fails
		time.Second,      // the backoff starts over; succeeds
		10 * time.Second,
	} {
		step(t, clk, d)
	}
	if want := []time.Duration{10, 11, 13, 17, 21, 25, 35, 36, 46}; !slices.Equal(r.times(), scale(want, time.Second)) {
		t.Errorf("ran at %v, want %v s", r.times(), want)
	}
	want := []string{
		`level=ERROR msg="forwarder failed" error="redis down"`,
		`level=ERROR msg="forwarder failed 3 times in the last 7s: redis down" failures=3 error="redis down"`,
		`level=INFO msg="forwarder recovered after failing 5 times" failures=5`,
		`level=ERROR msg="forwarder failed" error="redis down"`,
		`level=INFO msg="forwarder recovered after failing once" failures=1`,
	}
	if got := logs.lines(); !slices.Equal(got, want) {
		t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d * unit
	}
	return out
}

// The loop's backoff is jittered by default.
func TestPeriodicJitteredBackoff(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	r := &runs{clk: clk, fail: func(int) error { return errors.New("down") }}
	startPeriodic(t, service.PeriodicParams{
		Interval: time.Minute, RunAtStart: true, RunFunc: r.run,
		Backoff:   service.Backoff{Min: 10 * time.Second, Max: 10 * time.Second, Jitter: 0.5},
		Archetype: service.NewArchetype(slog.New(slog.DiscardHandler), clk),
	})
	seen := map[time.Duration]bool{}
	for range 20 {
		waitArmed(t, clk, 1)
		next, _ := clk.NextDeadline()
		d := next.Sub(clk.Now())
		if d < 5*time.Second || d > 10*time.Second {
			t.Fatalf("waits %v after a failure, want within [5s, 10s]", d)
		}
		seen[d] = true
		clk.Advance(d)
	}
	if len(seen) < 15 {
		t.Errorf("%d distinct delays in 20: not jittered", len(seen))
	}
}

// Stop cancels a run in progress; the error that the cancellation causes is
// neither logged nor retried.
func TestPeriodicStopDuringARun(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	logger, logs := newLog()
	running := make(chan struct{})
	loop := service.NewPeriodic(service.PeriodicParams{
		Interval: time.Minute, RunAtStart: true, Archetype: service.NewArchetype(logger, clk),
		RunFunc: func(ctx context.Context) error {
			close(running)
			<-ctx.Done()
			return ctx.Err()
		},
	})
	if err := loop.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed(t, "the run to start", running)
	loop.Stop()
	if got := logs.lines(); len(got) != 0 {
		t.Errorf("logged %q on Stop", got)
	}
	if clk.Armed() != 0 {
		t.Errorf("Armed() = %d after Stop, want 0: the timer was not stopped", clk.Armed())
	}
}

func TestPeriodicStartStop(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	r := &runs{clk: clk}
	p := service.PeriodicParams{Interval: time.Minute, RunFunc: r.run, Archetype: service.NewArchetype(nil, clk)}

	t.Run("stop before start, twice", func(t *testing.T) {
		loop := service.NewPeriodic(p)
		loop.Stop()
		loop.Stop()
		if err := loop.Start(context.Background()); !errors.Is(err, service.ErrStopped) {
			t.Errorf("Start after Stop = %v, want ErrStopped", err)
		}
	})
	t.Run("start twice, stop twice", func(t *testing.T) {
		loop := service.NewPeriodic(p)
		for range 2 {
			if err := loop.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		waitArmed(t, clk, 1)
		if clk.Armed() != 1 {
			t.Errorf("Armed() = %d, want 1: Start twice started two loops", clk.Armed())
		}
		loop.Stop()
		loop.Stop()
		closed(t, "Stopped", loop.Stopped())
		if err := loop.Start(context.Background()); !errors.Is(err, service.ErrStopped) {
			t.Errorf("Start after Stop = %v, want ErrStopped", err)
		}
	})
	t.Run("parent context cancelled", func(t *testing.T) {
		loop := service.NewPeriodic(p)
		ctx, cancel := context.WithCancel(context.Background())
		if err := loop.Start(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		closed(t, "Stopped after the parent context ended", loop.Stopped())
		loop.Stop()
	})
}

func TestPeriodicInvalidParams(t *testing.T) {
	t.Parallel()
	run := func(context.Context) error { return nil }
	tests := []struct {
		name   string
		params service.PeriodicParams
		field  string
	}{
		{"no interval", service.PeriodicParams{RunFunc: run}, "Interval 0s"},
		{"negative interval", service.PeriodicParams{Interval: -time.Second, RunFunc: run}, "Interval -1s"},
		{"no RunFunc", service.PeriodicParams{Interval: time.Second}, "RunFunc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			loop := service.NewPeriodic(tt.params)
			err := loop.Start(context.Background())
			if !errors.Is(err, service.ErrInvalidParams) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("Start = %v, want ErrInvalidParams naming %s", err, tt.field)
			}
			if isClosed(loop.Started()) {
				t.Error("started with invalid params")
			}
			loop.Stop() // does not wait for a goroutine that never ran
			if err := service.RunEvery(context.Background(), tt.params); !errors.Is(err, service.ErrInvalidParams) {
				t.Errorf("RunEvery = %v, want ErrInvalidParams", err)
			}
		})
	}
}

func TestRunEveryReturnsWhenContextEnds(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	r := &runs{clk: clk}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- service.RunEvery(ctx, service.PeriodicParams{Interval: time.Second, RunFunc: r.run, Archetype: service.NewArchetype(nil, clk)})
	}()
	step(t, clk, time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunEvery = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RunEvery did not return after its context ended")
	}
	if want := []time.Duration{time.Second}; !slices.Equal(r.times(), want) {
		t.Errorf("ran at %v, want %v", r.times(), want)
	}
}
