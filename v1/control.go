package machinery

import (
	"context"
	"errors"
	"fmt"

	brokeriface "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// An operator's actions on a task that waits in its queue (pending,
// scheduled or retrying), through the broker's Inspector; queue "" is the
// DefaultQueue. A task deleted or archived does not run (unless requeued
// from the archive, after its chord has failed); its state becomes FAILURE
// saying so (so waiting on it returns), a chord it belongs to fails, and
// its OnError callbacks are not sent. A running task is refused
// (brokers/iface.ErrTaskNotWaiting), as is an archived one; an unknown one
// is brokers/iface.ErrTaskNotFound. Operator actions are not counted in
// the task metrics.

// DeleteTask deletes the task uuid that waits in queue.
func (s *Server) DeleteTask(ctx context.Context, queue, uuid string) error {
	return s.takeWaiting(ctx, queue, uuid, brokeriface.TakeDelete, "task deleted by an operator before it ran")
}

// ArchiveTask moves the task uuid that waits in queue to the archive with
// reason (RequeueArchived sends it again).
func (s *Server) ArchiveTask(ctx context.Context, queue, uuid, reason string) error {
	if reason == "" {
		reason = "archived by an operator before it ran"
	}
	return s.takeWaiting(ctx, queue, uuid, brokeriface.TakeArchive, reason)
}

// RunTaskNow makes the task uuid, scheduled or waiting for its retry in
// queue, pending now, at the head of its queue; a pending task is left as
// it is.
func (s *Server) RunTaskNow(ctx context.Context, queue, uuid string) error {
	return s.takeWaiting(ctx, queue, uuid, brokeriface.TakeRun, "")
}

func (s *Server) takeWaiting(ctx context.Context, queue, uuid string, action brokeriface.TakeAction, reason string) error {
	in, ok := s.GetBroker().(brokeriface.Inspector)
	if !ok {
		return fmt.Errorf("machinist: %s task %s: the broker (%T) cannot inspect its queues", action, uuid, s.GetBroker())
	}
	if queue == "" {
		queue = s.GetConfig().DefaultQueue
	}
	sig, err := in.TakeWaiting(ctx, queue, uuid, action, reason)
	if err != nil {
		return fmt.Errorf("machinist: %w", err)
	}
	if action == brokeriface.TakeRun {
		return nil
	}
	// Taken out: it will not run. Its state says so.
	if err := s.NewWorker("operator", 1).engine().FailTaken(ctx, sig, reason, false); err != nil {
		return errors.Join(fmt.Errorf("machinist: %s task %s: done, but its FAILURE state was not written", action, uuid), err)
	}
	return nil
}

// ErrTaskFinished is returned by CancelTask for a task that has finished:
// there is nothing to cancel.
var ErrTaskFinished = errors.New("machinist: the task has finished")

// CancelOption changes what CancelTask does.
type CancelOption func(*cancelOptions)

type cancelOptions struct{ onError bool }

// WithOnError makes CancelTask send the task's OnError callbacks, with the
// cancellation as their error; by default they are not sent.
func WithOnError() CancelOption { return func(o *cancelOptions) { o.onError = true } }

// CancelTask cancels the task uuid of queue ("" is the DefaultQueue) from
// any process. A task that waits (pending, scheduled, retrying, or an
// aggregation member waiting in its group) never runs; a running one has
// its context cancelled at once (the workers watch cancellations; at the
// latest at its next lease renewal), is not retried, and cannot settle as a
// success afterwards (its lease is gone). Its state becomes FAILURE with
// an error starting with tasks.CancelledMessage, so waiting on it returns
// an error wrapping tasks.ErrTaskCancelled, and a chord it belongs to
// fails (waiting on the chord's callback gives an error naming the
// cancelled member). Its OnError callbacks are not sent unless WithOnError
// is given. A finished task is left as it is: ErrTaskFinished.
func (s *Server) CancelTask(ctx context.Context, queue, uuid string, opts ...CancelOption) error {
	var o cancelOptions
	for _, opt := range opts {
		opt(&o)
	}
	c, ok := s.GetBroker().(brokeriface.Canceller)
	if !ok {
		return fmt.Errorf("machinist: cancel task %s: the broker (%T) cannot cancel tasks", uuid, s.GetBroker())
	}
	if queue == "" {
		queue = s.GetConfig().DefaultQueue
	}
	msg := tasks.CancelledMessage + " by an operator"
	sig, _, err := c.CancelTask(ctx, queue, uuid, msg, 0)
	if err != nil {
		if errors.Is(err, brokeriface.ErrTaskNotFound) || errors.Is(err, brokeriface.ErrTaskNotWaiting) {
			if st, serr := s.GetBackend().GetStateContext(ctx, uuid); serr == nil && st.IsCompleted() {
				return fmt.Errorf("machinist: cancel task %s: it is %s: %w", uuid, st.State, ErrTaskFinished)
			}
		}
		return fmt.Errorf("machinist: %w", err)
	}
	if err := s.NewWorker("operator", 1).engine().FailTaken(ctx, sig, msg, o.onError); err != nil {
		return errors.Join(fmt.Errorf("machinist: cancel task %s: done, but its FAILURE state or callbacks were not all written", uuid), err)
	}
	return nil
}
