package periodic

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
)

func TestPeriodicEveryMinuteFiresOncePerMinute(t *testing.T) {
	t.Parallel()
	sc, clk := newScheduler(t, start)
	fires := make(chan time.Time, 100)
	if err := sc.add("@every 1m", "every-minute", entryInfo{}, fired(clk, fires)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		waitArmed(t, clk)
		if at, _ := clk.NextDeadline(); clk.Until(at) != time.Minute {
			t.Fatalf("tick %d: the scheduler waits %v, want 1m", i, clk.Until(at))
		}
		clk.Advance(time.Minute)
		if got, want := next(t, fires), start.Add(time.Duration(i)*time.Minute); !got.Equal(want) {
			t.Errorf("tick %d fired at %v, want %v", i, got, want)
		}
	}
	sc.Stop() // waits for the ticks in flight
	if extra := drain(fires); len(extra) != 0 {
		t.Errorf("fired %d more times than once a minute: %v", len(extra), extra)
	}
}

func TestPeriodicCronFiresAtTheRightTimes(t *testing.T) {
	t.Parallel()
	sc, clk := newScheduler(t, start.Add(2*time.Minute+30*time.Second)) // 00:02:30
	fires := make(chan time.Time, 100)
	if err := sc.add("*/5 * * * *", "every-five", entryInfo{}, fired(clk, fires)); err != nil {
		t.Fatal(err)
	}
	// The scheduler's timer is due on the fives, the first one aligned on
	// the hour, not five minutes after the start; each tick fires then.
	for _, want := range []string{"00:05:00", "00:10:00", "00:15:00", "00:20:00"} {
		waitArmed(t, clk) // armed again after the previous tick
		at, _ := clk.NextDeadline()
		if got := at.Format(time.TimeOnly); got != want {
			t.Fatalf("the scheduler waits until %s, want %s", got, want)
		}
		clk.Set(at)
		if got := next(t, fires).Format(time.TimeOnly); got != want {
			t.Errorf("fired at %s, want %s", got, want)
		}
	}
	waitArmed(t, clk)
	sc.Stop()
	if extra := drain(fires); len(extra) != 0 {
		t.Errorf("fired between the ticks: %v", extra)
	}
}

func TestPeriodicEntryAddedAfterStartIsPickedUp(t *testing.T) {
	t.Parallel()
	sc, clk := newScheduler(t, start)
	hourly := make(chan time.Time, 100)
	if err := sc.add("@every 1h", "hourly", entryInfo{}, fired(clk, hourly)); err != nil {
		t.Fatal(err)
	}
	waitArmed(t, clk) // the scheduler runs, waiting for the hour
	if at, _ := clk.NextDeadline(); !at.Equal(start.Add(time.Hour)) {
		t.Fatalf("the scheduler waits until %v, want %v", at, start.Add(time.Hour))
	}

	minutely := make(chan time.Time, 100)
	if err := sc.add("@every 1m", "minutely", entryInfo{}, fired(clk, minutely)); err != nil {
		t.Fatal(err)
	}
	// add returns once the scheduler has re-armed its timer for the new
	// entry.
	if at, _ := clk.NextDeadline(); !at.Equal(start.Add(time.Minute)) {
		t.Fatalf("after add the scheduler waits until %v, want %v", at, start.Add(time.Minute))
	}
	clk.Advance(time.Minute)
	if got := next(t, minutely); !got.Equal(start.Add(time.Minute)) {
		t.Errorf("the entry added later fired at %v, want %v", got, start.Add(time.Minute))
	}
	for range 59 {
		waitArmed(t, clk)
		clk.Advance(time.Minute)
		next(t, minutely)
	}
	if got := next(t, hourly); !got.Equal(start.Add(time.Hour)) {
		t.Errorf("the first entry fired at %v, want %v", got, start.Add(time.Hour))
	}
	waitArmed(t, clk)
	sc.Stop()
	if extra := append(drain(minutely), drain(hourly)...); len(extra) != 0 {
		t.Errorf("extra firings: %v", extra)
	}
}

// stop cancels the ticks being sent and waits for them.
func TestSchedulerStopWaitsForTheTickInFlight(t *testing.T) {
	t.Parallel()
	sc, clk := newScheduler(t, start)
	firing := make(chan struct{})
	ended := make(chan struct{})
	var early atomic.Bool
	err := sc.add("@every 1m", "slow", entryInfo{}, func(ctx context.Context, _ Tick) error {
		close(firing)
		<-ctx.Done()
		// A scheduler that did not wait for its ticks would report
		// itself stopped now; a correct one cannot before this returns.
		// The timer only bounds the window given to that bug.
		select {
		case <-sc.Stopped():
			early.Store(true)
		case <-time.After(100 * time.Millisecond):
		}
		close(ended)
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	waitArmed(t, clk)
	clk.Advance(time.Minute)
	select {
	case <-firing:
	case <-time.After(10 * time.Second):
		t.Fatal("the tick did not fire")
	}
	sc.Stop()
	select {
	case <-ended:
	default:
		t.Error("stop returned before the tick in flight ended")
	}
	if early.Load() {
		t.Error("the scheduler was stopped while a tick was in flight")
	}
}

func TestSchedulerRefusesBadEntries(t *testing.T) {
	t.Parallel()
	sc, clk := newScheduler(t, start)
	noop := func(context.Context, Tick) error { return nil }
	for _, tc := range []struct{ spec, name, want string }{
		{"@every 1m", "", "has no name"},
		{"not a spec", "bad", `spec "not a spec"`},
		{"61 * * * *", "bad-minute", `spec "61 * * * *"`},
	} {
		err := sc.add(tc.spec, tc.name, entryInfo{}, noop)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("add(%q, %q) = %v, want an error with %q", tc.spec, tc.name, err, tc.want)
		}
	}
	if clk.Armed() != 0 {
		t.Error("a refused entry started the scheduler")
	}
}

// A tick may register another entry (a task run in eager mode can): add
// does not wait on a loop that is waiting for the tick.
func TestPeriodicTickMayAddAnEntry(t *testing.T) {
	t.Parallel()
	sc, clk := newScheduler(t, start)
	added := make(chan error, 1)
	inner := make(chan time.Time, 100)
	var once sync.Once
	err := sc.add("@every 1h", "outer", entryInfo{}, func(context.Context, Tick) error {
		once.Do(func() { added <- sc.add("@every 1m", "inner", entryInfo{}, fired(clk, inner)) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitArmed(t, clk)
	clk.Advance(time.Hour)
	if err := next(t, added); err != nil {
		t.Fatalf("add from a tick = %v", err)
	}
	waitArmed(t, clk)
	clk.Advance(time.Minute)
	if got, want := next(t, inner), start.Add(time.Hour+time.Minute); !got.Equal(want) {
		t.Errorf("the entry added by a tick fired at %v, want %v", got, want)
	}
}

func TestSchedulerAddAfterStop(t *testing.T) {
	t.Parallel()
	sc, _ := newScheduler(t, start)
	sc.Stop() // before any entry: nothing is running
	sc.Stop()
	if err := sc.add("@every 1m", "late", entryInfo{}, func(context.Context, Tick) error { return nil }); !errors.Is(err, service.ErrStopped) {
		t.Errorf("add after Stop = %v, want service.ErrStopped", err)
	}
}

// A Server that sends nothing (its config was refused) schedules nothing:
// add returns its error.
func TestSchedulerRefusesEntriesOfAServerInError(t *testing.T) {
	t.Parallel()
	refused := errors.New("config refused")
	clk := clock.NewFake(start)
	sc := NewScheduler(SchedulerParams{Server: noClaims{err: refused}, Archetype: service.NewArchetype(nil, clk)})
	t.Cleanup(sc.Stop)
	if err := sc.add("@every 1m", "report", entryInfo{}, func(context.Context, Tick) error { return nil }); !errors.Is(err, refused) {
		t.Errorf("add = %v, want the Server's error", err)
	}
	if clk.Armed() != 0 {
		t.Error("a refused entry started the scheduler")
	}
}
