package clock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/waitfor"
)

var start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// received returns the value waiting on c, if any, without blocking.
func received(c <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-c:
		return v, true
	default:
		return time.Time{}, false
	}
}

// within fails the test if done is not closed in a few seconds: a deadline
// on a signal, not a sleep.
func within(t *testing.T, what string, done <-chan struct{}) {
	t.Helper()
	waitfor.Recv(t, 10*time.Second, what, done)
}

func TestFakeNowSinceUntil(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	if got := clk.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %v, want %v", got, start)
	}
	clk.Advance(90 * time.Second)
	if got := clk.Since(start); got != 90*time.Second {
		t.Errorf("Since(start) = %v, want 1m30s", got)
	}
	if got := clk.Until(start.Add(time.Hour)); got != time.Hour-90*time.Second {
		t.Errorf("Until(start+1h) = %v, want 58m30s", got)
	}
	clk.Set(start.Add(-time.Hour))
	if got := clk.Now(); !got.Equal(start.Add(-time.Hour)) {
		t.Errorf("after Set back, Now() = %v", got)
	}
}

func TestFakeTimerFiresAtItsDeadline(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	timer := clk.NewTimer(time.Minute)

	clk.Advance(time.Minute - time.Nanosecond)
	if v, ok := received(timer.C()); ok {
		t.Fatalf("fired at %v, before its deadline", v)
	}
	clk.Advance(time.Hour) // well past: it fires once, with its deadline
	v, ok := received(timer.C())
	if !ok || !v.Equal(start.Add(time.Minute)) {
		t.Fatalf("after the deadline got %v, %v; want %v", v, ok, start.Add(time.Minute))
	}
	clk.Advance(time.Hour)
	if _, ok := received(timer.C()); ok {
		t.Fatal("a timer fired twice")
	}
	if clk.Armed() != 0 {
		t.Errorf("Armed() = %d after the timer fired, want 0", clk.Armed())
	}
}

func TestFakeFiresInDeadlineOrder(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	var got []string
	var at []time.Duration
	record := func(name string) func() {
		return func() {
			got = append(got, name)
			at = append(at, clk.Since(start)) // Now is the deadline while it fires
		}
	}
	clk.AfterFunc(3*time.Second, record("3s"))
	clk.AfterFunc(time.Second, record("1s first"))
	clk.AfterFunc(2*time.Second, record("2s"))
	clk.AfterFunc(time.Second, record("1s second")) // same deadline: in arming order
	clk.AfterFunc(time.Hour, record("1h"))

	clk.Advance(5 * time.Second) // callbacks are synchronous: done when it returns
	want := []string{"1s first", "1s second", "2s", "3s"}
	if !slices.Equal(got, want) {
		t.Errorf("fired %v, want %v", got, want)
	}
	if wantAt := []time.Duration{time.Second, time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(at, wantAt) {
		t.Errorf("fired at %v, want %v", at, wantAt)
	}
	if clk.Since(start) != 5*time.Second {
		t.Errorf("after Advance(5s), Since(start) = %v", clk.Since(start))
	}
	if clk.Armed() != 1 {
		t.Errorf("Armed() = %d, want 1 (the 1h AfterFunc)", clk.Armed())
	}
	if next, ok := clk.NextDeadline(); !ok || !next.Equal(start.Add(time.Hour)) {
		t.Errorf("NextDeadline() = %v, %v; want %v", next, ok, start.Add(time.Hour))
	}
	clk.Advance(time.Hour)
	if next, ok := clk.NextDeadline(); ok {
		t.Errorf("NextDeadline() with nothing armed = %v, true", next)
	}
}

func TestFakeInterleavesTimersAndTickers(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	ticker := clk.NewTicker(time.Second)
	defer ticker.Stop()
	var seen []time.Duration
	// Receiving in a callback between ticks shows that each tick was sent
	// at its own time.
	for _, d := range []time.Duration{1500 * time.Millisecond, 2500 * time.Millisecond} {
		clk.AfterFunc(d, func() {
			v, ok := received(ticker.C())
			if !ok {
				t.Errorf("no tick waiting at %v", d)
				return
			}
			seen = append(seen, v.Sub(start))
		})
	}
	clk.Advance(3 * time.Second)
	v, ok := received(ticker.C())
	if !ok {
		t.Fatal("no tick at 3s")
	}
	seen = append(seen, v.Sub(start))
	if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(seen, want) {
		t.Errorf("ticks at %v, want %v", seen, want)
	}
}

func TestFakeTickerDropsTicksNobodyReceives(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	ticker := clk.NewTicker(time.Second)
	clk.Advance(10 * time.Second)
	v, ok := received(ticker.C())
	if !ok || !v.Equal(start.Add(time.Second)) {
		t.Fatalf("got %v, %v; want the first tick, the others dropped", v, ok)
	}
	if _, ok := received(ticker.C()); ok {
		t.Fatal("the channel held more than one tick")
	}

	ticker.Reset(time.Minute)
	clk.Advance(59 * time.Second)
	if _, ok := received(ticker.C()); ok {
		t.Fatal("ticked before the new period")
	}
	clk.Advance(time.Second)
	if _, ok := received(ticker.C()); !ok {
		t.Fatal("no tick after the new period")
	}

	ticker.Stop()
	clk.Advance(time.Hour)
	if _, ok := received(ticker.C()); ok {
		t.Fatal("a stopped ticker ticked")
	}
	if clk.Armed() != 0 {
		t.Errorf("Armed() = %d after Stop, want 0", clk.Armed())
	}
}

func TestFakeTimerStopAndReset(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// before brings the timer to the state under test.
		before    func(clk *clock.Fake, timer clock.Timer)
		wantArmed bool // what Stop and Reset report
	}{
		{"armed", func(*clock.Fake, clock.Timer) {}, true},
		{"fired, not received", func(clk *clock.Fake, _ clock.Timer) { clk.Advance(time.Minute) }, true},
		{"fired and received", func(clk *clock.Fake, timer clock.Timer) {
			clk.Advance(time.Minute)
			<-timer.C()
		}, false},
		{"stopped", func(_ *clock.Fake, timer clock.Timer) { timer.Stop() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/Stop", func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(start)
			timer := clk.NewTimer(time.Minute)
			tt.before(clk, timer)
			if got := timer.Stop(); got != tt.wantArmed {
				t.Errorf("Stop() = %v, want %v", got, tt.wantArmed)
			}
			clk.Advance(time.Hour)
			if v, ok := received(timer.C()); ok {
				t.Errorf("received %v after Stop", v)
			}
		})
		t.Run(tt.name+"/Reset", func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(start)
			timer := clk.NewTimer(time.Minute)
			tt.before(clk, timer)
			resetAt := clk.Now()
			if got := timer.Reset(time.Hour); got != tt.wantArmed {
				t.Errorf("Reset() = %v, want %v", got, tt.wantArmed)
			}
			if v, ok := received(timer.C()); ok {
				t.Fatalf("received a stale %v after Reset", v)
			}
			clk.Advance(time.Hour)
			if v, ok := received(timer.C()); !ok || !v.Equal(resetAt.Add(time.Hour)) {
				t.Errorf("after Reset got %v, %v; want %v", v, ok, resetAt.Add(time.Hour))
			}
		})
	}
}

func TestFakeNonPositiveDurationsFireAtOnce(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	timer := clk.NewTimer(0)
	if v, ok := received(timer.C()); !ok || !v.Equal(start) {
		t.Errorf("NewTimer(0): got %v, %v; want %v at once", v, ok, start)
	}
	timer.Reset(-time.Second)
	if _, ok := received(timer.C()); !ok {
		t.Error("Reset(-1s) did not fire at once")
	}

	ran := make(chan struct{})
	clk.AfterFunc(0, func() { close(ran) })
	within(t, "AfterFunc(0) to run without an Advance", ran)

	defer func() {
		if recover() == nil {
			t.Error("NewTicker(0) did not panic")
		}
	}()
	clk.NewTicker(0)
}

func TestFakeAfterFuncStop(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	ran := false
	timer := clk.AfterFunc(time.Second, func() { ran = true })
	if timer.C() != nil {
		t.Error("an AfterFunc timer has a channel")
	}
	if !timer.Stop() {
		t.Error("Stop() of an armed AfterFunc = false")
	}
	clk.Advance(time.Minute)
	if ran {
		t.Error("a stopped AfterFunc ran")
	}
	timer.Reset(time.Second)
	clk.Advance(time.Second)
	if !ran {
		t.Error("an AfterFunc reset after Stop did not run")
	}
}

// A callback runs with no lock of the Fake held: it may call the Fake,
// even Advance it, and what it arms fires in the same Advance if due.
func TestFakeCallbackCallsBackIntoTheFake(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	var got []string
	var self clock.Timer
	self = clk.AfterFunc(time.Second, func() {
		got = append(got, "first at "+clk.Since(start).String())
		self.Reset(10 * time.Second) // re-arms itself: fires at 11s
		clk.AfterFunc(time.Second, func() {
			got = append(got, "nested at "+clk.Since(start).String())
		})
		if clk.Armed() != 2 {
			t.Errorf("Armed() in the callback = %d, want 2", clk.Armed())
		}
	})
	clk.Advance(5 * time.Second)
	if want := []string{"first at 1s", "nested at 2s"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	self.Stop()
	got = nil
	clk.AfterFunc(time.Second, func() {
		clk.Advance(time.Minute) // a callback advancing the clock
		got = append(got, "advanced to "+clk.Since(start).String())
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		clk.Advance(time.Second)
	}()
	within(t, "Advance with a callback that advances", done)
	if want := []string{"advanced to 1m6s"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// The outer Advance, to 7s, does not take the clock back.
	if got := clk.Since(start); got != time.Minute+6*time.Second {
		t.Errorf("after the outer Advance, Since(start) = %v, want 1m6s", got)
	}
}

func TestFakeBlockUntil(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	armed := make(chan clock.Timer)
	go func() { armed <- clk.NewTimer(time.Second) }()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("BlockUntilContext(1) = %v with a timer being armed", err)
	}
	timer := <-armed
	clk.BlockUntil(1) // already true: returns at once
	timer.Stop()

	short, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := clk.BlockUntilContext(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("BlockUntilContext(1) with nothing armed = %v, want DeadlineExceeded", err)
	}
}

// A loop driven the way the package documentation shows: no sleep, and
// each step asserted exactly.
func TestFakeDrivesALoop(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var runs []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		timer := clk.NewTimer(time.Second)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C():
			}
			mu.Lock()
			runs = append(runs, clk.Since(start))
			mu.Unlock()
			timer.Reset(time.Second)
		}
	}()
	for range 3 {
		clk.BlockUntil(1)
		clk.Advance(time.Second)
	}
	clk.BlockUntil(1)
	cancel()
	<-done
	if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(runs, want) {
		t.Errorf("runs at %v, want %v", runs, want)
	}
}

// Run with -race: the Fake is safe for concurrent use.
func TestFakeConcurrentUse(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			timer := clk.NewTimer(time.Millisecond)
			for range 100 {
				timer.Reset(time.Millisecond)
				received(timer.C())
			}
			timer.Stop()
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				clk.Advance(time.Millisecond)
				_ = clk.Now()
			}
		}()
	}
	wg.Wait()
	if got := clk.Since(start); got != 400*time.Millisecond {
		t.Errorf("Since(start) = %v after 400 advances of 1ms", got)
	}
	if clk.Armed() != 0 {
		t.Errorf("Armed() = %d after every timer stopped", clk.Armed())
	}
}

// A jump reads its target from the start, whatever fires on the way: a
// goroutine woken by a timer due midway never sees the midway time.
func TestFakeJumpReadsItsTargetWhileTimersFire(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	var seen []time.Time
	clk.AfterFunc(time.Minute, func() { seen = append(seen, clk.Now()) })
	clk.AfterFunc(2*time.Minute, func() { seen = append(seen, clk.Now()) })
	late := start.Add(10 * time.Minute)
	clk.Jump(late)
	if len(seen) != 2 || !seen[0].Equal(late) || !seen[1].Equal(late) {
		t.Fatalf("Now read by the timers that fired: %v, want %v twice", seen, late)
	}
	if !clk.Now().Equal(late) || clk.Armed() != 0 {
		t.Fatalf("after the jump: Now %v, %d armed; want %v, 0", clk.Now(), clk.Armed(), late)
	}
	clk.Jump(start) // back, as Set
	if !clk.Now().Equal(start) {
		t.Fatalf("a jump back: Now %v, want %v", clk.Now(), start)
	}
}
