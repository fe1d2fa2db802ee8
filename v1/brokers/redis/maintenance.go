package redisbroker

import (
	"context"
	"crypto/rand"
	"log/slog"

	"github.com/b6192125/machinist/internal/maintenance"
	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/internal/telemetry"
)

// A queue's maintenance runs in internal/maintenance, on the store.
var (
	_ maintenance.Store   = (*rdb.Store)(nil)
	_ maintenance.Metrics = (*telemetry.Metrics)(nil)
)

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
		m := maintenance.New(maintenance.Params{
			Queue:           q,
			Holder:          b.id,
			Store:           b.store,
			Metrics:         b.metrics,
			ForwardInterval: b.opts.ForwardInterval,
			RecoverInterval: b.opts.RecoverInterval,
			Archetype:       b.archetype,
		})
		b.maintainers[q] = m
		// Its context is the broker's: Close cancels it and Stops it.
		if err := m.Start(b.ctx); err != nil {
			b.log.Error("starting the maintenance of a queue failed", slog.String("queue", q), slog.Any("error", err))
		}
	}
}

// newID returns a random id for the broker in maintainer elections.
func newID() string { return rand.Text() }

// observeDepths returns, for the depth gauge, the sizes of the queues this
// broker maintains now (so one process per queue reads them, not every
// worker on every collection).
func (b *Broker) observeDepths(ctx context.Context) []telemetry.Depth {
	b.mu.Lock()
	ms := make([]*maintenance.Maintainer, 0, len(b.maintainers))
	for _, m := range b.maintainers {
		ms = append(ms, m)
	}
	b.mu.Unlock()
	var out []telemetry.Depth
	for _, m := range ms {
		if info := m.Depth(ctx); info != nil {
			out = append(out, telemetry.Depths(info)...)
		}
	}
	return out
}
