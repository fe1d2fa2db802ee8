package machinery

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/b6192125/machinist/internal/store"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
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
	return s.takeWaiting(ctx, queue, uuid, brokers.TakeDelete, "task deleted by an operator before it ran")
}

// ArchiveTask moves the task uuid that waits in queue to the archive with
// reason (RequeueArchived sends it again).
func (s *Server) ArchiveTask(ctx context.Context, queue, uuid, reason string) error {
	if reason == "" {
		reason = "archived by an operator before it ran"
	}
	return s.takeWaiting(ctx, queue, uuid, brokers.TakeArchive, reason)
}

// RunTaskNow makes the task uuid, scheduled or waiting for its retry in
// queue, pending now, at the head of its queue; a pending task is left as
// it is.
func (s *Server) RunTaskNow(ctx context.Context, queue, uuid string) error {
	return s.takeWaiting(ctx, queue, uuid, brokers.TakeRun, "")
}

func (s *Server) takeWaiting(ctx context.Context, queue, uuid string, action brokers.TakeAction, reason string) error {
	if queue == "" {
		queue = s.GetConfig().DefaultQueue
	}
	sig, err := s.store().TakeWaiting(ctx, queue, uuid, action, reason)
	if err != nil {
		return fmt.Errorf("machinist: %s task %s: %w", action, uuid, err)
	}
	if action == brokers.TakeRun {
		return nil
	}
	// Taken out: it will not run. Its state says so.
	if err := s.NewWorker("operator", 1).engine().FailTaken(ctx, sig, reason, false); err != nil {
		return errors.Join(fmt.Errorf("machinist: %s task %s: done, but its FAILURE state was not written", action, uuid), err)
	}
	return nil
}

// AllTasksPage is how many tasks DeleteAllTasks, ArchiveAllTasks and
// RunAllTasks take from Redis at a time (at most 200 on memory://, whose
// scripts run slower): each script run holds Redis for one page only, so
// that acting on a million tasks does not block it.
const AllTasksPage = 1000

// The actions on all of a queue's tasks in one status, a page at a time
// (brokers/iface.Inspector.TakeAll); queue "" is the DefaultQueue. Each
// returns how many tasks it acted on, and stops at the first error (the
// pages before it done) or when ctx ends. Tasks that arrive in the status
// meanwhile may be acted on too. Those deleted or archived get a FAILURE
// state, as DeleteTask and ArchiveTask give them (writeConcurrency
// written at once). An action a status does not take is refused before
// anything is done (brokers/iface.ErrBadTakeAll).

// DeleteAllTasks deletes the tasks of queue with status: pending,
// scheduled, retry or limited (they never run), or archived.
func (s *Server) DeleteAllTasks(ctx context.Context, queue string, status brokers.TaskStatus) (int, error) {
	return s.takeAll(ctx, queue, status, brokers.TakeDelete, "task deleted by an operator before it ran")
}

// ArchiveAllTasks moves the pending, scheduled, retry or limited tasks of
// queue, as status says, to the archive with reason.
func (s *Server) ArchiveAllTasks(ctx context.Context, queue string, status brokers.TaskStatus, reason string) (int, error) {
	if reason == "" {
		reason = "archived by an operator before it ran"
	}
	return s.takeAll(ctx, queue, status, brokers.TakeArchive, reason)
}

// RunAllTasks makes the scheduled or retrying tasks of queue, as status
// says, pending now, at the tail of their queue in the order they were
// due (an aggregation member joins its group); with status archived, it
// sends the archived tasks back to pending, oldest first.
func (s *Server) RunAllTasks(ctx context.Context, queue string, status brokers.TaskStatus) (int, error) {
	return s.takeAll(ctx, queue, status, brokers.TakeRun, "")
}

func (s *Server) takeAll(ctx context.Context, queue string, status brokers.TaskStatus, action brokers.TakeAction, reason string) (int, error) {
	if queue == "" {
		queue = s.GetConfig().DefaultQueue
	}
	if err := store.CheckTakeAll(status, action); err != nil {
		return 0, fmt.Errorf("machinist: %s the %s tasks of %s: %w", action, status, queue, err)
	}
	fail := action != brokers.TakeRun && status != brokers.StatusArchived
	eng := s.NewWorker("operator", 1).engine()
	total := 0
	for {
		page, err := s.store().TakeAll(ctx, queue, status, action, reason, AllTasksPage)
		if err != nil {
			return total, fmt.Errorf("machinist: %s the %s tasks of %s (%d done): %w", action, status, queue, total, err)
		}
		total += len(page.Taken)
		if fail {
			// Taken out: they will not run. Their states say so, written
			// even if ctx ends: the tasks are taken already.
			errs := make([]error, len(page.Taken))
			each(len(page.Taken), func(i int) {
				if err := eng.FailTaken(context.WithoutCancel(ctx), page.Taken[i], reason, false); err != nil {
					errs[i] = fmt.Errorf("task %s: %w", page.Taken[i].UUID, err)
				}
			})
			if err := errors.Join(errs...); err != nil {
				return total, fmt.Errorf("machinist: %s the %s tasks of %s: done, but FAILURE states were not written: %w", action, status, queue, err)
			}
		}
		if !page.More || len(page.Taken) == 0 {
			return total, nil
		}
	}
}

// RemoveQueue removes queue: what Redis keeps of it (its lists, its
// archive, its statistics, a sharded queue's shards) and its name from
// the queues listed. A queue that holds tasks is refused with an error
// wrapping brokers/iface.ErrQueueNotEmpty that counts them, unless force:
// then its waiting tasks are deleted first, with their FAILURE states
// (DeleteAllTasks), and its archive; members waiting in aggregation
// groups go with the queue's keys, without a state. A queue with tasks
// running is refused even with force: cancel them, or let them finish. A
// worker still consuming the queue, or a task sent to it, makes it again.
func (s *Server) RemoveQueue(ctx context.Context, queue string, force bool) error {
	insp, ok := s.GetBroker().(brokers.Inspector)
	if !ok {
		return fmt.Errorf("machinist: remove queue %s: %w", queue, brokers.ErrUnsupported)
	}
	info, err := insp.QueueInfo(ctx, queue)
	if err != nil {
		return fmt.Errorf("machinist: remove queue %s: %w", queue, err)
	}
	if info.Active > 0 {
		return fmt.Errorf("machinist: remove queue %s: %d of its tasks are running (cancel them, or let them finish): %w", queue, info.Active, brokers.ErrQueueNotEmpty)
	}
	held := info.Pending + info.Scheduled + info.Retry + info.Limited + info.Archived + info.Aggregating
	if held > 0 && !force {
		return fmt.Errorf("machinist: remove queue %s: it holds %d tasks (%d pending, %d scheduled, %d retry, %d limited, %d archived, %d aggregating); delete them, or force: %w",
			queue, held, info.Pending, info.Scheduled, info.Retry, info.Limited, info.Archived, info.Aggregating, brokers.ErrQueueNotEmpty)
	}
	if held > 0 {
		for _, status := range []brokers.TaskStatus{brokers.StatusPending, brokers.StatusScheduled, brokers.StatusRetry, brokers.StatusLimited, brokers.StatusArchived} {
			if _, err := s.DeleteAllTasks(ctx, queue, status); err != nil {
				return fmt.Errorf("machinist: remove queue %s: %w", queue, err)
			}
		}
	}
	if err := s.store().RemoveQueue(ctx, queue); err != nil {
		return fmt.Errorf("machinist: remove queue %s: %w", queue, err)
	}
	return nil
}

// ErrTaskFinished is returned by CancelTask for a task that has finished:
// there is nothing to cancel.
var ErrTaskFinished = store.ErrTaskFinished

// CancelOption changes what CancelTask does.
type CancelOption func(*cancelOptions)

type cancelOptions struct{ onError bool }

// WithOnError makes CancelTask send the task's OnError callbacks, with the
// cancellation as their error; by default they are not sent.
func WithOnError() CancelOption { return func(o *cancelOptions) { o.onError = true } }

// cancelOpts returns the options opts set.
func cancelOpts(opts []CancelOption) cancelOptions {
	var o cancelOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

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
	o, st := cancelOpts(opts), s.store()
	if queue == "" {
		queue = s.GetConfig().DefaultQueue
	}
	msg := tasks.CancelledMessage + " by an operator"
	sig, _, err := st.CancelTask(ctx, queue, uuid, msg, 0)
	if err != nil {
		if errors.Is(err, brokers.ErrTaskNotFound) || errors.Is(err, brokers.ErrTaskNotWaiting) {
			if st, serr := st.GetStateContext(ctx, uuid); serr == nil && st.IsCompleted() {
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

// minWorkflowBar is the least time CancelWorkflow keeps the tasks of a
// workflow not sent yet out of their queues.
const minWorkflowBar = time.Hour

// writeConcurrency bounds the writes one operator action has in flight:
// the tasks CancelWorkflow cancels, the states a bulk action writes.
const writeConcurrency = 16

// CancelWorkflow cancels, from any process, the chain, group or chord id
// names: its WorkflowUUID ("chain_…" for a chain, the GroupUUID for a
// group or a chord) or the UUID of any of its tasks (recorded by
// SendChain, SendGroup and SendChord through a backend that records
// workflows, as both of machinist's do). Nothing of it runs afterwards: each task
// that waits is deleted, each that runs is stopped (as CancelTask does),
// and each not sent yet (a chain's later steps, a chord's callback, the
// OnSuccess callbacks that follow them) is kept out of its queue, so that
// a task finishing just now cannot send it: its send is dropped. Every
// task that had not finished gets state FAILURE with an error starting
// with tasks.CancelledMessage, so waiting on any of them, or on the
// workflow, returns an error wrapping tasks.ErrTaskCancelled; tasks that
// had finished keep their outcome. A chord's error path does not run;
// OnError callbacks are not sent unless WithOnError is given (then those
// of each task cancelled whose signature the broker still held, with the
// ones nested in it). A callback whose queue was not set when the workflow
// was sent is looked for in this Server's DefaultQueue. The record lives
// ResultsExpireIn past the latest ETA among the workflow's tasks (so does
// a group's bookkeeping, which lists its members): a workflow still
// running after that is not found, and a task whose state expired counts
// as not finished. A workflow every
// task of which had finished: ErrTaskFinished; an unknown id: an error
// wrapping backends/iface.ErrWorkflowNotFound.
func (s *Server) CancelWorkflow(ctx context.Context, id string, opts ...CancelOption) error {
	o, backend := cancelOpts(opts), s.store()
	if id == "" {
		return fmt.Errorf("machinist: cancel workflow: no UUID given: %w", backends.ErrWorkflowNotFound)
	}
	wf, err := backend.GetWorkflowContext(ctx, id)
	if err != nil {
		return fmt.Errorf("machinist: cancel workflow: %w", err)
	}
	msg := fmt.Sprintf("%s with its %s %s by an operator", tasks.CancelledMessage, wf.Kind, wf.WorkflowUUID)
	if wf.Kind == tasks.WorkflowChord {
		// Won, the chord's election keeps a member from running its
		// error path; lost, the winner's callback is kept out below.
		if _, err := backend.TriggerChordContext(ctx, wf.WorkflowUUID, "cancel_"+wf.WorkflowUUID); err != nil &&
			!errors.Is(err, backends.ErrGroupNotFound) {
			return fmt.Errorf("machinist: cancel workflow %s: elect the chord's canceller: %w", wf.WorkflowUUID, err)
		}
	}
	if wf.Kind == tasks.WorkflowGraph {
		// The broker sends no node of it from now on.
		if _, err := backend.FailGraph(ctx, wf.WorkflowUUID, "", msg); err != nil && !errors.Is(err, backends.ErrWorkflowNotFound) {
			return fmt.Errorf("machinist: cancel workflow %s: %w", wf.WorkflowUUID, err)
		}
	}
	if wf.Members > 0 {
		// The members are listed by the group's bookkeeping, in group
		// order.
		// Purged (PurgeGroupMeta) or expired, the bookkeeping lists no
		// member: what follows them is cancelled still.
		states, err := backend.GroupTaskStatesContext(ctx, wf.WorkflowUUID, wf.Members)
		if err != nil && !errors.Is(err, backends.ErrGroupNotFound) {
			return fmt.Errorf("machinist: cancel workflow %s: read its members: %w", wf.WorkflowUUID, err)
		}
		members := make([]tasks.WorkflowTask, len(states))
		for i, st := range states {
			members[i] = tasks.WorkflowTask{UUID: st.TaskUUID, Name: st.TaskName, Queue: wf.Queue,
				GroupUUID: wf.WorkflowUUID, GroupTaskCount: wf.Members}
		}
		wf.Tasks = append(members, wf.Tasks...)
	}
	cw := &workflowCancel{s: s, c: backend, wf: wf, msg: msg, onError: o.onError,
		bar: max(wf.Lifetime(time.Duration(s.GetConfig().WithDefaults().ResultsExpireIn)*time.Second), minWorkflowBar)}
	return cw.run(ctx)
}

// workflowCancel is one CancelWorkflow.
type workflowCancel struct {
	s       *Server
	c       brokers.Canceller
	wf      *tasks.WorkflowMeta
	msg     string
	onError bool
	bar     time.Duration // how long tasks not sent yet are kept out
}

// taken is what cancelling one task of a workflow came to.
type taken struct {
	sig     *tasks.Signature // whose FAILURE to write; nil: none
	unsent  bool             // kept out before it was sent: sig only names it
	stopped bool             // this cancellation stopped it
}

// run cancels every task of the workflow, then writes the FAILURE states
// (and sends the OnError callbacks) of those that had not finished. Each
// task is cancelled on its own, in any order: one cancelled, or kept out,
// can neither run nor send what follows it.
func (cw *workflowCancel) run(ctx context.Context) error {
	n := len(cw.wf.Tasks)
	results := make([]taken, n)
	errs := make([]error, n)
	each(n, func(i int) { results[i], errs[i] = cw.cancel(ctx, cw.wf.Tasks[i]) })
	// A task kept out before it was sent has its signature, with its
	// OnError callbacks, nested in one that the broker gave back, if any
	// did.
	known := map[string]*tasks.Signature{}
	stopped := false
	for _, r := range results {
		if !r.unsent {
			learn(known, r.sig, 0)
		}
		stopped = stopped || r.stopped
	}
	for i, r := range results {
		if r.unsent {
			if k := known[r.sig.UUID]; k != nil {
				results[i].sig = k
			}
		}
	}
	worker := cw.s.NewWorker("operator", 1).engine()
	each(n, func(i int) {
		sig := results[i].sig
		if sig == nil {
			return
		}
		if err := worker.FailTaken(ctx, sig, cw.msg, cw.onError); err != nil {
			errs[i] = fmt.Errorf("task %s: cancelled, but its FAILURE state or callbacks were not all written: %w", sig.UUID, err)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("machinist: cancel workflow %s: %w", cw.wf.WorkflowUUID, err)
	}
	if !stopped {
		return fmt.Errorf("machinist: cancel workflow %s: every task has finished: %w", cw.wf.WorkflowUUID, ErrTaskFinished)
	}
	return nil
}

// cancel cancels t, one task of the workflow: a task the broker held is
// stopped, with its signature to fail; one not sent yet is kept out, with
// a signature that names it; a task kept out while it was being sent,
// whose sender wrote its FAILURE first, was stopped too, with nothing to
// write; one that has finished or is finishing was not stopped.
func (cw *workflowCancel) cancel(ctx context.Context, t tasks.WorkflowTask) (taken, error) {
	queue := t.Queue
	if queue == "" {
		queue = cw.s.GetConfig().DefaultQueue
	}
	sig, _, err := cw.c.CancelTask(ctx, queue, t.UUID, cw.msg, cw.bar)
	switch {
	case errors.Is(err, brokers.ErrTaskNotWaiting):
		return taken{}, nil // finishing, finished and kept, archived, or already kept out
	case err != nil:
		return taken{}, fmt.Errorf("task %s: %w", t.UUID, err)
	case sig != nil:
		return taken{sig: sig, stopped: true}, nil
	}
	// Not in its queue, and kept out from now on: either not sent yet, or
	// finished (then its state is final: a queue lets a task go only
	// after its outcome is written).
	st, err := cw.s.store().GetStateContext(ctx, t.UUID)
	switch {
	case err == nil && st.IsFailure() && strings.HasPrefix(st.Error, cw.msg):
		return taken{stopped: true}, nil // its send, refused just now, wrote it
	case err == nil && st.IsCompleted():
		return taken{}, nil
	case err != nil && !errors.Is(err, backends.ErrStateNotFound):
		return taken{}, fmt.Errorf("task %s: kept out, but its state cannot be read: %w", t.UUID, err)
	}
	return taken{sig: t.Signature(cw.wf.WorkflowUUID), unsent: true, stopped: true}, nil
}

// learn notes sig, and the signatures nested in it, in known.
func learn(known map[string]*tasks.Signature, sig *tasks.Signature, depth int) {
	if sig == nil || depth > 1000 {
		return
	}
	if known[sig.UUID] == nil {
		known[sig.UUID] = sig
	}
	for _, next := range sig.OnSuccess {
		learn(known, next, depth+1)
	}
	learn(known, sig.ChordCallback, depth+1)
}

// each calls fn(i) for i in [0, n), at most writeConcurrency at
// a time, and returns when all have returned.
func each(n int, fn func(i int)) {
	sem := make(chan struct{}, writeConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}
