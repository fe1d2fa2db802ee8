package memory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// Queues lists, sorted, the queues that hold or held tasks or were paused.
func (b *Broker) Queues(ctx context.Context) ([]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed("queues")
	}
	return slices.Sorted(maps.Keys(b.queues)), nil
}

// QueueInfo returns the sizes of queue; a queue the broker never saw has
// every size zero.
func (b *Broker) QueueInfo(ctx context.Context, queue string) (*iface.QueueInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked("queue info", queue); err != nil {
		return nil, err
	}
	info := &iface.QueueInfo{Queue: queue}
	q := b.queues[queue]
	if q == nil {
		return info, nil
	}
	b.trimArchiveLocked(q, b.clock.Now())
	info.Paused = q.paused
	info.Pending = q.pending.len()
	for _, list := range q.rerouted {
		info.Pending += list.len()
	}
	info.Active = len(q.active)
	info.Scheduled = len(q.scheduled)
	info.Retry = len(q.retry)
	info.Archived = len(q.archived)
	info.Aggregating = q.aggregating()
	for _, ls := range q.limits {
		info.Limited += ls.wait.len()
	}
	return info, nil
}

// ListTasks lists up to limit tasks (all when limit < 1) of queue with
// status, skipping the first offset: pending ones in the order Fetch takes
// them, scheduled and retrying ones by NextProcessAt, archived ones newest
// first, active ones by lease expiry.
func (b *Broker) ListTasks(ctx context.Context, queue string, status iface.TaskStatus, offset, limit int) ([]*iface.TaskInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked("list tasks", queue); err != nil {
		return nil, err
	}
	q := b.queues[queue]
	if q == nil {
		switch status {
		case iface.StatusPending, iface.StatusActive, iface.StatusScheduled, iface.StatusRetry, iface.StatusArchived, iface.StatusLimited:
			return []*iface.TaskInfo{}, nil
		}
		return nil, fmt.Errorf("memory broker: list tasks: unknown status %q", status)
	}
	var list []*task
	switch status {
	case iface.StatusPending:
		list = q.pendingTasks()
	case iface.StatusScheduled:
		list = byNextAt(q.scheduled)
	case iface.StatusRetry:
		list = byNextAt(q.retry)
	case iface.StatusActive:
		list = slices.SortedFunc(maps.Values(q.active), func(x, y *task) int {
			return cmp.Or(x.leaseExpiresAt.Compare(y.leaseExpiresAt), cmp.Compare(x.seq, y.seq))
		})
	case iface.StatusArchived:
		b.trimArchiveLocked(q, b.clock.Now())
		list = slices.Clone(q.archived)
		slices.Reverse(list)
	case iface.StatusLimited:
		for _, ls := range q.limits {
			for i := range ls.wait.len() {
				list = append(list, ls.wait.at(i))
			}
		}
		slices.SortFunc(list, func(x, y *task) int {
			return cmp.Or(x.parkedAt.Compare(y.parkedAt), cmp.Compare(x.seq, y.seq))
		})
	default:
		return nil, fmt.Errorf("memory broker: list tasks: unknown status %q", status)
	}
	offset = max(offset, 0)
	if offset > len(list) {
		offset = len(list)
	}
	list = list[offset:]
	if limit > 0 && limit < len(list) {
		list = list[:limit]
	}
	out := make([]*iface.TaskInfo, len(list))
	for i, t := range list {
		out[i] = t.info()
	}
	return out, nil
}

// RequeueArchived moves the archived tasks of queue with the given UUIDs
// (all when none are given) to the tail of its pending list, oldest dead
// letter first; an aggregation member joins its group again instead, in
// the place of its first join. Their counts and LastError stay as they
// were.
func (b *Broker) RequeueArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked("requeue archived", queue); err != nil {
		return 0, err
	}
	q := b.queues[queue]
	if q == nil {
		return 0, nil
	}
	moved := b.takeArchivedLocked(q, uuids)
	now := b.clock.Now()
	for _, t := range moved {
		t.archivedAt = time.Time{}
		b.held[t.uuid] = t
		if t.sig.AggregationKey != "" {
			b.joinLocked(q, t, now)
			continue
		}
		t.status = iface.StatusPending
		q.pending.pushBack(t)
	}
	if len(moved) > 0 {
		b.notifyLocked()
	}
	return len(moved), nil
}

// DeleteArchived deletes the archived tasks of queue with the given UUIDs
// (all when none are given).
func (b *Broker) DeleteArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked("delete archived", queue); err != nil {
		return 0, err
	}
	q := b.queues[queue]
	if q == nil {
		return 0, nil
	}
	return len(b.takeArchivedLocked(q, uuids)), nil
}

// takeArchivedLocked removes from q's archive the tasks with uuids (all when
// none are given) and returns them, oldest first.
func (b *Broker) takeArchivedLocked(q *queue, uuids []string) []*task {
	b.trimArchiveLocked(q, b.clock.Now())
	var taken []*task
	if len(uuids) == 0 {
		taken, q.archived = q.archived, nil
	} else {
		want := make(map[string]bool, len(uuids))
		for _, id := range uuids {
			want[id] = true
		}
		kept := q.archived[:0]
		for _, t := range q.archived {
			if want[t.uuid] {
				taken = append(taken, t)
			} else {
				kept = append(kept, t)
			}
		}
		clear(q.archived[len(kept):])
		q.archived = kept
	}
	for _, t := range taken {
		delete(b.dead, t.uuid)
	}
	return taken
}

// PauseQueue stops Fetch from taking tasks of queue until ResumeQueue.
func (b *Broker) PauseQueue(ctx context.Context, queue string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked("pause queue", queue); err != nil {
		return err
	}
	b.queueLocked(queue).paused = true
	return nil
}

// ResumeQueue lets Fetch take tasks of queue again, and wakes blocked Fetch
// calls.
func (b *Broker) ResumeQueue(ctx context.Context, queue string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked("resume queue", queue); err != nil {
		return err
	}
	q := b.queueLocked(queue)
	if q.paused {
		q.paused = false
		b.notifyLocked()
		b.wakeAggregatorsLocked() // its batches may be due
	}
	return nil
}

// GetPendingTasks returns copies of the pending tasks of queue (the
// default queue when empty), in the order Fetch takes them.
func (b *Broker) GetPendingTasks(queue string) ([]*tasks.Signature, error) {
	if queue == "" {
		queue = b.defaultQueue
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed("get pending tasks")
	}
	out := []*tasks.Signature{}
	if q := b.queues[queue]; q != nil {
		for _, t := range q.pendingTasks() {
			out = append(out, tasks.CopySignature(t.sig))
		}
	}
	return out, nil
}

// GetDelayedTasks returns copies of the scheduled and retrying tasks of
// every queue, soonest first.
func (b *Broker) GetDelayedTasks() ([]*tasks.Signature, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed("get delayed tasks")
	}
	var all []*task
	for _, q := range b.queues {
		all = slices.AppendSeq(all, maps.Values(q.scheduled))
		all = slices.AppendSeq(all, maps.Values(q.retry))
	}
	slices.SortFunc(all, compareNextAt)
	out := make([]*tasks.Signature, len(all))
	for i, t := range all {
		out[i] = tasks.CopySignature(t.sig)
	}
	return out, nil
}

// checkLocked returns the error of an inspection of queue on this broker.
func (b *Broker) checkLocked(op, queue string) error {
	if b.closed {
		return errClosed(op)
	}
	if queue == "" {
		return fmt.Errorf("memory broker: %s: %w", op, iface.ErrNoQueue)
	}
	return nil
}

// pendingTasks returns q's pending tasks: the pending list in the order
// Fetch takes it, then the tasks rerouted to the workers that have them,
// by name.
func (q *queue) pendingTasks() []*task {
	out := make([]*task, q.pending.len())
	for i := range out {
		out[i] = q.pending.at(i)
	}
	// Then the tasks rerouted to the workers that have them, by name.
	for _, n := range slices.Sorted(maps.Keys(q.rerouted)) {
		list := q.rerouted[n]
		for i := range list.len() {
			out = append(out, list.at(i))
		}
	}
	return out
}

// byNextAt returns the tasks of set, soonest first.
func byNextAt(set map[string]*task) []*task {
	return slices.SortedFunc(maps.Values(set), compareNextAt)
}

func compareNextAt(x, y *task) int {
	return cmp.Or(x.nextAt.Compare(y.nextAt), cmp.Compare(x.seq, y.seq))
}

// GetTask describes the task uuid of queue: held (pending, scheduled,
// retrying, active, parked or aggregating) or archived.
func (b *Broker) GetTask(ctx context.Context, queue, uuid string) (*iface.TaskInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked("get task", queue); err != nil {
		return nil, err
	}
	t := b.held[uuid]
	if t == nil {
		t = b.dead[uuid]
	}
	if t == nil || t.queue != queue {
		return nil, fmt.Errorf("memory broker: get task %s of %s: %w", uuid, queue, iface.ErrTaskNotFound)
	}
	return t.info(), nil
}

// info describes t, with a copy of its signature.
func (t *task) info() *iface.TaskInfo {
	info := &iface.TaskInfo{
		Signature:     tasks.CopySignature(t.sig),
		Queue:         t.queue,
		Status:        t.status,
		NextProcessAt: t.nextAt,
		LastError:     t.lastError,
		LastFailedAt:  t.lastFailedAt,
		Retried:       t.retried,
		Recovered:     t.recovered,
	}
	if t.status == iface.StatusActive {
		info.LeaseExpiresAt = t.leaseExpiresAt
	}
	return info
}

// TakeWaiting deletes, archives or runs now a task that waits in queue
// (pending, scheduled or retrying); see iface.Inspector.TakeWaiting. A
// pending task is found in O(pending).
func (b *Broker) TakeWaiting(ctx context.Context, queue, uuid string, action iface.TakeAction, reason string) (*tasks.Signature, error) {
	if action != iface.TakeDelete && action != iface.TakeArchive && action != iface.TakeRun {
		return nil, fmt.Errorf("memory broker: task %s of %s: unknown action %q (want delete, archive or run)", uuid, queue, action)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.takeableLocked(string(action), queue, uuid)
	if err != nil {
		return nil, err
	}
	if t.status != iface.StatusPending && t.status != iface.StatusScheduled && t.status != iface.StatusRetry && t.status != statusLimited {
		return nil, fmt.Errorf("memory broker: %s task %s of %s: it is %s: %w", action, uuid, queue, t.status, iface.ErrTaskNotWaiting)
	}
	sig := tasks.CopySignature(t.sig)
	if _, err := b.takeWaitingLocked(b.queues[queue], t, action, reason, b.clock.Now()); err != nil {
		return nil, err
	}
	return sig, nil
}

// takeWaitingLocked does action with t, a task of q that waits (pending,
// scheduled, retrying, or parked on its limit key).
func (b *Broker) takeWaitingLocked(q *queue, t *task, action iface.TakeAction, reason string, now time.Time) (*task, error) {
	if action == iface.TakeRun && (t.status == iface.StatusPending || t.status == statusLimited) {
		return t, nil
	}
	switch t.status {
	case statusLimited:
		q.unparkTaskLocked(t)
	case iface.StatusPending:
		if !q.pending.remove(t) {
			for name, list := range q.rerouted {
				if list.remove(t) {
					if list.len() == 0 {
						delete(q.rerouted, name)
					}
					break
				}
			}
		}
	case iface.StatusScheduled, iface.StatusRetry:
		q.unscheduleLocked(t)
	default:
		return nil, fmt.Errorf("it is %s: %w", t.status, iface.ErrTaskNotWaiting)
	}
	t.limitSlot = time.Time{} // a start its rate booked: booked again if it runs
	if action != iface.TakeRun {
		b.passLocked(q, t)
	}
	switch action {
	case iface.TakeDelete:
		b.finishLocked(t)
	case iface.TakeArchive:
		b.archiveLocked(t, reason, now)
	default:
		if t.sig.AggregationKey != "" {
			b.joinLocked(q, t, now)
			break
		}
		t.status = iface.StatusPending
		q.pending.pushFront(t)
		b.notifyLocked()
	}
	return t, nil
}

var _ iface.Canceller = (*Broker)(nil)

// CancelTask stops the task uuid of queue with reason: a waiting task
// (pending, scheduled, retrying, or a member waiting in its group) is
// deleted; a running one loses its lease and is archived, and the
// watchers (WatchCancels) are told. With a bar, a deleted task, or one
// the queue does not hold, is kept out for bar (Broker.barred). See
// iface.Canceller.
func (b *Broker) CancelTask(ctx context.Context, queue, uuid, reason string, bar time.Duration) (*tasks.Signature, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.takeableLocked("cancel", queue, uuid)
	if bar > 0 && errors.Is(err, iface.ErrTaskNotFound) && b.held[uuid] == nil {
		b.barred[uuid] = barred{queue: queue, reason: reason, until: b.clock.Now().Add(bar)}
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	sig := tasks.CopySignature(t.sig)
	q := b.queues[queue]
	now := b.clock.Now()
	switch t.status {
	case iface.StatusActive:
		b.unleaseLocked(q, t)
		b.archiveLocked(t, reason, now)
		for _, fn := range b.watchers {
			go fn(uuid) // not under the lock: a watcher may call the broker
		}
		return sig, true, nil
	case statusAggregating:
		a := q.aggregations[t.sig.Name]
		g := a.groups[t.sig.AggregationKey]
		i := -1
		if g != nil {
			for j, m := range g.members {
				if m.t == t {
					i = j
				}
			}
		}
		if i < 0 {
			return nil, false, fmt.Errorf("memory broker: cancel task %s of %s: it is in a batch being built: %w", uuid, queue, iface.ErrTaskNotWaiting)
		}
		g.members = slices.Delete(g.members, i, i+1)
		a.size--
		if len(g.members) == 0 {
			delete(a.groups, g.key)
			a.due.remove(g)
		} else {
			a.reschedule(g)
		}
		b.finishLocked(t)
		if bar > 0 {
			b.barred[uuid] = barred{queue: queue, reason: reason, until: now.Add(bar)}
		}
		return sig, false, nil
	}
	if _, err := b.takeWaitingLocked(q, t, iface.TakeDelete, reason, now); err != nil {
		return nil, false, fmt.Errorf("memory broker: cancel task %s of %s: %w", uuid, queue, err)
	}
	if bar > 0 {
		b.barred[uuid] = barred{queue: queue, reason: reason, until: now.Add(bar)}
	}
	for _, fn := range b.watchers {
		go fn(uuid) // a worker whose lease ran out may still run it
	}
	return sig, false, nil
}

// WatchCancels calls fn with the UUID of each task cancelled,
// until ctx ends or the broker is closed.
func (b *Broker) WatchCancels(ctx context.Context, fn func(uuid string)) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errClosed("watch cancellations")
	}
	if b.watchers == nil {
		b.watchers = make(map[int]func(string))
	}
	b.watchSeq++
	id := b.watchSeq
	b.watchers[id] = fn
	b.mu.Unlock()
	fn("") // set up
	defer func() {
		b.mu.Lock()
		delete(b.watchers, id)
		b.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-b.done:
		return errClosed("watch cancellations")
	}
}

// takeableLocked returns the task uuid that queue holds, for an operator's
// action (op): ErrTaskNotFound when queue has none, ErrTaskNotWaiting when
// it is archived, or finishing (recovered after an earlier holder
// committed its outcome).
func (b *Broker) takeableLocked(op, queue, uuid string) (*task, error) {
	if err := b.checkLocked(op+" task", queue); err != nil {
		return nil, err
	}
	t := b.held[uuid]
	if t == nil || t.queue != queue {
		if bar, ok := b.barred[uuid]; ok && bar.queue == queue && b.clock.Now().Before(bar.until) {
			return nil, fmt.Errorf("memory broker: %s task %s of %s: it is cancelled: %w", op, uuid, queue, iface.ErrTaskNotWaiting)
		}
		if dead := b.dead[uuid]; dead != nil && dead.queue == queue {
			return nil, fmt.Errorf("memory broker: %s task %s of %s: it is archived: %w", op, uuid, queue, iface.ErrTaskNotWaiting)
		}
		return nil, fmt.Errorf("memory broker: %s task %s of %s: %w", op, uuid, queue, iface.ErrTaskNotFound)
	}
	if t.outcome != nil {
		return nil, fmt.Errorf("memory broker: %s task %s of %s: it is finishing (its outcome was committed): %w", op, uuid, queue, iface.ErrTaskNotWaiting)
	}
	return t, nil
}
