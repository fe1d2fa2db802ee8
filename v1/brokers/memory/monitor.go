package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/b6192125/machinist/v1/brokers/iface"
)

var (
	_ iface.Monitor   = (*Broker)(nil)
	_ iface.Inspector = (*Broker)(nil)
)

// Heartbeat records w alive until ttl from now and adds counts to their
// queues' statistics; see iface.Monitor.
func (b *Broker) Heartbeat(ctx context.Context, w *iface.WorkerInfo, ttl time.Duration, counts ...iface.StatCount) error {
	if w == nil || w.ID == "" {
		return fmt.Errorf("memory broker: heartbeat: the worker has no ID")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed("heartbeat")
	}
	now := b.clock.Now()
	b.forgetGoneLocked(now)
	cp := w.Clone()
	cp.Seen, cp.Expires = now, now.Add(ttl)
	if b.workers == nil {
		b.workers = make(map[string]*iface.WorkerInfo)
	}
	b.workers[w.ID] = cp
	oldest := iface.StatsOldest(now)
	for _, c := range counts {
		at := c.At.Truncate(iface.StatsPeriod)
		if c.Queue == "" || at.Before(oldest) || (c.Processed == 0 && c.Failed == 0) {
			continue
		}
		if b.stats == nil {
			b.stats = make(map[string]map[int64]*iface.StatCount)
		}
		periods := b.stats[c.Queue]
		if periods == nil {
			periods = make(map[int64]*iface.StatCount)
			b.stats[c.Queue] = periods
		}
		p := periods[at.Unix()]
		if p == nil {
			p = &iface.StatCount{Queue: c.Queue, At: at}
			periods[at.Unix()] = p
		}
		p.Processed += c.Processed
		p.Failed += c.Failed
	}
	return nil
}

// forgetGoneLocked drops the workers whose heartbeat ran out and the
// counts older than the StatsWindow.
func (b *Broker) forgetGoneLocked(now time.Time) {
	for id, w := range b.workers {
		if !now.Before(w.Expires) {
			delete(b.workers, id)
		}
	}
	oldest := iface.StatsOldest(now).Unix()
	for q, periods := range b.stats {
		for at := range periods {
			if at < oldest {
				delete(periods, at)
			}
		}
		if len(periods) == 0 {
			delete(b.stats, q)
		}
	}
}

// Unregister forgets the worker id.
func (b *Broker) Unregister(ctx context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed("unregister")
	}
	delete(b.workers, id)
	return nil
}

// Workers lists the workers alive, by host, process id and start.
func (b *Broker) Workers(ctx context.Context) ([]*iface.WorkerInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed("workers")
	}
	b.forgetGoneLocked(b.clock.Now())
	out := make([]*iface.WorkerInfo, 0, len(b.workers))
	for _, w := range b.workers {
		out = append(out, w.Clone())
	}
	iface.SortWorkers(out)
	return out, nil
}

// QueueStats returns the counts of queue over the last StatsWindow.
func (b *Broker) QueueStats(ctx context.Context, queue string) (*iface.QueueStats, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked("queue stats", queue); err != nil {
		return nil, err
	}
	now := b.clock.Now()
	b.forgetGoneLocked(now)
	out := &iface.QueueStats{Queue: queue}
	periods := b.stats[queue]
	for _, at := range iface.StatsPeriods(now) {
		c := iface.StatCount{Queue: queue, At: at}
		if p := periods[at.Unix()]; p != nil {
			c.Processed, c.Failed = p.Processed, p.Failed
		}
		out.Periods = append(out.Periods, c)
	}
	return out, nil
}
