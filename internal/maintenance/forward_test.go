package maintenance_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/maintenance"
	"github.com/b6192125/machinist/internal/store"
)

// p returns Params with the forward and recover intervals.
func p(forward, recoverEvery time.Duration) maintenance.Params {
	return maintenance.Params{ForwardInterval: forward, RecoverInterval: recoverEvery}
}

// storeForwarded is a Forward that left the next due in next.
func storeForwarded(next time.Duration) store.Forwarded {
	return store.Forwarded{Next: next}
}

// On a single server a wake forwards at once, and the forwarder plans its
// next run no later than forwardIdle (1s), or ForwardInterval when longer.
func TestWakeForwardsAtOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		interval, most time.Duration
	}{
		{300 * time.Millisecond, time.Second},
		{2 * time.Second, 2 * time.Second},
	} {
		t.Run(fmt.Sprint(tt.interval), func(t *testing.T) {
			t.Parallel()
			s := newFakeStore(true)
			s.won = true
			s.forwards = []forwardReply{{f: storeForwarded(200 * time.Millisecond)}, {f: storeForwarded(-1)}}
			e := run(t, s, p(tt.interval, time.Hour))

			e.waitArmed(3)
			s.waitCalls(t, "WatchDue", 1)
			if n := len(s.called("Forward")); n != 0 {
				t.Fatalf("forwarded %d times before the watch took effect, want 0", n)
			}
			if got := e.nextIn(); got != time.Second {
				t.Fatalf("waits %v for the watch's first wake, want 1s", got)
			}
			// The first wake: the next is due in 200ms.
			s.wake()
			s.waitCalls(t, "Forward", 1)
			e.waitArmed(3)
			if got := e.nextIn(); got != 200*time.Millisecond {
				t.Errorf("next runs in %v, want 200ms, when the next is due", got)
			}
			// The second: none waits, so the plan is the longest.
			s.wake()
			s.waitCalls(t, "Forward", 2)
			e.waitArmed(3)
			e.runUntil(tt.most, 3)
			if got, want := s.times("Forward"), []time.Duration{0, 0, tt.most}; !slices.Equal(got, want) {
				t.Errorf("forwarded at %v, want %v", got, want)
			}
			for _, f := range s.called("Forward") {
				if f.most != tt.most {
					t.Errorf("Forward at %v planned at most %v, want %v", f.at, f.most, tt.most)
				}
			}
		})
	}
}

// Off a single server the forwarder polls every ForwardInterval, sooner
// when the next task is due sooner, and at once while a Forward leaves
// more due.
func TestForwardAgainAtOnceWhileMore(t *testing.T) {
	t.Parallel()
	s := newFakeStore(false)
	s.won = true
	s.forwards = []forwardReply{
		{f: store.Forwarded{More: true, Next: -1, Stranded: 2}},
		{f: store.Forwarded{More: true, Next: -1}},
		{f: storeForwarded(100 * time.Millisecond)},
	}
	e := run(t, s, p(300*time.Millisecond, time.Hour))

	e.waitArmed(3)
	if got, want := s.times("Forward"), []time.Duration{0, 0, 0}; !slices.Equal(got, want) {
		t.Fatalf("forwarded at %v, want %v", got, want)
	}
	for _, f := range s.called("Forward") {
		if f.most != 0 {
			t.Errorf("Forward planned at most %v off a single server, want 0 (no plan)", f.most)
		}
	}
	e.step(100*time.Millisecond, 3) // the next due, before ForwardInterval
	e.step(400*time.Millisecond, 3) // none due: ForwardInterval
	if got, want := s.times("Forward"), []time.Duration{0, 0, 0, 100 * time.Millisecond, 400 * time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("forwarded at %v, want %v", got, want)
	}
	if got := s.called("WatchDue"); len(got) != 1 {
		t.Errorf("WatchDue called %d times, want 1", len(got))
	}
	e.checkLogs(maintaining,
		`level=WARN msg="sent aggregation members to pending: no worker alive aggregates their task any more" members=2 queue=q`)
}

// A failed Forward is retried after a backoff from ForwardInterval,
// doubling (jittered) up to a second; the failures make one line, and the
// recovery another.
func TestForwardFailureBacksOffAndLogsOnce(t *testing.T) {
	t.Parallel()
	s := newFakeStore(false)
	s.won = true
	s.forwards = []forwardReply{{err: errDown}, {err: errDown}, {err: errDown}}
	e := run(t, s, p(100*time.Millisecond, time.Hour))

	e.waitArmed(3)
	for i, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		wait := e.nextIn()
		if wait < d*8/10 || wait > d {
			t.Fatalf("after failure %d waits %v, want within [%v, %v]", i+1, wait, d*8/10, d)
		}
		e.step(e.now()+wait, 3)
	}
	if n := len(s.called("Forward")); n != 4 {
		t.Fatalf("forwarded %d times, want 4", n)
	}
	if got := e.nextIn(); got != 100*time.Millisecond {
		t.Errorf("after a success waits %v, want ForwardInterval (100ms)", got)
	}
	e.checkLogs(maintaining,
		`level=ERROR msg="maintenance of queue q failed" queue=q error="store down"`,
		`level=INFO msg="maintenance of queue q recovered after failing 3 times" queue=q failures=3`)
	if n := strings.Count(e.logs.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d error lines for one run of failures, want 1", n)
	}
}
