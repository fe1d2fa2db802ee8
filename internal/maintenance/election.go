package maintenance

import (
	"context"
	"log/slog"
	"time"
)

// A process stands for election every electEvery; a maintainer's term
// lasts maintainerTerm, renewed at each election.
const (
	electEvery     = time.Second
	maintainerTerm = 3 * time.Second
)

// elect stands for election and starts or stops maintaining the queue by
// its result; a failed election counts as lost.
func (m *Maintainer) elect(ctx context.Context) {
	won, err := m.store.Elect(ctx, m.queue, m.holder, maintainerTerm)
	switch {
	case ctx.Err() != nil:
		return
	case err != nil:
		m.electTimer.Reset(max(m.failed(err), electEvery))
		m.setMaintaining(ctx, false)
		return
	}
	m.succeeded()
	m.setMaintaining(ctx, won)
	m.electTimer.Reset(electEvery)
}

// setMaintaining records whether the process maintains the queue. On
// taking it up, it watches the queue for what comes due and plans the
// forwarder's first run; on giving it up, it ends the watch.
func (m *Maintainer) setMaintaining(ctx context.Context, on bool) {
	if on != m.maintaining {
		m.watch(ctx, on)
	}
	if on && !m.maintaining {
		m.arch.Logger.Debug("maintaining queue", slog.String("queue", m.queue))
		if m.wakes == nil {
			m.forwardTimer.Reset(0)
		} else {
			// The watch's confirmation wakes it: its first run sees what
			// came due before the watch took effect.
			m.forwardTimer.Reset(forwardIdle)
		}
	}
	m.maintaining = on
	m.active.Store(on)
}

// resign ends the process's term as the queue's maintainer, for another
// process to take over at its next election rather than at the term's
// end. ctx has ended: the call has a second of its own.
func (m *Maintainer) resign(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = m.store.Resign(rctx, m.queue, m.holder)
}
