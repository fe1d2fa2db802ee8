// Package clock is the time source of the library's background loops, so
// that a test can move time instead of waiting for it (asynq's timeutil,
// with timers).
//
// Code that schedules anything (a lease, a delay, a periodic run) takes a
// Clock and never calls time.Now, time.NewTimer, time.NewTicker or
// time.AfterFunc itself:
//
//	type forwarder struct {
//		clock clock.Clock // clock.Real() in production
//		...
//	}
//
//	timer := f.clock.NewTimer(f.interval)
//	defer timer.Stop()
//	for {
//		select {
//		case <-ctx.Done():
//			return
//		case <-timer.C():
//		}
//		f.forward(ctx)
//		timer.Reset(f.interval)
//	}
//
// # Real
//
// Real returns the wall clock: its methods call the time package and its
// Timer and Ticker are thin wrappers around *time.Timer and *time.Ticker,
// with their semantics (since Go 1.23: no stale value on C after Stop or
// Reset returns).
//
// # Fake
//
// NewFake returns a clock that moves only when the test says so. Advance
// (or Set) moves it forward and fires, in deadline order, every timer,
// ticker and AfterFunc that falls due on the way, each at its own deadline
// (Now reports the deadline while it fires). Timers and tickers send on
// their channel, which holds one value as a real timer's does; a value that
// finds the channel full is dropped, as a real ticker drops ticks.
// AfterFunc callbacks run synchronously, in the goroutine that called
// Advance or Set, one after the other, with no lock of the Fake held: a
// callback may call the Fake (Now, NewTimer, Reset, even Advance) without
// deadlocking. Only a timer armed with a duration <= 0 fires outside
// Advance: at once, as a real one would, its AfterFunc in a goroutine of
// its own.
//
// A loop under test runs in its own goroutine, so a test must not advance
// the clock before the loop has armed the timer it waits on: the timer would
// be armed later, from the later time, and the advance would be lost.
// BlockUntil waits for that, and is also how a test learns that the loop
// has finished handling a tick (a loop that re-arms its timer after each
// run has armed it again). The pattern, with no sleep:
//
//	clk := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
//	f := newForwarder(clk, time.Second)
//	f.Start(ctx)
//	defer f.Stop()
//
//	clk.BlockUntil(1)        // the loop waits on its timer
//	clk.Advance(time.Second) // fires it
//	clk.BlockUntil(1)        // the loop ran and armed the timer again
//	// assert what one run did
//
// NextDeadline tells when the next timer fires, for a test that checks the
// delay a loop chose (a backoff) before advancing to it.
//
// A ticker stays armed while the loop works, so BlockUntil cannot tell that
// a tick was handled: prefer a timer re-armed after each run in loops that
// tests drive, or wait on a signal of the loop's own.
package clock
