package store

import (
	"context"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// Broker is the tasks half of the store: it holds tasks and hands them to
// workers under leases. The public brokers/iface.LeaseBroker is this with
// machinery's methods added (MachineryBroker). The worker loop is: Fetch takes tasks under a
// lease; ExtendLeases renews the leases while they run; Commit records a
// task's final outcome before the worker writes anything that others see;
// then exactly one of Ack, Retry, Archive or Requeue settles each task.
// Each of these succeeds only while the caller holds the lease: the broker
// checks the lease's fencing token and its expiry. Every method is safe
// for concurrent use.
type Broker interface {
	// PublishTasks adds tasks to the queues named by their RoutingKey, which
	// must be set. A task whose ETA is in the future is scheduled and
	// becomes pending at its ETA, never before. Publish fails with
	// ErrDuplicateTask when a task with the same UUID is still held in the
	// same queue (archived tasks do not count), or appears twice in sigs;
	// UUIDs are unique per queue, which keeps each queue in one Redis
	// Cluster slot. A
	// task whose message is larger than config.Config.MaxMessageSize is
	// refused (a *MessageTooLargeError) before any of sigs is published.
	// Publishing several tasks is one
	// operation per queue where the implementation can make it so; on error,
	// some of them may have been published. machinist's brokers return when
	// ctx ends, whatever Redis does, and their errors wrap either
	// ErrNotSent or ErrMaybeSent.
	PublishTasks(ctx context.Context, sigs ...*tasks.Signature) error

	// Fetch waits until at least one task is pending in one of queues, then
	// takes up to max pending tasks, each under its own lease. Queues are
	// tried in the order given (the worker orders them by priority or weight
	// for each call), and paused queues are skipped. Tasks rerouted to the
	// workers that have their names (Reroute) come first, to a caller whose
	// names include theirs and were announced for the queue (Announce);
	// with names nil, Fetch takes none of them. Tasks
	// whose names the caller lacks are not filtered out: a worker reroutes
	// those it takes. It returns ctx's error when ctx ends first, having
	// taken nothing.
	Fetch(ctx context.Context, queues []string, max int, names *TaskNames) ([]*Delivery, error)

	// Announce tells the broker that a worker with names consumes queues,
	// for ttl: Reroute sends a task to the workers that announced its name
	// and are alive. A worker announces before it fetches, then again well
	// within ttl while it runs.
	Announce(ctx context.Context, queues []string, names *TaskNames, ttl time.Duration) error

	// Reroute settles d, a task whose name the caller has not registered,
	// by handing it to the workers of its queue that have: it waits,
	// pending, for a Fetch whose names include its name, and nothing is
	// counted against it. It returns false, changing nothing, when no
	// worker alive on the queue has announced the name; the caller then
	// retries or fails the task. A task rerouted whose workers then all
	// stop announcing goes back to pending within the broker's recover
	// interval after their announcements expire.
	Reroute(ctx context.Context, d *Delivery) (bool, error)

	// ExtendLeases renews the leases of deliveries. A delivery whose lease
	// the broker no longer grants has its Lease marked lost; that is not an
	// error. An error means the renewal could not be made at all.
	ExtendLeases(ctx context.Context, deliveries ...*Delivery) error

	// Commit records outcome, the final state (SUCCESS or FAILURE) of d's
	// task, in the task, only while the caller holds d's lease; otherwise it
	// fails with ErrLeaseLost and writes nothing. A committed task does not
	// run again: if its lease ends before it is settled (its worker died
	// while writing the state, sending callbacks or electing a chord's
	// callback), the worker that takes it next finds outcome in
	// Delivery.Outcome and finishes that work instead. The worker commits
	// before any write that other parts of the system see, so a worker that
	// lost its lease changes nothing. A unique task frees its key here (it
	// has finished), so that a send with the key is accepted once its final
	// state shows.
	Commit(ctx context.Context, d *Delivery, outcome *tasks.TaskState) error

	// Ack settles a task that is done: the broker forgets it (or keeps it
	// for the completed retention, where configured).
	Ack(ctx context.Context, d *Delivery) error

	// Retry settles a task that will run again at at, storing d.Signature
	// as it is now (the worker updates RetryCount and RetryTimeout) and
	// errMsg as its last error, and counting one more retry in Retried.
	Retry(ctx context.Context, d *Delivery, at time.Time, errMsg string) error

	// Archive settles a task that is done for good without success: it is
	// kept as a dead letter with reason, for inspection and re-queueing,
	// up to the configured count and age.
	Archive(ctx context.Context, d *Delivery, reason string) error

	// Requeue settles tasks that were taken but not finished, such as those
	// running at shutdown: they go back to the head of their pending list,
	// and nothing is counted against them.
	Requeue(ctx context.Context, ds ...*Delivery) error

	// Close stops the broker's background work and releases what it holds.
	// Tasks are left where they are. Safe to call more than once.
	Close() error
}
