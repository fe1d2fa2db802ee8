package store

import (
	"context"
	"fmt"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// Relay is a broker that can pass a worker's slot from the task it
// settles straight to the next task of the same queue: the settle takes
// that task in the same step, so the worker goes on without a Fetch (on
// Redis: no wake-up, no dequeue, one round trip from one task to the
// next). Both brokers of this module are Relays.
type Relay interface {
	// AckTake acknowledges d as Ack does and, in the same step, takes the
	// next task of d's queue for the caller as a Fetch of d's queue for
	// one task with take.Names would, without waiting: it returns nil
	// when none is pending or the queue is paused. The task taken is the
	// caller's to run and settle as a fetched one. A caller that lost d's
	// lease gets ErrLeaseLost, and nothing is taken.
	AckTake(ctx context.Context, d *Delivery, take Take) (*Delivery, error)
}

// Take asks a settle (Relay.AckTake, StateBroker.AckSuccess) to take the
// next task of the settled task's queue for the caller.
type Take struct {
	// Names are the caller's task names, as Fetch's names: tasks
	// rerouted to them may be taken; with nil, none is.
	Names *TaskNames
}

// Delivery is one task handed to a worker by Fetch.
type Delivery struct {
	// Signature is the task as it was published, or as the last Retry left it.
	Signature *tasks.Signature
	// Queue is the queue the task was taken from.
	Queue string
	// Lease is the worker's claim on the task.
	Lease *Lease
	// Retried counts the times the task was settled with Retry.
	Retried int
	// Recovered counts the times the task came back because its lease ran out.
	Recovered int
	// Outcome is what an earlier holder of the task committed (see
	// Broker.Commit), or nil: the task is not to be run, only finished.
	Outcome *tasks.TaskState
	// Err says why the task's message could not be decoded (another
	// program wrote it, or a newer version of machinist); Signature then
	// holds only the UUID and queue, and the worker fails the task with
	// this reason.
	Err error
}

// TaskStatus says where in a queue a task is.
type TaskStatus string

// The places a task can be in a queue.
const (
	StatusPending   TaskStatus = "pending"
	StatusActive    TaskStatus = "active"
	StatusScheduled TaskStatus = "scheduled"
	StatusRetry     TaskStatus = "retry"
	StatusArchived  TaskStatus = "archived"
	// StatusLimited: parked on its limit key until a concurrency slot
	// frees (see tasks.Limit).
	StatusLimited TaskStatus = "limited"
	// StatusAggregating: an aggregation member waiting in its group, or
	// taken in a batch not yet completed (Inspector.GetTask reports it;
	// Aggregator.Aggregations lists the groups).
	StatusAggregating TaskStatus = "aggregating"
	// StatusCompleted: finished and kept for the completed retention
	// (Inspector.GetTask reports it).
	StatusCompleted TaskStatus = "completed"
)

// TaskInfo describes a task held by a broker.
type TaskInfo struct {
	Signature *tasks.Signature
	Queue     string
	Status    TaskStatus
	// NextProcessAt is when a scheduled or retrying task becomes pending.
	NextProcessAt time.Time `json:",omitzero"`
	// LastError is the error of the last failed run, or the archive reason.
	LastError string `json:",omitempty"`
	// LastFailedAt is when LastError was recorded.
	LastFailedAt time.Time `json:",omitzero"`
	Retried      int
	Recovered    int
	// LeaseExpiresAt is when the lease of an active task ends unless its
	// worker renews it (Inspector.GetTask; ListTasks of active tasks).
	LeaseExpiresAt time.Time `json:",omitzero"`
}

// QueueInfo holds the sizes of a queue.
type QueueInfo struct {
	Queue     string
	Paused    bool
	Pending   int
	Active    int
	Scheduled int
	Retry     int
	Archived  int
	// Aggregating counts the members waiting in aggregation groups or
	// taken in batches not yet completed (see Aggregator).
	Aggregating int
	// Limited counts the tasks parked on their limit keys until a
	// concurrency slot frees (see tasks.Limit); those over a rate are
	// Scheduled.
	Limited int
	// Completed counts the tasks that succeeded and are kept for the
	// completed retention (Config.CompletedRetention; 0 without one).
	Completed int
	// Levels counts the pending tasks by priority level
	// (tasks.Signature.Priority), nil when none has a level above 0 or a
	// fair key.
	Levels map[int]int `json:",omitempty"`
	// FairKeys counts the fair keys (tasks.Signature.FairKey) with tasks
	// pending.
	FairKeys int `json:",omitempty"`
}

// Add adds o's sizes to q's (not its name, nor whether it is paused).
func (q *QueueInfo) Add(o *QueueInfo) {
	q.Pending += o.Pending
	q.Active += o.Active
	q.Scheduled += o.Scheduled
	q.Retry += o.Retry
	q.Archived += o.Archived
	q.Aggregating += o.Aggregating
	q.Limited += o.Limited
	q.Completed += o.Completed
	q.FairKeys += o.FairKeys
	for level, n := range o.Levels {
		if q.Levels == nil {
			q.Levels = make(map[int]int)
		}
		q.Levels[level] += n
	}
}

// Count is how many tasks q holds with status, and false for a status
// Inspector.ListTasks does not take.
func (q *QueueInfo) Count(status TaskStatus) (int, bool) {
	switch status {
	case StatusPending:
		return q.Pending, true
	case StatusActive:
		return q.Active, true
	case StatusScheduled:
		return q.Scheduled, true
	case StatusRetry:
		return q.Retry, true
	case StatusArchived:
		return q.Archived, true
	case StatusLimited:
		return q.Limited, true
	case StatusCompleted:
		return q.Completed, true
	}
	return 0, false
}

// Claimer is a broker through which the processes sharing it agree that a
// piece of work is done once: periodic tasks use it so that each tick is
// sent once, even when the process sending it dies.
//
// A claim on a key is a lease held by a token, by the broker's clock. The
// first ClaimLease on a key wins it (ClaimWon); while the lease runs, every
// other ClaimLease is told ClaimHeld and how long the lease has left; once
// the holder calls CompleteClaim, every ClaimLease is told ClaimDone. A
// lease that ends without CompleteClaim goes to the next caller, with
// TakenOver set: its holder may have done part of the work, and the new
// holder must find out which part (periodic ticks do, through Holds and the
// task states). A key's record, done or not, ends keep after the last
// ClaimLease that took it; the key is then free.
type Claimer interface {
	// ClaimLease takes key for lease, unless another caller's lease on it
	// runs or it is done, and keeps the key's record for keep from now
	// (keep is raised to lease when shorter). On Redis a claim is one key,
	// so it lives in one Cluster slot.
	ClaimLease(ctx context.Context, key string, lease, keep time.Duration) (ClaimResult, error)

	// CompleteClaim marks key done for the holder of token; the key stays
	// done until its record ends. It returns nil when the key is done (by
	// this call or an earlier one), and an error wrapping ErrLeaseLost
	// when another caller took the key over or its record ended. After
	// the lease ended it may succeed, if no one took the key over, or fail
	// with ErrLeaseLost (a broker may forget ended leases).
	CompleteClaim(ctx context.Context, key, token string) error

	// Holds reports, for each of sigs in order, whether the broker holds a
	// task with its UUID in the queue its RoutingKey names (pending,
	// scheduled, waiting for a retry, running, or completed and kept;
	// not archived): exactly when Publish would refuse it with
	// ErrDuplicateTask. A task kept out by its workflow's cancellation is
	// not held (Publish refuses it with a *CancelledError). A RoutingKey
	// must be set (else ErrNoQueue).
	Holds(ctx context.Context, sigs ...*tasks.Signature) ([]bool, error)

	// RecordPeriodic records a periodic entry as a scheduler registered
	// it (its Last left as it was), for PeriodicEntries to list.
	RecordPeriodic(ctx context.Context, e *PeriodicEntry) error
	// RecordPeriodicTick records the tick of the entry name, spec that
	// was sent last.
	RecordPeriodicTick(ctx context.Context, name, spec string, last PeriodicTick) error
	// PeriodicEntries lists the periodic entries recorded, by name, then
	// spec.
	PeriodicEntries(ctx context.Context) ([]*PeriodicEntry, error)
}

// PeriodicEntry is a periodic task, chain, group or chord as the last
// scheduler to register it recorded it.
type PeriodicEntry struct {
	Name, Spec string
	// Kind is "task", "chain", "group" or "chord"; Tasks the names of its
	// tasks (a chord's callback last), Queues the queues they go to.
	Kind          string
	Tasks, Queues []string
	// Host and PID name the process that registered it last, at
	// Registered.
	Host       string
	PID        int
	Registered time.Time
	// Last is its tick sent last (zero: none yet).
	Last PeriodicTick
}

// PeriodicTick is a tick of a periodic entry that was sent: when, and
// what says its outcome: the task whose final state is the tick's (a
// task, a chain's last, a chord's callback), or, for a group, the group.
type PeriodicTick struct {
	At         time.Time
	Task       string `json:",omitempty"`
	Group      string `json:",omitempty"`
	GroupCount int    `json:",omitempty"`
}

// ClaimStatus says what ClaimLease found.
type ClaimStatus int

// What ClaimLease found.
const (
	// ClaimWon: the caller holds the key's lease now.
	ClaimWon ClaimStatus = iota + 1
	// ClaimHeld: another caller's lease runs for ClaimResult.Remaining.
	ClaimHeld
	// ClaimDone: the key was completed.
	ClaimDone
)

// ClaimResult is the answer of ClaimLease.
type ClaimResult struct {
	Status ClaimStatus
	// Token names the caller's lease (ClaimWon): CompleteClaim takes it.
	Token string
	// TakenOver (ClaimWon) says that an earlier lease on the key ended
	// without CompleteClaim: its holder may have done part of the work.
	TakenOver bool
	// Remaining (ClaimHeld) is how long the holder's lease has left by the
	// broker's clock.
	Remaining time.Duration
}

// Pauser is a broker whose queues can be paused.
type Pauser interface {
	// PauseQueue stops Fetch from taking tasks of queue until ResumeQueue.
	// Tasks keep being published to it.
	PauseQueue(ctx context.Context, queue string) error
	// ResumeQueue undoes PauseQueue.
	ResumeQueue(ctx context.Context, queue string) error
}

// Inspector lists and manages what a broker holds; the CLI and dashboard are
// built on it.
type Inspector interface {
	// Queues lists the names of the queues that hold or held tasks.
	Queues(ctx context.Context) ([]string, error)
	// QueueInfo returns the sizes of queue.
	QueueInfo(ctx context.Context, queue string) (*QueueInfo, error)
	// ListTasks lists up to limit tasks of queue with status (pending,
	// active, scheduled, retry, archived, limited or completed), skipping
	// the first offset. Pending tasks come in the order they will run,
	// active ones by lease expiry, scheduled and retrying ones by time,
	// archived and completed ones newest first, limited ones in the order
	// they were parked. Each page
	// is read by position (no scan of the rest of the queue).
	ListTasks(ctx context.Context, queue string, status TaskStatus, offset, limit int) ([]*TaskInfo, error)
	// GetTask describes the task uuid of queue, wherever it is in the
	// queue (Status says where; an active task's LeaseExpiresAt when its
	// lease ends). A queue without it (never sent there, finished and
	// not kept, deleted): ErrTaskNotFound.
	GetTask(ctx context.Context, queue, uuid string) (*TaskInfo, error)
	// RequeueArchived moves the archived tasks with the given UUIDs (all of
	// the queue's archived tasks when none are given) back to pending, and
	// returns how many it moved.
	RequeueArchived(ctx context.Context, queue string, uuids ...string) (int, error)
	// DeleteArchived deletes the archived tasks with the given UUIDs (all
	// when none are given) and returns how many it deleted.
	DeleteArchived(ctx context.Context, queue string, uuids ...string) (int, error)
	// TakeWaiting acts on a task of queue that waits there (pending,
	// scheduled, retrying, or parked on its limit key): TakeDelete deletes
	// it (it never runs), TakeArchive archives it with reason, TakeRun
	// makes it pending now, at the head of its queue (a scheduled
	// aggregation member joins its group; a pending or parked task stays
	// as it is; a task deferred by its rate gives up the start it booked,
	// and books one again when it is taken). It returns the task's
	// signature. A queue without such a task: ErrTaskNotFound; a task that
	// does not wait (running, archived, waiting in an aggregation group,
	// or recovered after its outcome was committed): an error wrapping
	// ErrTaskNotWaiting that names its status. A unique task deleted or
	// archived frees its key (requeued from the archive, it is no longer
	// unique).
	TakeWaiting(ctx context.Context, queue, uuid string, action TakeAction, reason string) (*tasks.Signature, error)
	// TakeAll acts on up to n of queue's tasks with status, as TakeWaiting
	// on each (CheckTakeAll says which actions a status takes), taking
	// pending tasks in the order they would run, parked ones in the order
	// they were parked, others by time, oldest first. TakeRun makes
	// scheduled and retrying tasks pending at the tail of their queue, and
	// requeues archived ones. Acting on a whole status is a loop of calls
	// until one acts on none or More is false: each call holds Redis for
	// its n tasks only.
	TakeAll(ctx context.Context, queue string, status TaskStatus, action TakeAction, reason string, n int) (*TakenPage, error)
	// RemoveQueue deletes what the store keeps of queue (a sharded queue's
	// shards and their record too), without looking at what it holds: the
	// caller has made sure nothing is left that matters. A worker still
	// consuming the queue, or a sender, makes it again.
	RemoveQueue(ctx context.Context, queue string) error
}

// TakenPage is what one Inspector.TakeAll call did.
type TakenPage struct {
	// Taken are the tasks acted on, with their signatures (archived tasks
	// and those whose message could not be read: their UUID and queue).
	Taken []*tasks.Signature
	// More says the status still has tasks, or entries being finished.
	More bool
}

// CheckTakeAll refuses an action Inspector.TakeAll does not do on
// status: pending and limited tasks can be deleted or archived,
// scheduled and retrying ones run too, archived ones deleted or run
// (requeued); active ones are cancelled one by one.
func CheckTakeAll(status TaskStatus, action TakeAction) error {
	ok := false
	switch status {
	case StatusPending, StatusLimited:
		ok = action == TakeDelete || action == TakeArchive
	case StatusScheduled, StatusRetry:
		ok = action == TakeDelete || action == TakeArchive || action == TakeRun
	case StatusArchived:
		ok = action == TakeDelete || action == TakeRun
	}
	if !ok {
		return fmt.Errorf("%w: %s tasks cannot be taken to %s", ErrBadTakeAll, status, action)
	}
	return nil
}

// Canceller is a broker through which any process cancels a task.
type Canceller interface {
	// CancelTask stops the task uuid of queue with reason: a waiting task
	// (pending, scheduled, retrying, parked on its limit key, or a member
	// waiting in its group) is
	// deleted; a running one loses its lease, so that its worker can
	// settle it no more (not as a success, nor as a retry), is archived
	// with reason, and the workers watching cancellations (WatchCancels)
	// are told at once. It returns the task's signature and whether it was
	// running. A queue without such a task (it may have finished):
	// ErrTaskNotFound; one that cannot be cancelled (archived, finishing
	// after its outcome was committed, completed and kept for
	// CompletedRetention, a member in a batch being built, or barred):
	// an error wrapping ErrTaskNotWaiting that names its state. A unique
	// task frees its key.
	//
	// With bar > 0 (cancelling a workflow, some of whose tasks are not
	// sent yet), a queue without the task keeps it out for bar instead,
	// and so it does a waiting task it deletes: until then a Publish of it
	// (a callback sent by a task that just finished) is refused with a
	// *CancelledError carrying reason, an acknowledgement that would send
	// it (StateBroker.AckSuccess) does not, and CancelTask refuses it as
	// "cancelled" (ErrTaskNotWaiting). For a task the queue does not hold,
	// CancelTask then returns a nil sig and no error.
	CancelTask(ctx context.Context, queue, uuid, reason string, bar time.Duration) (sig *tasks.Signature, running bool, err error)
	// WatchCancels calls fn with the UUID of each task cancelled (waiting
	// or running: a worker whose lease ran out may still run a waiting
	// one, recovered since), until ctx ends (then it returns ctx's error) or the broker is
	// closed. It calls fn with "" once the watch is set up, and again when
	// it is set up again after an outage, during which cancellations may
	// have been missed (a worker then renews its leases at once, which
	// finds the tasks cancelled meanwhile). A worker uses it to stop those
	// of its tasks at once.
	WatchCancels(ctx context.Context, fn func(uuid string)) error
}

// TakeAction is what Inspector.TakeWaiting does with a waiting task.
type TakeAction string

// The actions of TakeWaiting.
const (
	TakeDelete  TakeAction = "delete"
	TakeArchive TakeAction = "archive"
	TakeRun     TakeAction = "run"
)
