package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/maintenance"
	"github.com/b6192125/machinist/internal/store"
)

var errDown = errors.New("store down")

// fakeStore is a Store that answers as a test tells it and records the
// calls it receives.
type fakeStore struct {
	clk *clock.Fake

	mu      sync.Mutex
	calls   []call
	changed chan struct{} // closed, and replaced, at each call

	// What the next calls answer.
	won        bool
	electErr   error
	forwards   []forwardReply // then Next -1
	recovers   []recoverReply // then none
	unrouted   int64
	unrouteErr error
	info       *store.QueueInfo
	infoErr    error
	// wakes is what WatchDue gives: nil off a single server.
	wakes chan struct{}
}

var _ maintenance.Store = (*fakeStore)(nil)

type forwardReply struct {
	f   store.Forwarded
	err error
}

type recoverReply struct {
	recovered, archived []string
	more                bool
	err                 error
}

// call is a call a fakeStore received.
type call struct {
	method string
	at     time.Duration // since start, by the fake clock
	holder string
	most   time.Duration // Forward's
	// ctxErr is the call's ctx.Err() and hasDeadline whether its ctx had
	// a deadline, when it was called.
	ctxErr      error
	hasDeadline bool
}

// newFakeStore returns a fakeStore on a single server (whose WatchDue gives
// a channel) or off one, with a clock.Fake at start.
func newFakeStore(singleServer bool) *fakeStore {
	s := &fakeStore{clk: clock.NewFake(start), changed: make(chan struct{})}
	if singleServer {
		s.wakes = make(chan struct{}, 1)
	}
	return s
}

// set changes what the store answers.
func (s *fakeStore) set(f func(s *fakeStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// record records a call; s.mu is held.
func (s *fakeStore) record(c call) {
	c.at = s.clk.Since(start)
	s.calls = append(s.calls, c)
	close(s.changed)
	s.changed = make(chan struct{})
}

// called returns the calls of method received so far.
func (s *fakeStore) called(method string) []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []call
	for _, c := range s.calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

// times returns when the calls of method were received.
func (s *fakeStore) times(method string) []time.Duration {
	var out []time.Duration
	for _, c := range s.called(method) {
		out = append(out, c.at)
	}
	return out
}

// methods returns the methods called, in order, but for Elect.
func (s *fakeStore) methods() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.calls {
		if c.method != "Elect" {
			out = append(out, c.method)
		}
	}
	return out
}

// waitCalls waits until the store has received n calls of method.
func (s *fakeStore) waitCalls(t *testing.T, method string, n int) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if len(s.called(method)) >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("waiting for %d calls of %s: %d came", n, method, len(s.called(method)))
		}
	}
}

// wake sends a wake, as Redis does when something comes due sooner or the
// watch takes effect.
func (s *fakeStore) wake() {
	select {
	case s.wakes <- struct{}{}:
	default: // one is waiting already
	}
}

func (s *fakeStore) Elect(ctx context.Context, q, holder string, term time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(call{method: "Elect", holder: holder})
	if q != queue || term != 3*time.Second {
		return false, errors.New("unexpected election")
	}
	return s.won, s.electErr
}

func (s *fakeStore) Resign(ctx context.Context, q, holder string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, hasDeadline := ctx.Deadline()
	s.record(call{method: "Resign", holder: holder, ctxErr: ctx.Err(), hasDeadline: hasDeadline})
	return nil
}

func (s *fakeStore) WatchDue(ctx context.Context, q string) (<-chan struct{}, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(call{method: "WatchDue"})
	if s.wakes == nil {
		return nil, func() {}
	}
	return s.wakes, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.record(call{method: "unwatch"})
	}
}

func (s *fakeStore) Forward(ctx context.Context, q string, most time.Duration) (store.Forwarded, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(call{method: "Forward", most: most})
	if len(s.forwards) == 0 {
		return store.Forwarded{Next: -1}, nil
	}
	r := s.forwards[0]
	s.forwards = s.forwards[1:]
	return r.f, r.err
}

func (s *fakeStore) Recover(ctx context.Context, q string) ([]string, []string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(call{method: "Recover"})
	if len(s.recovers) == 0 {
		return nil, nil, false, nil
	}
	r := s.recovers[0]
	s.recovers = s.recovers[1:]
	return r.recovered, r.archived, r.more, r.err
}

func (s *fakeStore) Unroute(ctx context.Context, q string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(call{method: "Unroute"})
	return s.unrouted, s.unrouteErr
}

func (s *fakeStore) QueueInfo(ctx context.Context, q string) (*store.QueueInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(call{method: "QueueInfo"})
	return s.info, s.infoErr
}

// fakeMetrics records the counts it is given, in order.
type fakeMetrics struct {
	mu     sync.Mutex
	counts []string
}

var _ maintenance.Metrics = (*fakeMetrics)(nil)

func (m *fakeMetrics) Recovered(ctx context.Context, q string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts = append(m.counts, fmt.Sprintf("recovered %s %d", q, n))
}

func (m *fakeMetrics) Archived(ctx context.Context, q, name string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts = append(m.counts, fmt.Sprintf("archived %s %q %d", q, name, n))
}

func (m *fakeMetrics) recorded() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.counts)
}
