package redisbroker

import (
	"context"
	"log/slog"
	"time"
)

// maintain starts, once per queue, the loops that keep the queue moving:
// the forwarder promotes due scheduled and retry tasks, the recoverer
// returns tasks whose lease expired.
func (b *Broker) maintain(queues []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for _, q := range queues {
		if b.maintained[q] {
			continue
		}
		b.maintained[q] = true
		b.wg.Add(2)
		go func() {
			defer b.wg.Done()
			b.forwardLoop(b.ctx, q)
		}()
		go func() {
			defer b.wg.Done()
			b.recoverLoop(b.ctx, q)
		}()
	}
}

// forwardLoop promotes due tasks of q. It runs every ForwardInterval, or
// sooner when the next task is due sooner, so a task becomes pending within
// a few milliseconds of its time.
func (b *Broker) forwardLoop(ctx context.Context, q string) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		wait := b.opts.ForwardInterval
		more, next, err := b.store.Forward(ctx, q)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				b.log.Warn("promoting due tasks failed", slog.String("queue", q), slog.Any("error", err))
			}
		case more:
			wait = 0
		case !next.IsZero():
			wait = max(min(wait, time.Until(next)), 0)
		}
		timer.Reset(wait)
	}
}

// recoverLoop returns tasks of q whose lease expired, every RecoverInterval.
func (b *Broker) recoverLoop(ctx context.Context, q string) {
	ticker := time.NewTicker(b.opts.RecoverInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		for {
			recovered, archived, more, err := b.store.Recover(ctx, q)
			if err != nil {
				if ctx.Err() == nil {
					b.log.Warn("recovering expired leases failed", slog.String("queue", q), slog.Any("error", err))
				}
				break
			}
			for _, id := range recovered {
				b.log.Warn("recovered task whose lease expired", slog.String("task_id", id), slog.String("queue", q))
			}
			for _, id := range archived {
				b.log.Error("archived task that kept losing its worker", slog.String("task_id", id), slog.String("queue", q))
			}
			if !more {
				break
			}
		}
	}
}
