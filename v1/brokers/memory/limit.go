package memory

import (
	"time"

	"github.com/b6192125/machinist/v1/brokers/iface"
)

// statusLimited is the status of a task parked on its limit key
// (tasks.Limit) until a slot frees.
const statusLimited = iface.StatusLimited

// limitState is what a queue holds for one limit key.
type limitState struct {
	run  map[string]*task // the tasks holding a concurrency slot
	wait deque            // the tasks parked, in the order they came
	tat  time.Time        // the rate's theoretical arrival time (GCRA)
}

// limitLocked returns the state of limit key k of q, made when missing.
func (q *queue) limitLocked(k string) *limitState {
	if q.limits == nil {
		q.limits = make(map[string]*limitState)
	}
	ls := q.limits[k]
	if ls == nil {
		ls = &limitState{run: make(map[string]*task)}
		q.limits[k] = ls
	}
	return ls
}

// admitLocked decides whether t, a task of q about to be leased at now,
// may start under its limit: when it may, it holds a concurrency slot and
// has spent the rate; when it may not, it has been put aside: parked on
// its key while the concurrency is full, or, over the rate, scheduled at
// the start it booked (t.limitSlot), which it then takes without spending
// the rate again. A task that a holder already finished (its outcome
// committed) is not limited: it only settles.
func (b *Broker) admitLocked(q *queue, t *task, now time.Time) bool {
	l := t.sig.Limit
	if l == nil || t.outcome != nil {
		return true
	}
	ls := q.limitLocked(l.Key)
	if l.Concurrency > 0 {
		live, stale := 0, 0
		for id, h := range ls.run {
			if h != t && q.active[id] == h && now.Before(h.leaseExpiresAt) {
				live++
			} else {
				delete(ls.run, id)
				stale++
			}
		}
		if live >= l.Concurrency {
			// A start booked by the rate is given up: it books again
			// when it comes back, so that starts stay a step apart.
			t.status, t.parkedAt = statusLimited, now
			t.limitSlot = time.Time{}
			ls.wait.pushBack(t)
			return false
		}
		if stale > 1 { // slots of dead holders beyond the one taken here
			b.unparkLocked(q, ls, stale-1)
		}
	}
	if l.Rate > 0 {
		// GCRA without a burst: one start every Per / Rate. A task
		// deferred earlier starts at the start it booked; taken late, it
		// pushes the next start a step past its own.
		step := l.Per / time.Duration(l.Rate)
		switch {
		case t.limitSlot.After(now): // brought back early (a debounce): it waits for its start
			b.scheduleLocked(q, t, iface.StatusScheduled, t.limitSlot)
			return false
		case !t.limitSlot.IsZero():
			t.limitSlot = time.Time{}
			if next := now.Add(step); next.After(ls.tat) {
				ls.tat = next
			}
		default:
			slot := ls.tat
			if slot.Before(now) {
				slot = now
			}
			ls.tat = slot.Add(step)
			if slot.After(now) {
				t.limitSlot = slot
				b.scheduleLocked(q, t, iface.StatusScheduled, slot)
				return false
			}
		}
	}
	if l.Concurrency > 0 {
		ls.run[t.uuid] = t
	}
	return true
}

// unparkLocked moves up to n tasks parked on ls back to the head of q's
// pending list and wakes the idle workers.
func (b *Broker) unparkLocked(q *queue, ls *limitState, n int) {
	var back []*task
	for ; n > 0 && ls.wait.len() > 0; n-- {
		t := ls.wait.popFront()
		t.status = iface.StatusPending
		back = append(back, t)
	}
	// Backwards, so that they keep the order they were parked in.
	for i := len(back) - 1; i >= 0; i-- {
		q.pending.pushFront(back[i])
	}
	if len(back) > 0 {
		b.notifyLocked()
	}
}

// releaseLocked frees the concurrency slot t, a task of q that stops
// running, may hold, and lets one parked task of its key try again.
func (b *Broker) releaseLocked(q *queue, t *task) {
	l := t.sig.Limit
	if l == nil || l.Concurrency == 0 || q.limits[l.Key] == nil {
		return
	}
	ls := q.limits[l.Key]
	delete(ls.run, t.uuid)
	b.unparkLocked(q, ls, 1)
}

// sweepLimitsLocked forgets the limit keys of q that hold nothing: no
// holder, none parked, and a rate whose next start has come.
func (q *queue) sweepLimitsLocked(now time.Time) {
	for k, ls := range q.limits {
		if len(ls.run) == 0 && ls.wait.len() == 0 && !ls.tat.After(now) {
			delete(q.limits, k)
		}
	}
}

// passLocked lets one task parked on the key of t, a task of q that waits
// and leaves for good (deleted, archived, cancelled), try again: a
// holder's end may have unparked t for the slot it freed. One that finds
// the key full is parked again.
func (b *Broker) passLocked(q *queue, t *task) {
	if l := t.sig.Limit; l != nil && l.Concurrency > 0 && q.limits[l.Key] != nil {
		b.unparkLocked(q, q.limits[l.Key], 1)
	}
}

// unparkTaskLocked takes t, parked on its limit key, out of the key's
// wait list.
func (q *queue) unparkTaskLocked(t *task) {
	if ls := q.limits[t.sig.Limit.Key]; ls != nil {
		ls.wait.remove(t)
	}
}

// unleaseLocked ends the lease of t, an active task of q: it is no longer
// active, and its concurrency slot is freed.
func (b *Broker) unleaseLocked(q *queue, t *task) {
	delete(b.leases, t.token)
	delete(q.active, t.uuid)
	t.token, t.leaseExpiresAt = "", time.Time{}
	b.releaseLocked(q, t)
}
