package redisbroker

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// forwardBatch and recoverBatch bound the work of one script call.
const (
	forwardBatch = 1000
	recoverBatch = 100
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

// forwardLoop promotes due tasks of q. It runs the forward script every
// DelayedTasksPollPeriod, or sooner when the next task is due sooner, so a
// task becomes pending within a few milliseconds of its time.
func (b *Broker) forwardLoop(ctx context.Context, q string) {
	qk := b.keys.queue(q)
	period := time.Duration(b.cnf.Redis.DelayedTasksPollPeriod) * time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		wait := period
		res, err := forwardScript.Run(ctx, b.client, []string{qk.scheduled, qk.retry, qk.pending, qk.notify}, qk.task, forwardBatch).Int64Slice()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				b.log.Warn("promoting due tasks failed", slog.String("queue", q), slog.Any("error", err))
			}
		case res[0] >= forwardBatch:
			wait = 0 // more are due
		case res[1] >= 0:
			if until := time.Until(time.UnixMilli(res[1])); until < wait {
				wait = max(until, 0)
			}
		}
		if err == nil && b.cnf.CompletedRetention > 0 {
			b.client.ZRemRangeByScore(ctx, qk.completed, "-inf", fmt.Sprint(time.Now().UnixMilli()))
		}
		timer.Reset(wait)
	}
}

// recoverLoop returns tasks of q whose lease expired, every RecoverInterval.
func (b *Broker) recoverLoop(ctx context.Context, q string) {
	qk := b.keys.queue(q)
	ticker := time.NewTicker(b.cnf.RecoverInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		for {
			res, err := recoverScript.Run(ctx, b.client, []string{qk.lease, qk.pending, qk.archived, qk.notify},
				qk.task, recoverBatch, b.cnf.MaxRecoveries, "lease expired: the worker running the task died, hung or lost Redis").StringSlice()
			if err != nil {
				if ctx.Err() == nil {
					b.log.Warn("recovering expired leases failed", slog.String("queue", q), slog.Any("error", err))
				}
				break
			}
			archived := false
			for _, id := range res {
				if id == "|" {
					archived = true
					continue
				}
				if archived {
					b.log.Error("archived task that kept losing its worker", slog.String("task_id", id), slog.String("queue", q),
						slog.Int("max_recoveries", b.cnf.MaxRecoveries))
				} else {
					b.log.Warn("recovered task whose lease expired", slog.String("task_id", id), slog.String("queue", q))
				}
			}
			if len(res)-1 < recoverBatch {
				break
			}
		}
	}
}
