package maintenance_test

import (
	"context"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/store"
)

// Depth reads the queue's sizes only while the process maintains it, and
// at most once every 5s; it reports the last read when a read fails,
// until it is 15s old.
func TestDepthReadAtMostEvery5s(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newFakeStore(false)
	e := run(t, s, p(10*time.Second, time.Hour))
	reads := func() int { return len(s.called("QueueInfo")) }

	e.waitArmed(3)
	if info := e.m.Depth(ctx); info != nil || reads() != 0 {
		t.Fatalf("Depth before winning the election = %v, after %d reads; want nil, none", info, reads())
	}

	first, second := &store.QueueInfo{Queue: queue, Pending: 1}, &store.QueueInfo{Queue: queue, Pending: 2}
	s.set(func(s *fakeStore) { s.won, s.info = true, first })
	e.runUntil(time.Second, 3)
	for _, at := range []time.Duration{time.Second, 5999 * time.Millisecond} {
		e.runUntil(at, 3)
		if info := e.m.Depth(ctx); info != first || reads() != 1 {
			t.Fatalf("Depth at %v = %v after %d reads, want the first sizes, read once", at, info, reads())
		}
	}
	s.set(func(s *fakeStore) { s.info = second })
	e.runUntil(6*time.Second, 3)
	if info := e.m.Depth(ctx); info != second || reads() != 2 {
		t.Fatalf("Depth at 6s = %v after %d reads, want the second sizes, read twice", info, reads())
	}

	// Reads fail: the last sizes are reported until they are 15s old.
	s.set(func(s *fakeStore) { s.info, s.infoErr = nil, errDown })
	e.runUntil(11*time.Second, 3)
	if info := e.m.Depth(ctx); info != second || reads() != 3 {
		t.Fatalf("Depth at 11s, the read failing = %v after %d reads, want the last sizes, read 3 times", info, reads())
	}
	e.runUntil(21*time.Second, 3)
	if info := e.m.Depth(ctx); info != nil || reads() != 4 {
		t.Fatalf("Depth at 21s, the read failing = %v after %d reads, want nil, read 4 times", info, reads())
	}
	e.checkLogs(maintaining,
		`level=DEBUG msg="reading the queue's sizes for the depth gauge failed" queue=q error="store down"`,
		`level=DEBUG msg="reading the queue's sizes for the depth gauge failed" queue=q error="store down"`)

	// Lost: nothing read.
	s.set(func(s *fakeStore) { s.won, s.infoErr = false, nil })
	e.runUntil(22*time.Second, 3)
	if info := e.m.Depth(ctx); info != nil || reads() != 4 {
		t.Fatalf("Depth after losing the election = %v after %d reads, want nil, none more", info, reads())
	}
}
