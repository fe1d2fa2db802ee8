package iface

import (
	"context"

	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// StateBroker is a broker built together with its result backend on one
// store (the memory pair, or a Redis broker and backend on one Redis
// server), so that it writes task states in the same step as it moves the
// tasks. The Server and Worker use it when PairedWith says so, and fall
// back to the Backend's writes otherwise.
type StateBroker interface {
	Broker

	// PairedWith reports whether backend reads the states this broker
	// writes, so that the methods below stand in for backend's writes.
	PairedWith(backend backends.Backend) bool

	// PublishPending publishes sigs as Publish does and makes their states
	// PENDING in the same step (replacing a state an earlier task with the
	// same UUID left): a worker never finishes a task before it is
	// PENDING. (The Redis broker writes no PENDING state: the task in its
	// queue says it, and the backend reads it there.)
	PublishPending(ctx context.Context, sigs ...*tasks.Signature) error

	// AckSuccess writes the SUCCESS state of d's task with results (a
	// group member's also in its group's bookkeeping), publishes next, the
	// tasks that follow it (its OnSuccess callbacks, ready to travel), made
	// PENDING as PublishPending does, and acknowledges the task, in one step, only
	// while the caller holds d's lease: a worker that lost its lease writes
	// and sends nothing (ErrLeaseLost). A next task that is still queued
	// counts as sent and is left alone, and so, when d's task ran again
	// after a recovery (d.Recovered > 0), is one whose state shows it has
	// started or finished. A member of a group with a chord callback
	// whose success completes its group is not settled: its outcome is
	// committed (as Commit does), and AckSuccess fails with ErrChordDue,
	// the lease still held, for the caller to elect the callback's
	// sender, then acknowledge.
	// With take, it then takes the next task of d's queue for the caller
	// in the same step, as Relay.AckTake does (a next task sent to that
	// queue may be the one taken), and returns it; otherwise, or when
	// none is pending, it returns nil.
	AckSuccess(ctx context.Context, d *Delivery, success *tasks.TaskState, next []*tasks.Signature, take *Take) (*Delivery, error)

	// WriteState writes state, a state of d's task, in one step and only
	// while the caller holds d's lease (else ErrLeaseLost, and nothing is
	// written); with commit it also records state as the task's outcome,
	// as Commit does. A final state of a group member is recorded in its
	// group's bookkeeping in the same step, and groupDone reports whether
	// the group has completed with it.
	WriteState(ctx context.Context, d *Delivery, state *tasks.TaskState, commit bool) (groupDone bool, err error)
}

// Paired returns broker as a StateBroker when it is paired with backend.
func Paired(broker Broker, backend backends.Backend) (StateBroker, bool) {
	sb, ok := broker.(StateBroker)
	if !ok || !sb.PairedWith(backend) {
		return nil, false
	}
	return sb, true
}
