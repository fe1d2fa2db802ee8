package maintenance_test

import (
	"slices"
	"testing"
	"time"
)

// A process that wins the election watches the queue and forwards; one
// that loses it, or fails to stand, ends the watch and forwards no more
// until it wins again.
func TestElectionLostStopsForwarding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		lose func(s *fakeStore)
		logs []string
	}{
		{"lost", func(s *fakeStore) { s.won = false }, []string{maintaining, maintaining}},
		{"failed", func(s *fakeStore) { s.electErr = errDown }, []string{
			maintaining,
			`level=ERROR msg="maintenance of queue q failed" queue=q error="store down"`,
			`level=INFO msg="maintenance of queue q recovered after failing 3 times" queue=q failures=3`,
			maintaining,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newFakeStore(true)
			s.won = true
			s.forwards = []forwardReply{{f: storeForwarded(500 * time.Millisecond)}}
			e := run(t, s, p(300*time.Millisecond, time.Hour))

			// Won at once: it watches, and forwards when the watch takes
			// effect.
			e.waitArmed(3)
			s.waitCalls(t, "WatchDue", 1)
			s.wake()
			s.waitCalls(t, "Forward", 1)
			e.waitArmed(3)
			e.step(500*time.Millisecond, 3) // the next due
			if got, want := s.times("Forward"), []time.Duration{0, 500 * time.Millisecond}; !slices.Equal(got, want) {
				t.Fatalf("forwarded at %v, want %v", got, want)
			}

			s.set(tt.lose)
			e.step(time.Second, 3) // the election; the forwarder's plan is still armed
			s.waitCalls(t, "unwatch", 1)
			e.step(1500*time.Millisecond, 2) // the plan fires: nothing runs, nothing is armed again
			e.step(2*time.Second, 2)
			e.step(3*time.Second, 2)
			if got := len(s.called("Forward")); got != 2 {
				t.Errorf("forwarded %d times, want 2: forwarding went on after the election was lost", got)
			}
			if got := len(s.called("Elect")); got != 4 {
				t.Errorf("stood %d times by 3s, want 4 (every second, failed or not)", got)
			}

			// Won again: it watches again.
			s.set(func(s *fakeStore) { s.won, s.electErr = true, nil })
			e.step(4*time.Second, 3)
			s.waitCalls(t, "WatchDue", 2)
			e.checkLogs(tt.logs...)
		})
	}
}
