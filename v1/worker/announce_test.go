package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
)

// announcing is a broker whose Announce refuses its first fails calls and
// tells, for each call, how long its context had left.
type announcing struct {
	brokers.LeaseBroker
	fails int

	mu    sync.Mutex
	calls int
	left  chan time.Duration
}

func (a *announcing) Announce(ctx context.Context, queues []string, names *brokers.TaskNames, ttl time.Duration) error {
	a.mu.Lock()
	a.calls++
	refuse := a.calls <= a.fails
	a.mu.Unlock()
	if d, ok := ctx.Deadline(); ok && a.left != nil {
		a.left <- time.Until(d)
	}
	if refuse {
		return errors.New("redis unreachable")
	}
	return a.LeaseBroker.Announce(ctx, queues, names, ttl)
}

func (a *announcing) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// A worker whose first announcements fail tries again before it starts:
// once it has started, sends of its aggregators' members are accepted.
func TestWorkerStartsOnceAnnounced(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &config.Config{})
	b := &announcing{LeaseBroker: h.mem, fails: 2}
	p := h.params()
	p.Broker = b
	var atStart int
	started := make(chan struct{})
	p.StartedFunc = func() {
		atStart = b.count()
		close(started)
	}
	h.start(p)
	recv(t, started, "the worker to start")
	if atStart != 3 {
		t.Fatalf("the worker started after %d announcements, want 3 (two refused, then one accepted)", atStart)
	}
	errs := h.errs.all()
	if len(errs) != 2 {
		t.Fatalf("reported %d errors, want the 2 refused announcements: %v", len(errs), errs)
	}
	for _, err := range errs {
		if !strings.Contains(err.Error(), "announce the task names") {
			t.Errorf("reported error %q does not say what failed", err)
		}
	}
}

// An announcement after the first may take until the last one lapses, not
// just a LeaseRenewInterval: on a slow Redis a late one still keeps the
// worker's names alive.
func TestAnnouncementMayTakeUntilTheLastOneLapses(t *testing.T) {
	t.Parallel()
	const (
		lease    = time.Hour // on the fake clock
		interval = time.Minute
	)
	h := newHarness(t, &config.Config{LeaseDuration: lease, LeaseRenewInterval: interval})
	b := &announcing{LeaseBroker: h.mem, left: make(chan time.Duration, 2)}
	clk := clock.NewFake(time.Unix(0, 0))
	p := h.params()
	p.Broker = b
	p.Clock = clk
	h.startStarted(p)
	first := recv(t, b.left, "the first announcement")
	if first > time.Second {
		t.Errorf("the first announcement had %v, want a second at most (an unreachable Redis is reported soon)", first)
	}
	clk.BlockUntil(2) // the heartbeat's and the announcer's timers
	clk.Advance(interval)
	// The real time the test took is not on the fake clock: the second
	// announcement has about lease-interval of it.
	if second := recv(t, b.left, "the second announcement"); second < lease-interval-time.Minute || second > lease-interval {
		t.Errorf("the second announcement had %v, want about %v (until the first lapses)", second, lease-interval)
	}
}
