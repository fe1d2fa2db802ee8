package waitfor_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/waitfor"
)

// recorder is a testing.TB that records a failure instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r) // Fatalf does not return; run recovers
}

// run calls f, returning the failure it recorded, if any.
func run(t *testing.T, f func(tb testing.TB)) (failed string) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	f(r)
	return ""
}

func TestTrueReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	if got := run(t, func(tb testing.TB) {
		waitfor.True(tb, time.Minute, "the third call", func() bool { return n.Add(1) == 3 })
	}); got != "" {
		t.Fatalf("failed: %s", got)
	}
	if n.Load() != 3 {
		t.Errorf("cond called %d times, want 3", n.Load())
	}
}

func TestNilFailsWithTheLastError(t *testing.T) {
	got := run(t, func(tb testing.TB) {
		waitfor.Nil(tb, 20*time.Millisecond, "the queue to drain", func() error { return errors.New("3 tasks left") })
	})
	if !strings.Contains(got, "waiting for the queue to drain: 3 tasks left") {
		t.Errorf("failure %q does not say what was waited for and why it did not happen", got)
	}
}

func TestTrueFailsSayingWhat(t *testing.T) {
	got := run(t, func(tb testing.TB) {
		waitfor.True(tb, 20*time.Millisecond, "the worker to start", func() bool { return false })
	})
	if !strings.Contains(got, "waiting for the worker to start") || strings.Contains(got, "not yet") {
		t.Errorf("failure %q, want it to name what was waited for and nothing more", got)
	}
}

func TestRecvReturnsWhatWasSent(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := waitfor.Recv(t, time.Minute, "a value", ch); got != 7 {
		t.Errorf("Recv = %d, want 7", got)
	}
}

func TestRecvFailsSayingWhat(t *testing.T) {
	got := run(t, func(tb testing.TB) {
		waitfor.Recv(tb, 20*time.Millisecond, "the task to start", make(chan struct{}))
	})
	if !strings.Contains(got, "waiting for the task to start") {
		t.Errorf("failure %q does not say what was waited for", got)
	}
}
