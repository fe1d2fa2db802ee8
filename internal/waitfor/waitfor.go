// Package waitfor is how tests wait for something to happen: they poll a
// condition until it holds, up to a deadline, and fail saying what they
// waited for and, when the condition says why it does not hold yet, why.
// A deadline is a bound on a failure, never a wait a passing test needs.
package waitfor

import (
	"context"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
)

// Interval is how often True and Nil poll.
const Interval = 5 * time.Millisecond

// True polls cond every Interval until it returns true, failing tb after
// timeout.
func True(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	Poll(tb, timeout, Interval, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// Nil polls cond every Interval until it returns nil, failing tb with its
// last error after timeout.
func Nil(tb testing.TB, timeout time.Duration, what string, cond func() error) {
	tb.Helper()
	Poll(tb, timeout, Interval, what, cond)
}

// Poll polls cond every interval until it returns nil, failing tb with its
// last error after timeout. cond runs at once, then after each interval.
func Poll(tb testing.TB, timeout, interval time.Duration, what string, cond func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if err == errNotYet {
				tb.Fatalf("timed out after %v waiting for %s", timeout, what)
			}
			tb.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		<-tick.C
	}
}

// errNotYet is the error of a condition that only says no.
var errNotYet = notYet{}

type notYet struct{}

func (notYet) Error() string { return "not yet" }

// Recv receives from ch, failing tb after timeout: a test's wait for a
// signal another goroutine sends (or a close), with a bound on a failure.
func Recv[T any](tb testing.TB, timeout time.Duration, what string, ch <-chan T) T {
	tb.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		panic("unreachable") // Fatalf does not return
	}
}

// Armed waits until n timers of clk are armed, failing tb after timeout:
// a loop on a fake clock has reached its wait, so the test may move time.
func Armed(tb testing.TB, timeout time.Duration, clk *clock.Fake, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, n); err != nil {
		tb.Fatalf("timed out after %v waiting for %d armed timers: %v", timeout, n, err)
	}
}
