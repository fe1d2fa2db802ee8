package clock

import "time"

// Clock tells the time and makes timers. Real is the wall clock; a Fake
// moves only when a test advances it.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t: Now().Sub(t).
	Since(t time.Time) time.Duration
	// Until returns the duration until t: t.Sub(Now()).
	Until(t time.Time) time.Duration
	// NewTimer returns a Timer that sends the time on its channel once d
	// has elapsed, as time.NewTimer.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a Ticker that sends the time on its channel every
	// d, as time.NewTicker. It panics if d <= 0.
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f once d has elapsed, as time.AfterFunc. The Timer
	// it returns has a nil channel; Stop cancels the call.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a single event, as *time.Timer.
type Timer interface {
	// C returns the channel on which the time is delivered; nil for a
	// timer made by AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it stopped
	// the timer, false if the timer had already fired or been stopped.
	// After Stop returns, no stale value is received from C.
	Stop() bool
	// Reset makes the timer fire once d has elapsed from now, whether or
	// not it had fired or been stopped, and reports whether it was armed.
	// After Reset returns, no stale value is received from C.
	Reset(d time.Duration) bool
}

// Ticker delivers ticks at intervals, as *time.Ticker.
type Ticker interface {
	// C returns the channel on which the ticks are delivered.
	C() <-chan time.Time
	// Stop turns the ticker off; no more ticks are sent.
	Stop()
	// Reset stops the ticker and restarts it with period d from now. It
	// panics if d <= 0.
	Reset(d time.Duration)
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) Until(t time.Time) time.Duration { return time.Until(t) }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time   { return t.t.C }
func (t realTicker) Stop()                 { t.t.Stop() }
func (t realTicker) Reset(d time.Duration) { t.t.Reset(d) }
