package maintenance

import (
	"context"
	"errors"
	"log/slog"
)

// Metrics counts what the recoverer does; *telemetry.Metrics is one.
type Metrics interface {
	// Recovered counts n tasks of queue put back after their lease ended.
	Recovered(ctx context.Context, queue string, n int)
	// Archived counts n tasks of name (empty: not known) archived on
	// queue.
	Archived(ctx context.Context, queue, name string, n int)
}

// recoverLeases runs the recoverer, while the process maintains the
// queue, and arms its next run: RecoverInterval later, or the backoff
// after a failure when that is longer.
func (m *Maintainer) recoverLeases(ctx context.Context) {
	wait := m.recoverInterval
	if m.maintaining {
		if err := m.recoverExpired(ctx); err != nil && ctx.Err() == nil {
			wait = max(m.failed(err), wait)
		} else {
			m.succeeded()
		}
	}
	m.recoverTimer.Reset(wait)
}

// recoverExpired puts back the rerouted tasks no worker alive has any
// more, then returns the tasks whose lease expired, a batch at a time.
func (m *Maintainer) recoverExpired(ctx context.Context) error {
	// A failure here does not keep expired leases from being recovered.
	unrouteErr := m.unroute(ctx)
	for {
		recovered, archived, more, err := m.store.Recover(ctx, m.queue)
		if err != nil {
			return errors.Join(err, unrouteErr)
		}
		for _, id := range recovered {
			m.arch.Logger.Warn("recovered task whose lease expired", slog.String("task_id", id), slog.String("queue", m.queue))
		}
		for _, id := range archived {
			m.arch.Logger.Error("archived task that kept losing its worker", slog.String("task_id", id), slog.String("queue", m.queue))
		}
		m.metrics.Recovered(ctx, m.queue, len(recovered))
		m.metrics.Archived(ctx, m.queue, "", len(archived))
		if !more {
			return unrouteErr
		}
	}
}
