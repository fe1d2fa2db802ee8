package store

import (
	"context"
	"errors"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// Store is the seam the Server, the Worker and the results run on: one
// value that holds tasks, their states and workflows, made of a broker and
// a backend (internal/pair). It is large by design, as a database driver
// is: it has every operation the layers above need, so that none of them
// probes what its broker or backend can do. An operation its parts cannot
// do fails with an error wrapping ErrUnsupported. Every method is safe for
// concurrent use.
type Store interface {
	// Send publishes p.Tasks with their PENDING states: in one step when
	// the broker writes the backend's states (StateBroker), else the
	// states first, then the tasks, and, when nothing was published
	// (ErrNotSent), the states written are taken back. Its error wraps
	// ErrNotSent or ErrMaybeSent.
	Send(ctx context.Context, p SendParams) error
	// Publish publishes sigs, without writing their states, as
	// Broker.Publish does; its error wraps ErrNotSent or ErrMaybeSent.
	Publish(ctx context.Context, sigs ...*tasks.Signature) error

	Fetch(ctx context.Context, queues []string, max int, names *TaskNames) ([]*Delivery, error)
	Announce(ctx context.Context, queues []string, names *TaskNames, ttl time.Duration) error
	Reroute(ctx context.Context, d *Delivery) (bool, error)
	ExtendLeases(ctx context.Context, deliveries ...*Delivery) error
	Requeue(ctx context.Context, ds ...*Delivery) error

	// WriteState writes p.State, a state of p.Signature, and reports
	// whether a group member's final state completed its group. With a
	// delivery, only while its lease is held (else ErrLeaseLost, and
	// nothing is written), and with p.Commit the state is first committed
	// as the task's outcome (Broker.Commit). Without one (a task run by
	// Process), the state is written as it is.
	WriteState(ctx context.Context, p WriteParams) (groupDone bool, err error)
	// Settle ends the run of d as s says, only while d's lease is held
	// (else ErrLeaseLost). With s.Take it takes the next task of d's queue
	// for the caller in the same step where the store can, and returns it
	// (nil when none is pending).
	Settle(ctx context.Context, d *Delivery, s Settlement) (next *Delivery, err error)

	Backend
	Workflows
	Graphs
	Withdrawer
	Notifier
	QueueStateReader
	Claimer
	Pauser
	Inspector
	Canceller
	Aggregator
	Monitor
	TaskData
	Events
}

// ErrUnsupported is wrapped by the error of a Store operation that its
// broker or backend does not offer (a broker of your own without an
// Inspector, say).
var ErrUnsupported = errors.New("store: not supported by this broker or backend")

// SendParams are what Store.Send publishes.
type SendParams struct {
	// Tasks are published, PENDING, in one operation per queue where the
	// store can make it so.
	Tasks []*tasks.Signature
	// Fresh says the send made the UUID of its one task just now: no task
	// or state can have it yet, so the store need not look for one.
	Fresh bool
}

// WriteParams are what Store.WriteState writes.
type WriteParams struct {
	// Delivery is the task's, or nil for a task run without one.
	Delivery  *Delivery
	Signature *tasks.Signature
	State     *tasks.TaskState
	// Commit records State, a final state, as the task's outcome first.
	Commit bool
}

// SettleKind says how Store.Settle ends a run.
type SettleKind int

// How Store.Settle ends a run.
const (
	// SettleAck acknowledges the task: its outcome is written already.
	SettleAck SettleKind = iota + 1
	// SettleSuccess writes Settlement.State, the task's SUCCESS, and
	// commits it; publishes Settlement.Next, the tasks that follow it,
	// PENDING; and acknowledges the task: in one step where the store
	// can. A next task still queued counts as sent, and so, for a task
	// that ran again after a recovery (Delivery.Recovered > 0), does one
	// whose state shows it started or finished. A chord member whose
	// success completes its group is not acknowledged: Settle fails with
	// ErrChordDue, the outcome committed and the lease still held, for the
	// caller to elect the callback's sender, then acknowledge.
	SettleSuccess
	// SettleRetry writes Settlement.State (RETRY; none when nil) and has
	// the task run again at Settlement.RetryAt, with Settlement.Reason as
	// its last error.
	SettleRetry
	// SettleArchive keeps the task as a dead letter with
	// Settlement.Reason: its FAILURE is written and committed already.
	SettleArchive
)

// Settlement is how Store.Settle ends a delivery's run.
type Settlement struct {
	Kind    SettleKind
	State   *tasks.TaskState
	Next    []*tasks.Signature
	RetryAt time.Time
	Reason  string
	// Take asks for the next task of the queue (SettleAck, SettleSuccess).
	Take *Take
}

// EachSender is a StateBroker that publishes many tasks, each on its own
// as PublishPending would publish it alone, in few calls (SendTasks). It
// returns each one's error, aligned with sigs, or nil when it cannot (a
// Cluster): the caller sends them one by one.
type EachSender interface {
	PublishPendingEach(ctx context.Context, sigs []*tasks.Signature) []error
}

// StateBroker is a broker joined to its result backend on one store (the
// embedded engine, or a single Redis server), so that it writes task
// states in the same step as it moves the tasks.
type StateBroker interface {
	// PublishPending publishes p.Tasks as Publish does and makes their
	// states PENDING in the same step (replacing a state an earlier task
	// with the same UUID left): a worker never finishes a task before it
	// is PENDING.
	PublishPending(ctx context.Context, p SendParams) error

	// AckSuccess settles d as Store.Settle does with SettleSuccess (and
	// Take, take), in one step.
	AckSuccess(ctx context.Context, d *Delivery, success *tasks.TaskState, next []*tasks.Signature, take *Take) (*Delivery, error)

	// WriteState writes state, a state of d's task, in one step and only
	// while the caller holds d's lease (else ErrLeaseLost, and nothing is
	// written); with commit it also records state as the task's outcome,
	// as Commit does. A final state of a group member is recorded in its
	// group's bookkeeping in the same step, and groupDone reports whether
	// the group has completed with it.
	WriteState(ctx context.Context, d *Delivery, state *tasks.TaskState, commit bool) (groupDone bool, err error)
}

// Joiner is a broker that can write the states of some backends itself:
// Join returns the StateBroker that writes backend's states, or nil when
// backend is not on the broker's store (or the store cannot write a
// task's state in the step that moves the task: a Redis Cluster).
type Joiner interface {
	Join(backend Backend) StateBroker
}
