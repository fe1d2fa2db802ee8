package machinery

import (
	"context"
	"errors"
	"fmt"

	brokeriface "github.com/b6192125/machinist/v1/brokers/iface"
)

// An operator's actions on a task that waits in its queue (pending,
// scheduled or retrying), through the broker's Inspector. A task deleted or
// archived never runs; its state becomes FAILURE saying so (so waiting on
// it returns), a chord it belongs to fails, and its OnError callbacks are
// not sent. A running task is refused (brokers/iface.ErrTaskNotWaiting),
// as is an archived one; an unknown one is ErrTaskNotFound.

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
	if err := s.NewWorker("operator", 1).engine().FailUnrun(ctx, sig, reason); err != nil {
		return errors.Join(fmt.Errorf("machinist: %s task %s: done, but its FAILURE state was not written", action, uuid), err)
	}
	return nil
}
