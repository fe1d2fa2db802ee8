package clock_test

import (
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
)

// The wall clock's wrappers reach the time package. Each waits on the
// channel it tests, with a deadline.
func TestReal(t *testing.T) {
	t.Parallel()
	clk := clock.Real()
	before := time.Now()
	if now := clk.Now(); now.Before(before) {
		t.Errorf("Now() = %v, before time.Now() %v", now, before)
	}
	if clk.Since(before) < 0 || clk.Until(before) > 0 {
		t.Error("Since or Until has the wrong sign")
	}

	deadline := time.After(10 * time.Second)
	timer := clk.NewTimer(time.Millisecond)
	select {
	case <-timer.C():
	case <-deadline:
		t.Fatal("the timer did not fire")
	}
	if timer.Stop() {
		t.Error("Stop() of a fired and received timer = true")
	}

	ticker := clk.NewTicker(time.Millisecond)
	for range 2 {
		select {
		case <-ticker.C():
		case <-deadline:
			t.Fatal("the ticker did not tick")
		}
	}
	ticker.Reset(time.Hour)
	ticker.Stop()

	ran := make(chan struct{})
	af := clk.AfterFunc(time.Millisecond, func() { close(ran) })
	if af.C() != nil {
		t.Error("an AfterFunc timer has a channel")
	}
	select {
	case <-ran:
	case <-deadline:
		t.Fatal("the AfterFunc did not run")
	}

	stopped := clk.AfterFunc(time.Hour, func() { t.Error("a stopped AfterFunc ran") })
	if !stopped.Stop() {
		t.Error("Stop() of an armed AfterFunc = false")
	}
}
