package maintenance

import (
	"context"
	"log/slog"
	"time"
)

// forwardIdle is the longest the forwarder waits on a single server, where
// what comes due wakes it (or ForwardInterval, when that is longer).
const forwardIdle = time.Second

// watch starts (on) or ends watching the queue for what comes due before
// the forwarder's plan. Off a single server m.wakes stays nil.
func (m *Maintainer) watch(ctx context.Context, on bool) {
	m.unwatch()
	m.wakes, m.unwatch = nil, func() {}
	if on {
		m.wakes, m.unwatch = m.store.WatchDue(ctx, m.queue)
	}
}

// woken runs the forwarder at once: something came due before its plan.
func (m *Maintainer) woken() {
	if m.maintaining {
		m.forwardTimer.Reset(0)
	}
}

// forward promotes the queue's due tasks, while the process maintains it,
// and arms the forwarder's next run: at once while more are due; when the
// next is due, but no later than forwardIdle (on a single server) or
// ForwardInterval (off one); after a backoff on failure.
func (m *Maintainer) forward(ctx context.Context) {
	if !m.maintaining {
		return
	}
	most := time.Duration(0) // no plan: poll
	if m.wakes != nil {
		most = max(m.forwardInterval, forwardIdle)
	}
	f, err := m.store.Forward(ctx, m.queue, most)
	if f.Stranded > 0 {
		m.arch.Logger.Warn("sent aggregation members to pending: no worker alive aggregates their task any more",
			slog.Int64("members", f.Stranded), slog.String("queue", m.queue))
	}
	switch {
	case ctx.Err() != nil:
	case err != nil:
		m.forwardTimer.Reset(m.failed(err))
	case f.More:
		m.succeeded()
		m.forwardTimer.Reset(0)
	default:
		m.succeeded()
		wait := m.forwardInterval
		if most > 0 {
			wait = most
		}
		if f.Next >= 0 {
			wait = min(wait, f.Next)
		}
		m.forwardTimer.Reset(wait)
	}
}
