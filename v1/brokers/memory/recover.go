package memory

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/b6192125/machinist/v1/brokers/iface"
)

// recovery is what recoverExpired did with one task, for the log.
type recovery struct {
	uuid, queue string
	recovered   int
	archived    string // the archive reason, when archived
}

// recoverExpired handles every active task whose lease ended at or before
// now. A task that may still be recovered goes to the head of its pending
// list with Recovered+1: losing a worker is not a failure of the task, and
// it is the oldest work in the queue. A task that kills its workers is
// stopped by MaxRecoveries: one recovered that many times is archived.
func (b *Broker) recoverExpired(now time.Time) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	for id, bar := range b.barred {
		if !now.Before(bar.until) {
			delete(b.barred, id)
		}
	}
	for _, q := range b.queues {
		q.sweepLimitsLocked(now)
	}
	var expired []*task
	for _, t := range b.leases {
		if !now.Before(t.leaseExpiresAt) {
			expired = append(expired, t)
		}
	}
	slices.SortFunc(expired, func(x, y *task) int {
		return cmp.Or(x.leaseExpiresAt.Compare(y.leaseExpiresAt), cmp.Compare(x.seq, y.seq))
	})
	done := make([]recovery, 0, len(expired))
	woken := false
	for _, t := range expired {
		q := b.queues[t.queue]
		b.unleaseLocked(q, t)
		if b.maxRecoveries >= 0 && t.recovered >= b.maxRecoveries {
			reason := fmt.Sprintf("lease expired %d times: a task whose worker keeps losing its lease is archived after MaxRecoveries (%d) recoveries",
				t.recovered+1, b.maxRecoveries)
			t.recovered++ // this lease's end counts, as on Redis
			b.archiveLocked(t, reason, now)
			done = append(done, recovery{uuid: t.uuid, queue: q.name, recovered: t.recovered, archived: reason})
			continue
		}
		t.recovered++
		t.status = iface.StatusPending
		q.pending.pushFront(t) // the oldest work in the queue
		woken = true
		done = append(done, recovery{uuid: t.uuid, queue: q.name, recovered: t.recovered})
	}
	if b.unrouteLocked(now) {
		woken = true
	}
	stranded := b.strandLocked(now)
	if stranded > 0 {
		woken = true
	}
	if woken {
		b.notifyLocked()
	}
	for key, until := range b.claims {
		if !now.Before(until) {
			delete(b.claims, key)
		}
	}
	for key, h := range b.uniques {
		if !now.Before(h.until) {
			delete(b.uniques, key)
		}
	}
	for _, q := range b.queues {
		b.trimArchiveLocked(q, now)
	}
	b.mu.Unlock()

	for _, r := range done {
		if r.archived != "" {
			b.metrics.Archived(context.Background(), r.queue, "", 1)
		} else {
			b.metrics.Recovered(context.Background(), r.queue, 1)
		}
	}
	if stranded > 0 {
		b.logger.Warn("memory broker: sent aggregation members to pending: no worker alive aggregates their task any more",
			slog.Int("members", stranded))
	}
	for _, r := range done {
		if r.archived != "" {
			b.logger.Error("memory broker: task lease expired too often; archived",
				slog.String("task_id", r.uuid), slog.String("queue", r.queue),
				slog.Int("recovered", r.recovered), slog.String("reason", r.archived))
			continue
		}
		b.logger.Warn("memory broker: task lease expired; returned to pending",
			slog.String("task_id", r.uuid), slog.String("queue", r.queue),
			slog.Int("recovered", r.recovered))
	}
}
