package redisbroker

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/telemetry"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// A queue's maintenance (promoting due tasks, recovering expired leases) is
// run by one process at a time, its elected maintainer, so that an idle
// system's load on Redis grows with its queues, not with processes ×
// queues. Every process that fetches from a queue takes part in the
// election every electEvery; a maintainer's term lasts maintainerTerm and
// is renewed at each election, so when the maintainer dies another process
// takes over within maintainerTerm + electEvery. A maintainer that stops
// resigns, and another takes over at its next election.
const (
	electEvery     = time.Second
	maintainerTerm = 3 * time.Second
)

// On a single server a maintainer does not poll for due tasks: it runs
// forward.lua when the next of them is due, and whatever comes due sooner
// (a task sent with an ETA, a retry, an aggregation group, a batch's lease
// or retry) wakes it (rdb's WatchDue; lib/due.lua). It waits by Redis's
// clock (forward.lua returns how long until the next is due), so the
// host's need not agree. It still runs at least every forwardIdle (or
// ForwardInterval, when that is longer): a wake lost (a plan written by a
// former maintainer that stalled, a plan evicted or refused by a Redis out
// of memory, a sender of an earlier version) costs at most that; a
// resubscription's confirmation runs it at once, for the wakes published
// while the subscription was down.
const forwardIdle = time.Second

// maintainer keeps one queue moving while its broker is the queue's elected
// maintainer. It is a service.Service, started by the broker's first Fetch
// from the queue and stopped by Close.
type maintainer struct {
	service.Base
	b     *Broker
	queue string
	clock clock.Clock
	// fails logs failed elections, promotions and recoveries: the first at
	// once, then one line per interval with a count, not one per attempt.
	fails   *service.FailureLog
	backoff service.Backoff

	// active is whether the broker is the queue's maintainer now: only
	// then does it report the queue's depth.
	active atomic.Bool
	// depth is the queue's sizes as last read for the depth gauge, and
	// when.
	depthMu sync.Mutex
	depth   *brokers.QueueInfo
	depthAt time.Time
}

var _ service.Service = (*maintainer)(nil)

func newMaintainer(b *Broker, queue string) *maintainer {
	return &maintainer{
		b:       b,
		queue:   queue,
		clock:   b.clock,
		fails:   service.NewFailureLog(b.log.With(slog.String("queue", queue)), b.clock, "maintenance of queue "+queue, 0),
		backoff: service.Backoff{Min: b.opts.ForwardInterval, Max: time.Second},
	}
}

// Start launches the maintainer's loop.
func (m *maintainer) Start(ctx context.Context) error {
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

// run stands for election every electEvery; while the broker is the
// maintainer, it promotes due tasks when the next is due, woken by what
// comes due sooner (forwardIdle), or, off a single server, every
// ForwardInterval (or sooner when the next task is due sooner), so a task
// becomes pending within milliseconds of its time; and it recovers
// expired leases every RecoverInterval. Failures back off. When ctx ends
// it resigns.
func (m *maintainer) run(ctx context.Context) {
	elect := m.clock.NewTimer(0)
	defer elect.Stop()
	recoverTick := m.clock.NewTimer(m.b.opts.RecoverInterval)
	defer recoverTick.Stop()
	forward := m.clock.NewTimer(time.Hour)
	defer forward.Stop()

	// wakes, while the broker maintains the queue on a single server,
	// says that something came due before the plan of the last forward.
	var wakes <-chan struct{}
	unwatch := func() {}
	defer func() { unwatch() }()
	watch := func(on bool) {
		unwatch()
		wakes, unwatch = nil, func() {}
		if on {
			wakes, unwatch = m.b.store.WatchDue(ctx, m.queue)
		}
	}

	maintaining, failures := false, 0
	// failed records a failure of one of the steps and returns how long
	// to wait before the next attempt.
	failed := func(err error) time.Duration {
		failures++
		m.fails.Failed(err)
		return m.backoff.Delay(failures)
	}
	succeeded := func() {
		if failures > 0 {
			failures = 0
			m.fails.Succeeded()
		}
	}
	for {
		select {
		case <-ctx.Done():
			if maintaining {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				_ = m.b.store.Resign(rctx, m.queue, m.b.id)
				cancel()
			}
			return
		case <-elect.C():
			won, err := m.b.store.Elect(ctx, m.queue, m.b.id, maintainerTerm)
			switch {
			case ctx.Err() != nil:
				continue
			case err != nil:
				elect.Reset(max(failed(err), electEvery))
				if maintaining {
					watch(false)
				}
				maintaining = false
				m.active.Store(false)
				continue
			}
			succeeded()
			if won != maintaining {
				watch(won)
			}
			if won && !maintaining {
				m.b.log.Debug("maintaining queue", slog.String("queue", m.queue))
				if wakes == nil {
					forward.Reset(0)
				} else {
					// The watch's confirmation wakes it: its first run
					// sees what came due before the watch took effect.
					forward.Reset(forwardIdle)
				}
			}
			maintaining = won
			m.active.Store(won)
			elect.Reset(electEvery)
		case <-wakes:
			if maintaining {
				forward.Reset(0)
			}
		case <-forward.C():
			if !maintaining {
				continue
			}
			most := time.Duration(0) // no plan: poll
			if wakes != nil {
				most = max(m.b.opts.ForwardInterval, forwardIdle)
			}
			f, err := m.b.store.Forward(ctx, m.queue, most)
			if f.Stranded > 0 {
				m.b.log.Warn("sent aggregation members to pending: no worker alive aggregates their task any more",
					slog.Int64("members", f.Stranded), slog.String("queue", m.queue))
			}
			switch {
			case ctx.Err() != nil:
			case err != nil:
				forward.Reset(failed(err))
			case f.More:
				succeeded()
				forward.Reset(0)
			default:
				succeeded()
				wait := m.b.opts.ForwardInterval
				if most > 0 {
					wait = most
				}
				if f.Next >= 0 {
					wait = min(wait, f.Next)
				}
				forward.Reset(wait)
			}
		case <-recoverTick.C():
			wait := m.b.opts.RecoverInterval
			if maintaining {
				if err := m.recoverExpired(ctx); err != nil && ctx.Err() == nil {
					wait = max(failed(err), wait)
				} else {
					succeeded()
				}
			}
			recoverTick.Reset(wait)
		}
	}
}

// recoverExpired returns tasks whose lease expired, a batch at a time, and
// puts back on pending the rerouted tasks no worker alive has any more.
func (m *maintainer) recoverExpired(ctx context.Context) error {
	// A failure here does not keep expired leases from being recovered.
	n, unrouteErr := m.b.store.Unroute(ctx, m.queue)
	if n > 0 {
		m.b.log.Warn("put back rerouted tasks whose workers stopped announcing them",
			slog.Int64("tasks", n), slog.String("queue", m.queue))
	}
	for {
		recovered, archived, more, err := m.b.store.Recover(ctx, m.queue)
		if err != nil {
			return errors.Join(err, unrouteErr)
		}
		for _, id := range recovered {
			m.b.log.Warn("recovered task whose lease expired", slog.String("task_id", id), slog.String("queue", m.queue))
		}
		for _, id := range archived {
			m.b.log.Error("archived task that kept losing its worker", slog.String("task_id", id), slog.String("queue", m.queue))
		}
		m.b.metrics.Recovered(ctx, m.queue, len(recovered))
		m.b.metrics.Archived(ctx, m.queue, "", len(archived))
		if !more {
			return unrouteErr
		}
	}
}

// maintain starts, once per queue, the maintainer of each of queues.
func (b *Broker) maintain(queues []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for _, q := range queues {
		if b.maintainers[q] != nil {
			continue
		}
		m := newMaintainer(b, q)
		b.maintainers[q] = m
		// Its context is the broker's: Close cancels it and Stops it.
		if err := m.Start(b.ctx); err != nil {
			b.log.Error("starting the maintenance of a queue failed", slog.String("queue", q), slog.Any("error", err))
		}
	}
}

// newID returns a random id for the broker in maintainer elections.
func newID() string { return rand.Text() }

// depthEvery is the longest the depth gauge reports sizes read earlier:
// a collection more frequent than this costs Redis nothing.
const depthEvery = 5 * time.Second

// observeDepths returns, for the depth gauge, the sizes of the queues this
// broker maintains now, read afresh at most every depthEvery (so one
// process per queue reads it, not every worker on every collection).
func (b *Broker) observeDepths(ctx context.Context) []telemetry.Depth {
	b.mu.Lock()
	ms := make([]*maintainer, 0, len(b.maintainers))
	for _, m := range b.maintainers {
		if m.active.Load() {
			ms = append(ms, m)
		}
	}
	b.mu.Unlock()
	var out []telemetry.Depth
	for _, m := range ms {
		info := m.sizes(ctx)
		if info == nil {
			continue
		}
		out = append(out, telemetry.Depths(info)...)
	}
	return out
}

// sizes returns the queue's sizes, read at most depthEvery ago, or nil
// when they cannot be read.
func (m *maintainer) sizes(ctx context.Context) *brokers.QueueInfo {
	m.depthMu.Lock()
	defer m.depthMu.Unlock()
	if m.depth != nil && m.clock.Since(m.depthAt) < depthEvery {
		return m.depth
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	info, err := m.b.store.QueueInfo(rctx, m.queue) // this shard's alone
	if err != nil {
		m.b.log.Debug("reading the queue's sizes for the depth gauge failed", slog.String("queue", m.queue), slog.Any("error", err))
		if m.clock.Since(m.depthAt) >= 3*depthEvery {
			m.depth = nil // too old to report
		}
		return m.depth // the last known, if any
	}
	m.depth, m.depthAt = info, m.clock.Now()
	return info
}
