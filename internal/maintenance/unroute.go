package maintenance

import (
	"context"
	"log/slog"
)

// unroute puts back on the queue's pending list the tasks rerouted to the
// workers of a name (by a worker that took one it lacks) once no worker
// alive announces the name, so that they end, through a worker's retries,
// in a failure that says no worker has them.
func (m *Maintainer) unroute(ctx context.Context) error {
	n, err := m.store.Unroute(ctx, m.queue)
	if n > 0 {
		m.arch.Logger.Warn("put back rerouted tasks whose workers stopped announcing them",
			slog.Int64("tasks", n), slog.String("queue", m.queue))
	}
	return err
}
