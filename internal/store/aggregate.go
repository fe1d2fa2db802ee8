package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// Aggregation: tasks published with an AggregationKey (members) are held
// by the broker in a group per queue, task name and key, until the group is
// due: it holds MaxSize members, or its oldest member joined MaxDelay ago,
// or its newest member joined GracePeriod ago (whichever comes first; a
// zero limit does not apply). A worker that aggregates the name takes a due
// group's oldest members (at most MaxSize) as one Batch, under a lease;
// builds one task from them (the aggregate); and hands it to the broker,
// which publishes it and forgets the members in one step, only while the
// lease is held. A worker that dies with a batch loses nothing: when the
// lease ends the batch, with the same ID and members, is taken again whole
// (so an aggregate built from it again is the same), and no member is in
// two batches. A member published with an ETA joins its group when due.
//
// A member is never run alone. When no worker alive aggregates its name
// any more (the last announcement ended), the broker strands the members
// of the name's due groups, and of its batches whose lease ended or whose
// retry came: each is delivered by Fetch as a plain task, with its
// AggregationKey, so that a worker fails it (Archive) or tries it again
// (Retry, which puts it back in its group as the newest member). The
// queue's maintenance does this; while no worker of the queue runs, they
// wait.

// ErrNoAggregator is returned by Publish for a member whose task name no
// worker alive aggregates on its queue (AnnounceAggregators).
var ErrNoAggregator = errors.New("brokers: no worker alive aggregates this task on its queue")

// AggregationPolicy says when a group of members is due. At least one limit
// must be set; none may be negative.
type AggregationPolicy struct {
	// MaxSize: due once it holds this many members; a batch takes at most
	// this many. 0: no limit (a batch takes every member).
	MaxSize int
	// MaxDelay: due this long after its oldest member joined. 0: none.
	MaxDelay time.Duration
	// GracePeriod: due this long after its newest member joined. 0: none.
	GracePeriod time.Duration
}

// Validate reports why p cannot be used, or nil.
func (p AggregationPolicy) Validate() error {
	switch {
	case p.MaxSize < 0 || p.MaxDelay < 0 || p.GracePeriod < 0:
		return fmt.Errorf("brokers: aggregation policy %+v: no limit may be negative", p)
	case p.MaxSize == 0 && p.MaxDelay == 0 && p.GracePeriod == 0:
		return fmt.Errorf("brokers: aggregation policy: set at least one of MaxSize, MaxDelay and GracePeriod, or a group is never due")
	case p.MaxSize == 1:
		return fmt.Errorf("brokers: aggregation policy: MaxSize 1 releases every member alone; send them without an AggregationKey")
	}
	return nil
}

// DueAt returns when a group is due by p: full is when its MaxSize-th
// member joined (zero while it has fewer), oldest and newest when its
// oldest and newest members joined. The zero time: never, by p (a policy
// with no limit, or a group without a policy). The brokers' Lua reckons
// the same rule in lib/aggregate.lua.
func (p AggregationPolicy) DueAt(full, oldest, newest time.Time) time.Time {
	var at time.Time
	consider := func(t time.Time) {
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	if p.MaxSize > 0 && !full.IsZero() {
		consider(full)
	}
	if p.MaxDelay > 0 {
		consider(oldest.Add(p.MaxDelay))
	}
	if p.GracePeriod > 0 {
		consider(newest.Add(p.GracePeriod))
	}
	return at
}

// Batch is the members of one due group, taken under a lease by the worker
// that builds their aggregate.
type Batch struct {
	// ID names the batch; it stays the same when the batch is taken again
	// after its lease ended or RetryBatch, so an aggregate whose UUID
	// derives from it is the same task.
	ID    string
	Queue string
	// Name is the members' task name, Key their AggregationKey.
	Name, Key string
	// Members, oldest first.
	Members []*tasks.Signature
	Lease   *Lease
	// Failed counts the RetryBatch calls on this batch; Recovered the
	// times its lease ended unsettled.
	Failed, Recovered int
	// Aggregate, when set, is the aggregate already built from the batch
	// and handed over to its queue, to be completed with rather than
	// built again: a Redis Cluster broker hands over an aggregate bound
	// for another queue (another slot) in steps, and a batch whose worker
	// died between them comes back with it. CompleteBatch sets it once the
	// hand-over has begun; the batch can then no longer be retried or
	// archived.
	Aggregate *tasks.Signature
}

// AggregationInfo describes a group waiting in a queue.
type AggregationInfo struct {
	Queue, Name, Key string
	// Size is the members waiting (not those taken in a batch).
	Size int
	// Oldest and Newest are when the oldest and newest waiting members
	// joined; Due when the group is due (zero: never, by its policy).
	Oldest, Newest, Due time.Time
}

// Aggregator is a broker that aggregates: see the top of this file.
type Aggregator interface {
	// AnnounceAggregators records that a worker alive aggregates each task
	// name of policies on queues, with that policy, for ttl. Publish
	// refuses a member (a signature with an AggregationKey, with an ETA or
	// not) of a name no announcement alive covers on its queue, with
	// ErrNoAggregator; a member whose ETA comes later joins its group then,
	// even if the announcements have ended meanwhile, as does an archived
	// member requeued. A group is due by the policy last announced for its
	// name. ClaimBatch and NextDue pass over paused queues.
	AnnounceAggregators(ctx context.Context, queues []string, policies map[string]AggregationPolicy, ttl time.Duration) error

	// ClaimBatch takes one batch, under a lease, of queues (in the order
	// given) whose task name is in names: a batch whose lease ended (taken
	// again whole, Recovered+1) or that RetryBatch made due again, else the
	// oldest members, up to MaxSize, of a due group. It returns nil, nil
	// when there is none.
	ClaimBatch(ctx context.Context, queues []string, names *TaskNames) (*Batch, error)

	// NextDue returns when the next group or batch of queues whose task
	// name is in names becomes due, or the zero time when none waits: for
	// inspection (workers wait with WaitDue). It may answer early (a Redis
	// broker files a group by the soonest it could be due, not moving it
	// with every member that joins).
	NextDue(ctx context.Context, queues []string, names *TaskNames) (time.Time, error)

	// WaitDue waits until a group or batch of queues whose task name is in
	// names may be due: a member filled a group (its publish, or its ETA,
	// makes it due by MaxSize), or a group's or batch's due time came (the
	// broker watches the due times: a Redis broker through each queue's
	// elected maintainer, so that no worker polls for them), or max has
	// passed; it returns ctx's error if ctx ends first. A wake-up may be
	// spurious, or taken by another waiter: the caller claims, and waits
	// again.
	WaitDue(ctx context.Context, queues []string, names *TaskNames, max time.Duration) error

	// CompleteBatch publishes aggregate (its RoutingKey must be set; it is
	// published as Publish would, and is refused with ErrDuplicateTask
	// like any task) and forgets b's members, in one step, only while the
	// caller holds b's lease: otherwise it fails with ErrLeaseLost and
	// changes nothing. A broker that cannot do it in one step (Redis
	// Cluster, for an aggregate bound for another queue's slot) hands the
	// aggregate over first and sets b.Aggregate: from then on the batch
	// is only ever completed with it, by whoever holds it (an error after
	// that leaves it to be finished when its lease ends).
	CompleteBatch(ctx context.Context, b *Batch, aggregate *tasks.Signature) error

	// ExtendBatch renews b's lease for the broker's lease duration from
	// now, while the caller holds it, as ExtendLeases does a task's: a
	// worker renews it while the aggregator runs, so that an aggregator
	// may take longer than one lease. When the lease is no longer held
	// (it ran out, and another worker may have taken the batch), it marks
	// b's lease lost and returns ErrLeaseLost.
	ExtendBatch(ctx context.Context, b *Batch) error

	// RetryBatch gives b back, whole, to be taken again from at (Failed+1),
	// after its aggregator failed with errMsg; only under b's lease.
	RetryBatch(ctx context.Context, b *Batch, at time.Time, errMsg string) error

	// ArchiveBatch archives each of b's members with reason (they are dead
	// letters of b's queue, listed as any; requeued, they join their group
	// again in their first places, by when they first joined), only under
	// b's lease.
	ArchiveBatch(ctx context.Context, b *Batch, reason string) error

	// Aggregations lists queue's groups with waiting members, by name then
	// key.
	Aggregations(ctx context.Context, queue string) ([]*AggregationInfo, error)
}
