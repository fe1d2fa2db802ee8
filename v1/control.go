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
// is brokers/iface.ErrTaskNotFound. When a DeleteTask took the task but its
// state was not written (the reply or the write was lost), calling it
// again writes it (a chord it belongs to is failed by the first call only).

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
		if action == brokeriface.TakeDelete && errors.Is(err, brokeriface.ErrTaskNotFound) {
			if done, werr := s.finishTaken(ctx, uuid, reason); done || werr != nil {
				return werr
			}
		}
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

// finishTaken writes the FAILURE state of the task uuid, which its queue no
// longer has, when its state is PENDING or RETRY: an earlier DeleteTask
// took it out and its state write was lost. It reports whether it wrote it.
func (s *Server) finishTaken(ctx context.Context, uuid, reason string) (bool, error) {
	st, err := s.GetBackend().GetStateContext(ctx, uuid)
	if err != nil || st.State != tasks.StatePending && st.State != tasks.StateRetry {
		return false, nil // unknown, finished, or running
	}
	sig := &tasks.Signature{UUID: uuid, Name: st.TaskName}
	if err := s.GetBackend().SetStateFailureContext(ctx, sig, reason); err != nil {
		return false, fmt.Errorf("machinist: write the FAILURE state of task %s: %w", uuid, err)
	}
	return true, nil
}
