package memory

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/b6192125/machinist/v1/brokers/iface"
)

// Routing tasks to the workers that have them: a queue keeps, per task
// name, until when a worker alive has announced it (handlers), and the
// tasks rerouted to that name (rerouted), which a Fetch whose names include
// the name takes before the pending list. The recoverer puts back on
// pending the rerouted tasks of names whose announcements expired.

// Announce records that a worker with names consumes queues, for ttl.
func (b *Broker) Announce(ctx context.Context, queues []string, names *iface.TaskNames, ttl time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed("announce")
	}
	until := b.clock.Now().Add(ttl)
	for _, name := range queues {
		q := b.queueLocked(name)
		if q.handlers == nil {
			q.handlers = make(map[string]time.Time)
		}
		for _, n := range names.List() {
			if until.After(q.handlers[n]) {
				q.handlers[n] = until
			}
		}
	}
	return nil
}

// Reroute hands d's task to the workers that announced its name, or
// reports false, changing nothing, when none alive has.
func (b *Broker) Reroute(ctx context.Context, d *iface.Delivery) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed && d != nil && d.Lease != nil {
		if t := b.heldLocked(d); t != nil && !b.clock.Now().Before(b.queues[t.queue].handlers[t.sig.Name]) {
			return false, nil
		}
	}
	t, err := b.settleLocked("reroute", d)
	if err != nil {
		return false, err
	}
	q := b.queues[t.queue]
	name := t.sig.Name
	t.status = iface.StatusPending
	if q.rerouted == nil {
		q.rerouted = make(map[string]*deque)
	}
	if q.rerouted[name] == nil {
		q.rerouted[name] = &deque{}
	}
	q.rerouted[name].pushBack(t)
	b.notifyLocked()
	d.Lease.Release()
	return true, nil
}

// takeReroutedLocked hands up to max tasks of q rerouted to names to take
// (takeLocked's, which leases them).
func (b *Broker) takeReroutedLocked(q *queue, names *iface.TaskNames, max int, take func(*task) bool) {
	if names == nil || len(q.rerouted) == 0 {
		return
	}
	taken := 0
	for _, n := range names.List() {
		list := q.rerouted[n]
		for list != nil && list.len() > 0 && taken < max {
			if take(list.popFront()) {
				taken++
			}
		}
		if list != nil && list.len() == 0 {
			delete(q.rerouted, n)
		}
		if taken == max {
			return
		}
	}
}

// unrouteLocked puts back at the head of pending the rerouted tasks of
// names no worker alive has announced since now, and forgets expired
// announcements. It reports whether it moved any task.
func (b *Broker) unrouteLocked(now time.Time) bool {
	moved := false
	for _, q := range b.queues {
		for _, n := range slices.Sorted(maps.Keys(q.rerouted)) {
			if now.Before(q.handlers[n]) {
				continue
			}
			list := q.rerouted[n]
			for i := list.len() - 1; i >= 0; i-- {
				q.pending.pushFront(list.at(i))
			}
			delete(q.rerouted, n)
			moved = true
		}
		for n, until := range q.handlers {
			if !now.Before(until) {
				delete(q.handlers, n)
			}
		}
	}
	return moved
}
