package redisbroker

import (
	"context"
	"crypto/rand"
	"log/slog"
	"time"
)

// A queue's maintenance (promoting due tasks, recovering expired leases) is
// run by one process at a time, its elected maintainer, so that an idle
// system's load on Redis grows with its queues, not with processes ×
// queues. Every process that fetches from a queue takes part in the
// election every electEvery; a maintainer's term lasts maintainerTerm and
// is renewed at each election, so when the maintainer dies another process
// takes over within maintainerTerm + electEvery. A maintainer that closes
// resigns, and another takes over at its next election.
const (
	electEvery     = time.Second
	maintainerTerm = 3 * time.Second
)

// maintain starts, once per queue, the loop that keeps the queue moving
// while this process is its maintainer.
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
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.maintainLoop(b.ctx, q)
		}()
	}
}

// maintainLoop runs until ctx ends. Every electEvery it stands for election
// as q's maintainer; while it is the maintainer, it promotes due tasks every
// ForwardInterval (or sooner when the next task is due sooner, so a task
// becomes pending within milliseconds of its time) and recovers expired
// leases every RecoverInterval. It resigns when ctx ends.
func (b *Broker) maintainLoop(ctx context.Context, q string) {
	elect := time.NewTicker(electEvery)
	defer elect.Stop()
	recoverTick := time.NewTicker(b.opts.RecoverInterval)
	defer recoverTick.Stop()
	forward := time.NewTimer(time.Hour)
	defer forward.Stop()

	maintainer := false
	stand := func() {
		won, err := b.store.Elect(ctx, q, b.id, maintainerTerm)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn("electing the queue's maintainer failed", slog.String("queue", q), slog.Any("error", err))
			}
			won = false
		}
		if won && !maintainer {
			b.log.Debug("maintaining queue", slog.String("queue", q))
			forward.Reset(0)
		}
		maintainer = won
	}
	stand()
	for {
		select {
		case <-ctx.Done():
			if maintainer {
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				_ = b.store.Resign(rctx, q, b.id)
				cancel()
			}
			return
		case <-elect.C:
			stand()
		case <-forward.C:
			if maintainer {
				forward.Reset(b.forward(ctx, q))
			}
		case <-recoverTick.C:
			if maintainer {
				b.recoverExpired(ctx, q)
			}
		}
	}
}

// forward promotes due tasks of q and returns when to look again.
func (b *Broker) forward(ctx context.Context, q string) time.Duration {
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
	return wait
}

// recoverExpired returns tasks of q whose lease expired, a batch at a time.
func (b *Broker) recoverExpired(ctx context.Context, q string) {
	for {
		recovered, archived, more, err := b.store.Recover(ctx, q)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn("recovering expired leases failed", slog.String("queue", q), slog.Any("error", err))
			}
			return
		}
		for _, id := range recovered {
			b.log.Warn("recovered task whose lease expired", slog.String("task_id", id), slog.String("queue", q))
		}
		for _, id := range archived {
			b.log.Error("archived task that kept losing its worker", slog.String("task_id", id), slog.String("queue", q))
		}
		if !more {
			return
		}
	}
}

// newID returns a random id for the process's broker in elections.
func newID() string { return rand.Text() }
