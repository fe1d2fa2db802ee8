package memory

import (
	"cmp"
	"container/heap"
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// Aggregation (iface.Aggregator). A queue keeps, per task name that a
// worker aggregates, an aggregation: until when a worker alive announced the
// name, the policy last announced, the groups of members waiting by key,
// and the batches taken from them and not yet completed or archived. Two
// heaps per name index what ClaimBatch looks for: the groups that have a
// due time, and the batches, by when they may be taken again (a leased
// batch when its lease ends, a retried one at its retry time). ClaimBatch
// looks at the top of each heap of the names it is given, never at every
// group.
//
// Members are held (b.held) from Publish until their batch is completed or
// archived, so their UUIDs are refused as duplicates meanwhile; they are in
// no pending list, so Fetch never takes them.

var _ iface.Aggregator = (*Broker)(nil)

// statusAggregating is the status of a member waiting in a group or taken
// in a batch: GetTask reports it; ListTasks lists members only archived
// (Aggregations lists the groups).
const statusAggregating = iface.StatusAggregating

// aggregation is what a queue holds for one task name it aggregates.
type aggregation struct {
	name   string
	until  time.Time // a worker alive announced the name until then
	policy iface.AggregationPolicy
	groups map[string]*group // by key, each with members waiting
	due    dueHeap[*group]   // the groups that have a due time
	// batches holds the batches not completed or archived, by ID;
	// waiting the same, by when they may be taken again.
	batches map[string]*batch
	waiting dueHeap[*batch]
	size    int // members waiting in groups or taken in batches
}

// group is the members waiting with one key, oldest first.
type group struct {
	dueEntry // when the group is due by the policy
	key      string
	members  []member
}

// member is a task waiting in a group, with when it joined.
type member struct {
	t      *task
	joined time.Time
}

// batch is members taken together. It is leased while token is set (at is
// when the lease ends), and waits for a retry at at otherwise.
type batch struct {
	dueEntry
	id, key   string
	members   []*task
	token     string
	failed    int
	recovered int
}

// AnnounceAggregators records that a worker alive aggregates, until ttl
// from now, each name of policies on queues, with its policy: the last
// announced decides when the name's groups are due.
func (b *Broker) AnnounceAggregators(ctx context.Context, queues []string, policies map[string]iface.AggregationPolicy, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if slices.Contains(queues, "") {
		return fmt.Errorf("memory broker: announce aggregators: empty queue name: %w", iface.ErrNoQueue)
	}
	for name, p := range policies {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("memory broker: announce aggregators: task %q: %w", name, err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed("announce aggregators")
	}
	until := b.clock.Now().Add(ttl)
	for _, name := range queues {
		q := b.queueLocked(name)
		for n, p := range policies {
			a := q.aggregationLocked(n)
			if until.After(a.until) {
				a.until = until
			}
			if a.policy != p {
				a.policy = p
				for _, g := range a.groups {
					a.reschedule(g)
				}
			}
		}
	}
	return nil
}

// aggregatedLocked reports whether a worker alive aggregates sig's name on
// its queue at now.
func (b *Broker) aggregatedLocked(sig *tasks.Signature, now time.Time) bool {
	q := b.queues[sig.RoutingKey]
	if q == nil {
		return false
	}
	a := q.aggregations[sig.Name]
	return a != nil && now.Before(a.until)
}

// joinLocked adds t, a member not in any place of q, to its group: as the
// newest member, or, when it joined before (requeued from the archive), in
// its first place.
func (b *Broker) joinLocked(q *queue, t *task, now time.Time) {
	a := q.aggregationLocked(t.sig.Name)
	key := t.sig.AggregationKey
	g := a.groups[key]
	if g == nil {
		g = &group{dueEntry: dueEntry{seq: b.nextSeqLocked(), index: -1}, key: key}
		a.groups[key] = g
	}
	t.status, t.nextAt, t.timer = statusAggregating, time.Time{}, nil
	// A member that joins again (requeued from the archive) keeps its
	// first join time, and its place among the members.
	joined := now
	if !t.joined.IsZero() {
		joined = t.joined
	}
	t.joined = joined
	i := sort.Search(len(g.members), func(i int) bool { return g.members[i].joined.After(joined) })
	g.members = slices.Insert(g.members, i, member{t: t, joined: joined})
	a.size++
	a.reschedule(g)
	if g.index >= 0 && !g.at.After(now) {
		b.wakeAggregatorsLocked()
	}
}

// wakeAggregatorsLocked wakes the WaitDue calls: a group may be due.
func (b *Broker) wakeAggregatorsLocked() {
	if b.aggWake != nil {
		close(b.aggWake)
		b.aggWake = nil
	}
}

// WaitDue waits until a group or batch of queues with a name in names may
// be due (a member filled a group, or a due time came), or max has passed,
// or ctx ends (its error).
func (b *Broker) WaitDue(ctx context.Context, queues []string, names *iface.TaskNames, max time.Duration) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errClosed("wait due")
	}
	// A group or batch due by then ends the wait: at once when it is
	// already.
	if next := b.nextDueLocked(queues, names); !next.IsZero() {
		max = min(max, b.clock.Until(next))
	}
	if max <= 0 {
		b.mu.Unlock()
		return nil
	}
	if b.aggWake == nil {
		b.aggWake = make(chan struct{})
	}
	wake := b.aggWake
	b.mu.Unlock()
	timer := b.clock.NewTimer(max)
	defer timer.Stop()
	select {
	case <-wake:
	case <-timer.C():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// ClaimBatch takes one batch of queues (in the order given, skipping paused
// queues) whose task name is in names, under a fresh lease: in each queue, a
// batch whose lease ended or whose retry is due first, else the oldest
// members of a due group. A nil names takes nothing. It returns nil, nil
// when nothing is due.
func (b *Broker) ClaimBatch(ctx context.Context, queues []string, names *iface.TaskNames) (*iface.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed("claim batch")
	}
	if names == nil {
		return nil, nil
	}
	now := b.clock.Now()
	for _, name := range queues {
		q := b.queues[name]
		if q == nil || q.paused || len(q.aggregations) == 0 {
			continue
		}
		if a, bt := firstDue(q, names, now, batchesOf); bt != nil {
			if bt.token != "" {
				bt.recovered++ // its lease ended unsettled
			}
			return b.leaseBatchLocked(q, a, bt, now), nil
		}
		if a, g := firstDue(q, names, now, groupsOf); g != nil {
			return b.leaseBatchLocked(q, a, b.takeGroupLocked(a, g), now), nil
		}
	}
	return nil, nil
}

func batchesOf(a *aggregation) *dueHeap[*batch] { return &a.waiting }
func groupsOf(a *aggregation) *dueHeap[*group]  { return &a.due }

// firstDue returns the earliest entry due at now of the heaps (of) of q's
// aggregations of names, with its aggregation, or nils.
func firstDue[T dueItem](q *queue, names *iface.TaskNames, now time.Time, of func(*aggregation) *dueHeap[T]) (*aggregation, T) {
	var (
		best  *aggregation
		first T
	)
	for _, n := range names.List() {
		a := q.aggregations[n]
		if a == nil {
			continue
		}
		top, ok := of(a).peek()
		if !ok || now.Before(top.entry().at) {
			continue
		}
		if best == nil || top.entry().less(first.entry()) {
			best, first = a, top
		}
	}
	return best, first
}

// takeGroupLocked makes a batch of the oldest members of g, a due group of
// a (at most MaxSize; all when it is 0), and reschedules what remains.
func (b *Broker) takeGroupLocked(a *aggregation, g *group) *batch {
	n := len(g.members)
	if a.policy.MaxSize > 0 {
		n = min(n, a.policy.MaxSize)
	}
	bt := &batch{
		dueEntry: dueEntry{seq: b.nextSeqLocked(), index: -1},
		id:       "batch_" + rand.Text(),
		key:      g.key,
		members:  make([]*task, n),
	}
	for i, m := range g.members[:n] {
		bt.members[i] = m.t
	}
	clear(g.members[:n])
	g.members = g.members[n:]
	if len(g.members) == 0 {
		delete(a.groups, g.key)
		a.due.remove(g)
	} else {
		a.reschedule(g)
	}
	a.batches[bt.id] = bt
	return bt
}

// leaseBatchLocked leases bt, a batch of a in q, until LeaseDuration from
// now and describes it for its new holder.
func (b *Broker) leaseBatchLocked(q *queue, a *aggregation, bt *batch, now time.Time) *iface.Batch {
	bt.token = rand.Text()
	bt.at = now.Add(b.leaseDuration)
	a.waiting.set(bt)
	members := make([]*tasks.Signature, len(bt.members))
	for i, t := range bt.members {
		members[i] = tasks.CopySignature(t.sig)
	}
	return &iface.Batch{
		ID:        bt.id,
		Queue:     q.name,
		Name:      a.name,
		Key:       bt.key,
		Members:   members,
		Lease:     iface.NewLeaseOn(b.clock, bt.token, bt.at),
		Failed:    bt.failed,
		Recovered: bt.recovered,
	}
}

// heldBatchLocked returns the batch whose lease ib holds, with its
// aggregation, or an error wrapping ErrLeaseLost after marking ib's lease
// lost. Like heldLocked, a lease whose time has passed is not held even if
// no ClaimBatch has taken the batch again yet.
func (b *Broker) heldBatchLocked(op string, ib *iface.Batch) (*aggregation, *batch, error) {
	if b.closed {
		return nil, nil, errClosed(op)
	}
	if ib == nil || ib.Lease == nil {
		return nil, nil, fmt.Errorf("memory broker: %s: batch without a lease", op)
	}
	if q := b.queues[ib.Queue]; q != nil {
		if a := q.aggregations[ib.Name]; a != nil {
			bt := a.batches[ib.ID]
			if bt != nil && bt.token != "" && bt.token == ib.Lease.Token() && b.clock.Now().Before(bt.at) {
				return a, bt, nil
			}
		}
	}
	ib.Lease.Lose()
	return nil, nil, fmt.Errorf("memory broker: %s batch %s: %w", op, ib.ID, iface.ErrLeaseLost)
}

// ExtendBatch renews ib's lease for LeaseDuration from now, only while ib
// holds it.
func (b *Broker) ExtendBatch(ctx context.Context, ib *iface.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a, bt, err := b.heldBatchLocked("extend batch", ib)
	if err != nil {
		return err
	}
	at := b.clock.Now().Add(b.leaseDuration)
	if !ib.Lease.Extend(at) {
		return fmt.Errorf("memory broker: extend batch %s: %w", ib.ID, iface.ErrLeaseLost)
	}
	bt.at = at
	a.waiting.set(bt)
	return nil
}

// forgetBatch removes bt from a; its members stay where the caller
// puts them.
func forgetBatch(a *aggregation, bt *batch) {
	delete(a.batches, bt.id)
	a.waiting.remove(bt)
	a.size -= len(bt.members)
}

// CompleteBatch publishes aggregate as Publish would and forgets the
// members of ib, in one step under the broker's lock, only while ib holds
// its batch's lease. When aggregate cannot be published nothing changes
// and the lease is still held.
func (b *Broker) CompleteBatch(ctx context.Context, ib *iface.Batch, aggregate *tasks.Signature) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a, bt, err := b.heldBatchLocked("complete batch", ib)
	if err != nil {
		return err
	}
	sigs := []*tasks.Signature{aggregate}
	if err := b.checkPublishLocked(sigs, b.clock.Now()); err != nil {
		return err
	}
	forgetBatch(a, bt)
	for _, t := range bt.members {
		delete(b.held, t.uuid)
	}
	b.publishLocked(sigs)
	ib.Lease.Release()
	return nil
}

// RetryBatch gives ib's batch back, whole, to be taken again from at (at
// once when at is not in the future), counting a failure; only while ib
// holds its lease.
func (b *Broker) RetryBatch(ctx context.Context, ib *iface.Batch, at time.Time, errMsg string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a, bt, err := b.heldBatchLocked("retry batch", ib)
	if err != nil {
		return err
	}
	bt.token, bt.at = "", at
	bt.failed++
	a.waiting.set(bt)
	now := b.clock.Now()
	for _, t := range bt.members {
		t.lastError, t.lastFailedAt = errMsg, now
	}
	ib.Lease.Release()
	return nil
}

// ArchiveBatch archives each member of ib's batch with reason, as dead
// letters of its queue (RequeueArchived puts them back in their group);
// only while ib holds its lease.
func (b *Broker) ArchiveBatch(ctx context.Context, ib *iface.Batch, reason string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	a, bt, err := b.heldBatchLocked("archive batch", ib)
	if err != nil {
		return err
	}
	forgetBatch(a, bt)
	now := b.clock.Now()
	for _, t := range bt.members {
		b.archiveLocked(t, reason, now)
	}
	ib.Lease.Release()
	return nil
}

// NextDue returns the earliest time a group or batch of queues whose name
// is in names is due: a group by its policy, a retried batch at its retry
// time, a leased batch when its lease ends (it is taken again then unless
// completed). The zero time when none is, or names is nil.
func (b *Broker) NextDue(ctx context.Context, queues []string, names *iface.TaskNames) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return time.Time{}, errClosed("next due")
	}
	return b.nextDueLocked(queues, names), nil
}

// nextDueLocked is NextDue's answer; b.mu is held.
func (b *Broker) nextDueLocked(queues []string, names *iface.TaskNames) time.Time {
	var next time.Time
	if names == nil {
		return next
	}
	earlier := func(e *dueEntry) {
		if next.IsZero() || e.at.Before(next) {
			next = e.at
		}
	}
	for _, name := range queues {
		q := b.queues[name]
		if q == nil || q.paused {
			continue
		}
		for _, n := range names.List() {
			a := q.aggregations[n]
			if a == nil {
				continue
			}
			if g, ok := a.due.peek(); ok {
				earlier(&g.dueEntry)
			}
			if bt, ok := a.waiting.peek(); ok {
				earlier(&bt.dueEntry)
			}
		}
	}
	return next
}

// Aggregations lists queue's groups with members waiting, by name then
// key.
func (b *Broker) Aggregations(ctx context.Context, queue string) ([]*iface.AggregationInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.checkLocked("aggregations", queue); err != nil {
		return nil, err
	}
	out := []*iface.AggregationInfo{}
	q := b.queues[queue]
	if q == nil {
		return out, nil
	}
	for _, n := range slices.Sorted(maps.Keys(q.aggregations)) {
		a := q.aggregations[n]
		for _, k := range slices.Sorted(maps.Keys(a.groups)) {
			g := a.groups[k]
			info := &iface.AggregationInfo{
				Queue:  queue,
				Name:   n,
				Key:    k,
				Size:   len(g.members),
				Oldest: g.members[0].joined,
				Newest: g.members[len(g.members)-1].joined,
			}
			if g.index >= 0 {
				info.Due = g.at
			}
			out = append(out, info)
		}
	}
	return out, nil
}

// strandLocked sends to pending, as plain tasks, the members of every task
// name that no worker alive aggregates any more on its queue (its
// announcement ended before now): those of its due groups, and of its
// batches whose lease ended or whose retry came; paused queues wait. A
// worker fails them or tries them again, which puts them back in their
// group as its newest members. It returns how many it sent.
func (b *Broker) strandLocked(now time.Time) int {
	n := 0
	strand := func(q *queue, members []*task) {
		for _, t := range members {
			t.status, t.joined = iface.StatusPending, time.Time{}
			q.pending.pushBack(t)
		}
		n += len(members)
	}
	for _, qn := range slices.Sorted(maps.Keys(b.queues)) {
		q := b.queues[qn]
		if q.paused {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(q.aggregations)) {
			a := q.aggregations[name]
			if now.Before(a.until) {
				continue
			}
			for bt, ok := a.waiting.peek(); ok && !bt.at.After(now); bt, ok = a.waiting.peek() {
				forgetBatch(a, bt)
				strand(q, bt.members)
			}
			for g, ok := a.due.peek(); ok && !g.at.After(now); g, ok = a.due.peek() {
				members := make([]*task, len(g.members))
				for i, m := range g.members {
					members[i] = m.t
				}
				delete(a.groups, g.key)
				a.due.remove(g)
				a.size -= len(members)
				strand(q, members)
			}
		}
	}
	return n
}

// aggregationLocked returns q's aggregation of the task name, creating it.
func (q *queue) aggregationLocked(name string) *aggregation {
	a := q.aggregations[name]
	if a == nil {
		if q.aggregations == nil {
			q.aggregations = make(map[string]*aggregation)
		}
		a = &aggregation{name: name, groups: make(map[string]*group), batches: make(map[string]*batch)}
		q.aggregations[name] = a
	}
	return a
}

// aggregating counts q's members waiting in groups or taken in batches.
func (q *queue) aggregating() int {
	n := 0
	for _, a := range q.aggregations {
		n += a.size
	}
	return n
}

// reschedule puts g, which has members, in a's due heap at the time its
// policy makes it due, or out of it when the policy never does.
func (a *aggregation) reschedule(g *group) {
	if at, ok := policyDueAt(a.policy, g.members); ok {
		g.at = at
		a.due.set(g)
	} else {
		a.due.remove(g)
	}
}

// policyDueAt returns when a group of members (oldest first, at least one) is due
// by the policy p: the earliest of when it held MaxSize members, its oldest
// joined plus MaxDelay and its newest joined plus GracePeriod, of those
// that apply. It reports false when none does.
func policyDueAt(p iface.AggregationPolicy, members []member) (time.Time, bool) {
	var full time.Time
	if p.MaxSize > 0 && len(members) >= p.MaxSize {
		full = members[p.MaxSize-1].joined
	}
	at := p.DueAt(full, members[0].joined, members[len(members)-1].joined)
	return at, !at.IsZero()
}

// dueEntry places a group or a batch in a heap by when it is due; seq
// orders entries due at the same time.
type dueEntry struct {
	at    time.Time
	seq   uint64
	index int // in its heap; -1 when in none
}

func (e *dueEntry) entry() *dueEntry { return e }

func (e *dueEntry) less(o *dueEntry) bool {
	return cmp.Or(e.at.Compare(o.at), cmp.Compare(e.seq, o.seq)) < 0
}

// dueItem is what a dueHeap holds: a *group or a *batch.
type dueItem interface{ entry() *dueEntry }

// dueHeap is a min-heap of items by due time (container/heap's
// interface; use set, remove and peek).
type dueHeap[T dueItem] []T

func (h dueHeap[T]) Len() int           { return len(h) }
func (h dueHeap[T]) Less(i, j int) bool { return h[i].entry().less(h[j].entry()) }
func (h dueHeap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].entry().index = i
	h[j].entry().index = j
}

func (h *dueHeap[T]) Push(x any) {
	it := x.(T)
	it.entry().index = len(*h)
	*h = append(*h, it)
}

func (h *dueHeap[T]) Pop() any {
	old := *h
	it := old[len(old)-1]
	var zero T
	old[len(old)-1] = zero
	*h = old[:len(old)-1]
	it.entry().index = -1
	return it
}

// set puts it in h, or moves it to its place after its time changed.
func (h *dueHeap[T]) set(it T) {
	if i := it.entry().index; i >= 0 {
		heap.Fix(h, i)
	} else {
		heap.Push(h, it)
	}
}

// remove takes it out of h, if it is there.
func (h *dueHeap[T]) remove(it T) {
	if i := it.entry().index; i >= 0 {
		heap.Remove(h, i)
	}
}

// peek returns the earliest item of h.
func (h dueHeap[T]) peek() (T, bool) {
	if len(h) == 0 {
		var zero T
		return zero, false
	}
	return h[0], true
}
