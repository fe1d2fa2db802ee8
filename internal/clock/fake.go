package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a Clock that moves only when Advance or Set moves it. It is safe
// for concurrent use. See the package documentation for how a test drives
// it.
type Fake struct {
	mu  sync.Mutex
	now time.Time
	// target is where the Advances in progress take the clock; now when
	// none is.
	target time.Time
	armed  []*fakeTimer // the timers, tickers and AfterFuncs waiting to fire
	seq    uint64       // arming order, to fire timers with one deadline in that order

	// changed is closed, and replaced, whenever armed changes, to wake
	// BlockUntil.
	changed chan struct{}
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake whose time is start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, target: start, changed: make(chan struct{})}
}

// Now returns the Fake's current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns Now().Sub(t).
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// Until returns t.Sub(Now()).
func (f *Fake) Until(t time.Time) time.Duration { return t.Sub(f.Now()) }

// NewTimer returns a Timer that fires when the Fake reaches Now()+d; at once
// if d <= 0.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{fake: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// NewTicker returns a Ticker that fires each time the Fake crosses a
// multiple of d from now. It panics if d <= 0.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTicker{fakeTimer{fake: f, c: make(chan time.Time, 1)}}
	t.Reset(d)
	return t
}

// AfterFunc returns a Timer that calls f, in the goroutine that advances
// the Fake to Now()+d. If d <= 0, f runs at once in a goroutine of its own,
// as with time.AfterFunc.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{fake: f, fn: fn}
	t.Reset(d)
	return t
}

// Advance moves the Fake forward by d, firing on the way, in deadline order,
// everything that falls due. Each fires with Now at its own deadline; when
// Advance returns, Now is the old Now()+d. Concurrent Advances (or one made
// by a callback) add up. A negative d moves the clock back and fires
// nothing.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	if d < 0 {
		f.now, f.target = f.now.Add(d), f.target.Add(d)
		f.mu.Unlock()
		return
	}
	f.target = f.target.Add(d)
	target := f.target
	f.mu.Unlock()
	f.advanceTo(target)
}

// Set moves the Fake to t, firing what falls due on the way as Advance does.
// Setting it back fires nothing; timers keep their deadlines.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	if t.Before(f.now) {
		f.now, f.target = t, t
		f.mu.Unlock()
		return
	}
	if t.After(f.target) {
		f.target = t
	}
	f.mu.Unlock()
	f.advanceTo(t)
}

// Jump moves the Fake to t at once, as a process that was paused finds its
// clock when it wakes: what falls due on the way fires, in order, but Now
// reads t from the start (Set and Advance read each deadline as its timer
// fires). Jumping back is as Set.
func (f *Fake) Jump(t time.Time) {
	f.mu.Lock()
	if !t.After(f.now) {
		f.now, f.target = t, t
		f.mu.Unlock()
		return
	}
	f.now = t
	if t.After(f.target) {
		f.target = t
	}
	f.mu.Unlock()
	f.advanceTo(t)
}

// advanceTo fires, one at a time, what falls due up to target, and leaves
// the clock at target (or later, if a concurrent Advance went further).
func (f *Fake) advanceTo(target time.Time) {
	for {
		f.mu.Lock()
		next := f.nextDueLocked(target)
		if next == nil {
			if target.After(f.now) {
				f.now = target
			}
			f.mu.Unlock()
			return
		}
		if next.deadline.After(f.now) {
			f.now = next.deadline
		}
		fn := next.fireLocked(f.now)
		f.mu.Unlock()
		if fn != nil {
			fn()
		}
	}
}

// nextDueLocked returns the armed timer with the earliest deadline not after
// target (the first armed of those with that deadline), or nil.
func (f *Fake) nextDueLocked(target time.Time) *fakeTimer {
	var next *fakeTimer
	for _, t := range f.armed {
		if t.deadline.After(target) {
			continue
		}
		if next == nil || t.deadline.Before(next.deadline) ||
			(t.deadline.Equal(next.deadline) && t.seq < next.seq) {
			next = t
		}
	}
	return next
}

// Armed returns the number of timers, tickers and AfterFuncs waiting to
// fire.
func (f *Fake) Armed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.armed)
}

// NextDeadline returns when the next timer, ticker or AfterFunc will fire,
// and false if none is armed. A test reads it to check the delay a loop
// chose, before advancing to it.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var next time.Time
	for _, t := range f.armed {
		if next.IsZero() || t.deadline.Before(next) {
			next = t.deadline
		}
	}
	return next, !next.IsZero()
}

// BlockUntil waits until at least n timers, tickers or AfterFuncs are armed
// (see the package documentation). It waits forever if that never happens;
// BlockUntilContext gives up.
func (f *Fake) BlockUntil(n int) {
	_ = f.BlockUntilContext(context.Background(), n)
}

// BlockUntilContext waits until at least n timers, tickers or AfterFuncs
// are armed, or until ctx is done, and then returns ctx.Err().
func (f *Fake) BlockUntilContext(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		armed, changed := len(f.armed), f.changed
		f.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (f *Fake) armLocked(t *fakeTimer, deadline time.Time) {
	f.seq++
	t.deadline, t.seq = deadline, f.seq
	if !t.armed {
		t.armed = true
		f.armed = append(f.armed, t)
	}
	f.notifyLocked()
}

func (f *Fake) disarmLocked(t *fakeTimer) {
	if !t.armed {
		return
	}
	t.armed = false
	for i, a := range f.armed {
		if a == t {
			f.armed = append(f.armed[:i], f.armed[i+1:]...)
			break
		}
	}
	f.notifyLocked()
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// fakeTimer is a Fake's Timer, and the state of its Tickers and AfterFuncs.
type fakeTimer struct {
	fake   *Fake
	c      chan time.Time // capacity 1; nil for AfterFunc
	fn     func()         // AfterFunc's
	period time.Duration  // a ticker's; 0 for a timer

	// Guarded by fake.mu.
	armed    bool
	deadline time.Time
	seq      uint64
}

// fireLocked delivers the tick at now and re-arms a ticker or disarms a
// timer. It returns an AfterFunc's function, for the caller to run once
// the lock is released.
func (t *fakeTimer) fireLocked(now time.Time) func() {
	if t.period > 0 {
		t.fake.armLocked(t, t.deadline.Add(t.period))
	} else {
		t.fake.disarmLocked(t)
	}
	if t.fn != nil {
		return t.fn
	}
	select {
	case t.c <- now:
	default: // full: dropped, as a real ticker drops ticks
	}
	return nil
}

// drainLocked removes a value sent and not received, and reports whether
// there was one.
func (t *fakeTimer) drainLocked() bool {
	select {
	case <-t.c:
		return true
	default:
		return false
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	f := t.fake
	f.mu.Lock()
	defer f.mu.Unlock()
	wasArmed := t.armed
	f.disarmLocked(t)
	// A value sent and not received counts as a timer not yet fired, as
	// with Go 1.23 timers: Stop removes it and reports true.
	return t.drainLocked() || wasArmed
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.fake
	f.mu.Lock()
	wasArmed := t.armed
	drained := t.drainLocked()
	f.armLocked(t, f.now.Add(d))
	var fn func()
	if d <= 0 {
		fn = t.fireLocked(f.now)
	}
	f.mu.Unlock()
	if fn != nil {
		go fn() // as time.AfterFunc(0, fn): not in the caller's goroutine
	}
	return wasArmed || drained
}

// fakeTicker is a Fake's Ticker.
type fakeTicker struct{ fakeTimer }

func (t *fakeTicker) Stop() { t.fakeTimer.Stop() }

func (t *fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	f := t.fake
	f.mu.Lock()
	defer f.mu.Unlock()
	t.drainLocked()
	t.period = d
	f.armLocked(&t.fakeTimer, f.now.Add(d))
}
