package ops

import (
	"context"
	"fmt"

	"github.com/b6192125/machinist/internal/store"
)

// An operator's actions. Each acts on one queue or task and returns an
// error that wraps what callers branch on: ErrQueueNotFound,
// brokers' ErrTaskNotFound (no queue holds the task) and ErrTaskNotWaiting
// (the action does not apply to where the task is), machinery's
// ErrTaskFinished (the task has finished and was forgotten by its queue:
// no action applies, whichever it is), and the backend's
// ErrWorkflowNotFound.

// Pause stops the workers from taking tasks of queue until Resume; tasks
// are still sent to it.
func (o *Ops) Pause(ctx context.Context, queue string) error {
	if err := o.pausable(ctx, queue); err != nil {
		return err
	}
	return o.st.PauseQueue(ctx, queue)
}

// Resume undoes Pause.
func (o *Ops) Resume(ctx context.Context, queue string) error {
	if err := o.pausable(ctx, queue); err != nil {
		return err
	}
	return o.st.ResumeQueue(ctx, queue)
}

func (o *Ops) pausable(ctx context.Context, queue string) error {
	_, err := o.Queue(ctx, queue)
	return err
}

// Action is what an operator does to a task.
type Action string

// The actions on a task.
const (
	// Cancel: a waiting task never runs; a running one is stopped.
	Cancel Action = "cancel"
	// Delete: a waiting task is deleted (it never runs); an archived one
	// is deleted from the archive.
	Delete Action = "delete"
	// Archive: a waiting task goes to the archive.
	Archive Action = "archive"
	// Run: a scheduled or retrying task runs now (a pending one, or one
	// waiting for a slot of its limit key, is refused).
	Run Action = "run"
	// Requeue: an archived task goes back to pending.
	Requeue Action = "requeue"
)

// Actions are the actions on a task, in the order they are offered.
var Actions = []Action{Cancel, Delete, Archive, Run, Requeue}

// Do acts on the task uuid of queue ("": the queue that holds it, looked
// for in every queue). Deleting, archiving and cancelling write the
// task's FAILURE state, as the Server's methods of the same names do.
func (o *Ops) Do(ctx context.Context, action Action, uuid, queue string) error {
	t, err := o.Task(ctx, uuid, queue)
	if err != nil {
		return fmt.Errorf("%s task: %w", action, err)
	}
	if t.Info == nil {
		if t.State != nil && t.State.IsCompleted() {
			// The same answer for every action: it has finished.
			return fmt.Errorf("%s task %s: it is %s: %w", action, uuid, t.State.State, store.ErrTaskFinished)
		}
		hint := ""
		if t.State != nil && t.State.Workflow != "" {
			hint = fmt.Sprintf(" (it may be a step of workflow %s not sent yet: cancel the workflow)", t.State.Workflow)
		}
		return fmt.Errorf("%s task %s: no queue holds it%s: %w", action, uuid, hint, store.ErrTaskNotFound)
	}
	q := t.Queue
	switch action {
	case Cancel:
		return o.cancelTask(ctx, q, uuid)
	case Delete:
		if t.Info.Status == store.StatusArchived {
			n, err := o.st.DeleteArchived(ctx, q, uuid)
			switch {
			case err != nil:
				return fmt.Errorf("delete archived task %s of %s: %w", uuid, q, err)
			case n == 0: // requeued or deleted meanwhile
				return fmt.Errorf("delete archived task %s of %s: it left the archive: %w", uuid, q, store.ErrTaskNotWaiting)
			}
			return nil
		}
		return o.deleteTask(ctx, q, uuid)
	case Archive:
		return o.archiveTask(ctx, q, uuid, "archived by an operator")
	case Run:
		switch t.Info.Status {
		case store.StatusPending:
			return fmt.Errorf("run task %s of %s now: it is pending already: %w", uuid, q, store.ErrTaskNotWaiting)
		case store.StatusLimited:
			return fmt.Errorf("run task %s of %s now: it waits for a slot of its limit key %q, and runs when one frees: %w",
				uuid, q, t.Info.Signature.Limit.Key, store.ErrTaskNotWaiting)
		}
		return o.runTaskNow(ctx, q, uuid)
	case Requeue:
		n, err := o.st.RequeueArchived(ctx, q, uuid)
		switch {
		case err != nil:
			return fmt.Errorf("requeue task %s of %s: %w", uuid, q, err)
		case n == 0:
			return fmt.Errorf("requeue task %s of %s: it is %s, not archived: %w", uuid, q, t.Info.Status, store.ErrTaskNotWaiting)
		}
		return nil
	}
	return fmt.Errorf("unknown action %q (want one of %v)", action, Actions)
}

// AllActions are the actions on all of a queue's tasks in one status,
// in the order they are offered.
var AllActions = []Action{Delete, Archive, Run, Requeue}

// AllActionFor says whether DoAll does action to tasks with status.
func AllActionFor(action Action, status store.TaskStatus) bool {
	take, ok := takeOf(action, status)
	return ok && store.CheckTakeAll(status, take) == nil
}

// takeOf is the store's action for action on tasks with status: Run and
// Requeue are both TakeRun, Requeue for the archived only.
func takeOf(action Action, status store.TaskStatus) (store.TakeAction, bool) {
	switch action {
	case Delete:
		return store.TakeDelete, true
	case Archive:
		return store.TakeArchive, true
	case Run:
		return store.TakeRun, status != store.StatusArchived
	case Requeue:
		return store.TakeRun, status == store.StatusArchived
	}
	return "", false
}

// DoAll does action to every task of queue with status, a page at a time
// (machinery's Server.DeleteAllTasks and its kin), and returns how many it
// acted on: Delete (pending, scheduled, retry, limited or archived
// tasks), Archive (those that wait), Run (scheduled and retrying ones,
// now) or Requeue (archived ones).
func (o *Ops) DoAll(ctx context.Context, action Action, queue string, status store.TaskStatus) (int, error) {
	if !AllActionFor(action, status) {
		return 0, fmt.Errorf("%s all %s tasks of %s: %w", action, status, queue, store.ErrBadTakeAll)
	}
	switch action {
	case Delete:
		return o.deleteAll(ctx, queue, status)
	case Archive:
		return o.archiveAll(ctx, queue, status, "archived by an operator")
	}
	return o.runAll(ctx, queue, status)
}

// RemoveQueue removes queue, refused while it holds tasks unless force
// (machinery's Server.RemoveQueue).
func (o *Ops) RemoveQueue(ctx context.Context, queue string, force bool) error {
	return o.removeQueue(ctx, queue, force)
}

// CancelWorkflow cancels the chain, group or chord id names (its own ID or
// any of its tasks' UUIDs); see machinery's Server.CancelWorkflow.
func (o *Ops) CancelWorkflow(ctx context.Context, id string) error {
	return o.cancelWorkflow(ctx, id)
}
