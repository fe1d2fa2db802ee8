package maintenance

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
)

// Params configures a Maintainer.
type Params struct {
	// Queue is the queue maintained. Required.
	Queue string
	// Holder names this process in the queue's elections: unique among
	// the processes that fetch from it. Required.
	Holder string
	// Store holds the queue. Required.
	Store Store
	// Metrics counts the tasks recovered and archived. Required.
	Metrics Metrics
	// ForwardInterval is how often the forwarder runs off a single server
	// (on one, at least every max(ForwardInterval, 1s)), and the delay
	// after a first failure. Required, > 0.
	ForwardInterval time.Duration
	// RecoverInterval is how often the recoverer runs. Required, > 0.
	RecoverInterval time.Duration
	// Archetype gives the logger and the clock. Default
	// service.NewArchetype(nil, nil).
	Archetype *service.Archetype
}

// Maintainer runs a queue's maintenance while its process is the queue's
// elected maintainer (see the package documentation). It is a
// service.Service.
type Maintainer struct {
	service.Base

	queue, holder   string
	store           Store
	metrics         Metrics
	forwardInterval time.Duration
	recoverInterval time.Duration
	arch            *service.Archetype
	fails           *service.FailureLog
	backoff         service.Backoff

	// active is whether the process maintains the queue now, for Depth.
	active atomic.Bool
	depth  depthCache

	// The loop's state, touched by its goroutine alone.
	maintaining  bool
	failures     int // consecutive, of any job
	electTimer   clock.Timer
	forwardTimer clock.Timer
	recoverTimer clock.Timer
	// wakes, while the process maintains the queue on a single server,
	// says that something came due before the plan of the last forward;
	// unwatch ends the watch.
	wakes   <-chan struct{}
	unwatch func()
}

var _ service.Service = (*Maintainer)(nil)

// New returns the Maintainer of p.Queue; Start starts it.
func New(p Params) *Maintainer {
	arch := p.Archetype
	if arch == nil {
		arch = service.NewArchetype(nil, nil)
	}
	return &Maintainer{
		queue:           p.Queue,
		holder:          p.Holder,
		store:           p.Store,
		metrics:         p.Metrics,
		forwardInterval: p.ForwardInterval,
		recoverInterval: p.RecoverInterval,
		arch:            arch,
		fails:           arch.With(slog.String("queue", p.Queue)).FailureLog("maintenance of queue " + p.Queue),
		backoff:         service.Backoff{Min: p.ForwardInterval, Max: time.Second},
	}
}

// Start launches the maintainer's loop, which stands for election at once.
func (m *Maintainer) Start(ctx context.Context) error {
	ctx, shouldStart, stopped, err := m.StartInit(ctx)
	if !shouldStart {
		return err
	}
	go func() {
		defer close(stopped)
		m.run(ctx)
	}()
	return nil
}

// run stands for election every electEvery and, while the process is the
// maintainer, runs the forwarder and the recoverer, until ctx ends; then
// a maintainer resigns.
func (m *Maintainer) run(ctx context.Context) {
	m.electTimer = m.arch.Clock.NewTimer(0)
	defer m.electTimer.Stop()
	m.recoverTimer = m.arch.Clock.NewTimer(m.recoverInterval)
	defer m.recoverTimer.Stop()
	m.forwardTimer = m.arch.Clock.NewTimer(time.Hour)
	defer m.forwardTimer.Stop()
	m.unwatch = func() {}
	defer func() { m.unwatch() }()

	for {
		select {
		case <-ctx.Done():
			if m.maintaining {
				m.resign(ctx)
			}
			return
		case <-m.electTimer.C():
			m.elect(ctx)
		case <-m.wakes:
			m.woken()
		case <-m.forwardTimer.C():
			m.forward(ctx)
		case <-m.recoverTimer.C():
			m.recoverLeases(ctx)
		}
	}
}

// failed records a failure of one of the jobs and returns how long to wait
// before the next attempt.
func (m *Maintainer) failed(err error) time.Duration {
	m.failures++
	m.fails.Failed(err)
	return m.backoff.Delay(m.failures)
}

// succeeded records a success of one of the jobs.
func (m *Maintainer) succeeded() {
	if m.failures > 0 {
		m.failures = 0
		m.fails.Succeeded()
	}
}
