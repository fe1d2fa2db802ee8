// Package ops is what the machinist command and the dashboard show and do:
// queues with their sizes and recent throughput, tasks wherever they are,
// workflows drawn as graphs, workers alive, aggregation groups, and the
// operator's actions. It reads through a Server's broker and backend, with
// paged reads only (no key scans), so that it stays fast on queues of
// millions of tasks.
package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/b6192125/machinist/internal/pair"
	"github.com/b6192125/machinist/internal/periodic"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Ops reads and drives what a store holds.
type Ops struct {
	st *pair.Store
	// The Server's actions on one task or workflow, which write the
	// states and send the callbacks the action calls for.
	cancelTask     func(ctx context.Context, queue, uuid string) error
	cancelWorkflow func(ctx context.Context, id string) error
	deleteTask     func(ctx context.Context, queue, uuid string) error
	archiveTask    func(ctx context.Context, queue, uuid, reason string) error
	runTaskNow     func(ctx context.Context, queue, uuid string) error
	// And on all of a queue's tasks in one status.
	deleteAll   func(ctx context.Context, queue string, status store.TaskStatus) (int, error)
	archiveAll  func(ctx context.Context, queue string, status store.TaskStatus, reason string) (int, error)
	runAll      func(ctx context.Context, queue string, status store.TaskStatus) (int, error)
	removeQueue func(ctx context.Context, queue string, force bool) error
}

// Server is what Ops drives besides the store: machinist's Server. O is
// its CancelOption, which this package does not name (it imports nothing
// of the public packages above it).
type Server[O any] interface {
	CancelTask(ctx context.Context, queue, uuid string, opts ...O) error
	CancelWorkflow(ctx context.Context, id string, opts ...O) error
	DeleteTask(ctx context.Context, queue, uuid string) error
	ArchiveTask(ctx context.Context, queue, uuid, reason string) error
	RunTaskNow(ctx context.Context, queue, uuid string) error
	DeleteAllTasks(ctx context.Context, queue string, status store.TaskStatus) (int, error)
	ArchiveAllTasks(ctx context.Context, queue string, status store.TaskStatus, reason string) (int, error)
	RunAllTasks(ctx context.Context, queue string, status store.TaskStatus) (int, error)
	RemoveQueue(ctx context.Context, queue string, force bool) error
}

// New returns the Ops of st, acting through srv. st's broker must be able
// to list what it holds (both of machinist's brokers can).
func New[O any](st *pair.Store, srv Server[O]) (*Ops, error) {
	if !st.Inspects() {
		return nil, fmt.Errorf("the broker (%T) cannot list its queues: %w", st.Broker(), ErrUnsupported)
	}
	return &Ops{
		st:             st,
		cancelTask:     func(ctx context.Context, queue, uuid string) error { return srv.CancelTask(ctx, queue, uuid) },
		cancelWorkflow: func(ctx context.Context, id string) error { return srv.CancelWorkflow(ctx, id) },
		deleteTask:     srv.DeleteTask,
		archiveTask:    srv.ArchiveTask,
		runTaskNow:     srv.RunTaskNow,
		deleteAll:      srv.DeleteAllTasks,
		archiveAll:     srv.ArchiveAllTasks,
		runAll:         srv.RunAllTasks,
		removeQueue:    srv.RemoveQueue,
	}, nil
}

// Queue is a queue's sizes and recent throughput.
type Queue struct {
	store.QueueInfo
	// Processed and Failed count the tasks that finished (and those that
	// failed) in the last minute and the last hour, as the workers
	// reported them with their heartbeats.
	Processed, Failed Window
	// Stats are the counts by period over the last hour (nil when the
	// broker keeps none).
	Stats *store.QueueStats `json:"-"`
}

// Window counts over the last minute and the last hour.
type Window struct{ Minute, Hour int }

// Count is how many tasks q holds with status (0 for one ListTasks does
// not take).
func (q *Queue) Count(status store.TaskStatus) int {
	n, _ := q.QueueInfo.Count(status)
	return n
}

// Sum returns the sums of the counts of qs, as a Queue named "".
func Sum(qs []*Queue) *Queue {
	var t Queue
	for _, q := range qs {
		t.QueueInfo.Add(&q.QueueInfo)
		t.Processed.Minute += q.Processed.Minute
		t.Processed.Hour += q.Processed.Hour
		t.Failed.Minute += q.Failed.Minute
		t.Failed.Hour += q.Failed.Hour
	}
	return &t
}

// History returns queue's counts by day over the last store.HistoryDays
// days, today last; ErrQueueNotFound for a queue that does not exist.
func (o *Ops) History(ctx context.Context, queue string) ([]store.DayCount, error) {
	if err := o.exists(ctx, queue); err != nil {
		return nil, err
	}
	return o.st.QueueHistory(ctx, queue)
}

// Queues returns every queue, by name.
func (o *Ops) Queues(ctx context.Context) ([]*Queue, error) {
	names, err := o.st.Queues(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*Queue, len(names))
	err = each(ctx, len(names), func(ctx context.Context, i int) error {
		q, err := o.queue(ctx, names[i])
		out[i] = q
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Queue returns the queue name: ErrQueueNotFound when no task was ever
// sent to it.
func (o *Ops) Queue(ctx context.Context, name string) (*Queue, error) {
	if err := o.exists(ctx, name); err != nil {
		return nil, err
	}
	return o.queue(ctx, name)
}

// exists returns ErrQueueNotFound when no queue is named name.
func (o *Ops) exists(ctx context.Context, name string) error {
	names, err := o.st.Queues(ctx)
	if err != nil {
		return err
	}
	if !slices.Contains(names, name) {
		return fmt.Errorf("queue %q: %w", name, ErrQueueNotFound)
	}
	return nil
}

func (o *Ops) queue(ctx context.Context, name string) (*Queue, error) {
	info, err := o.st.QueueInfo(ctx, name)
	if err != nil {
		return nil, err
	}
	q := &Queue{QueueInfo: *info}
	if st, err := o.st.QueueStats(ctx, name); !errors.Is(err, ErrUnsupported) {
		if err != nil {
			return nil, err
		}
		q.Stats = st
		now := time.Now()
		q.Processed.Minute, q.Failed.Minute = st.Since(now.Add(-time.Minute))
		q.Processed.Hour, q.Failed.Hour = st.Since(now.Add(-time.Hour))
	}
	return q, nil
}

// Statuses are the statuses ListTasks takes, in the order they are shown.
var Statuses = []store.TaskStatus{
	store.StatusPending, store.StatusActive, store.StatusScheduled,
	store.StatusRetry, store.StatusArchived, store.StatusLimited,
	store.StatusCompleted,
}

// ParseStatus returns the status named s, or an error listing them.
func ParseStatus(s string) (store.TaskStatus, error) {
	for _, st := range Statuses {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown task state %q (want one of %v)", s, Statuses)
}

// Tasks lists a page of the tasks of queue with status.
func (o *Ops) Tasks(ctx context.Context, queue string, status store.TaskStatus, offset, limit int) ([]*store.TaskInfo, error) {
	if limit < 1 {
		return nil, fmt.Errorf("list tasks: a page of %d tasks (want at least 1)", limit)
	}
	return o.st.ListTasks(ctx, queue, status, max(offset, 0), limit)
}

// Task is what is known of one task: where it is in its queue, its state
// in the result backend, and the worker running it.
type Task struct {
	UUID string
	// Queue is the queue that holds it ("" when none does any more).
	Queue string
	// Info is where it is in Queue (nil when no queue holds it: it
	// finished and was forgotten, or was deleted).
	Info *store.TaskInfo
	// State is its state in the result backend (nil when there is none:
	// never written, or expired).
	State *tasks.TaskState
	// Holder is the worker whose heartbeat lists it running.
	Holder *store.WorkerInfo
	// Attempts estimates its runs from what its queue counts: those
	// retried, those recovered after a lost lease, the one going on, and
	// the one that finished it (kept as completed, or archived with the
	// error of its run rather than an operator's reason). Not counted: a
	// run stopped by a cancellation, and, for a task requeued from the
	// archive, the runs before. 0 when no queue holds it any more (not
	// known).
	Attempts int `json:",omitempty"`
	// Progress is the last progress it reported (tasks.SetProgress):
	// what its worker last wrote while a queue holds it, else what its
	// final state carries; nil for none.
	Progress *tasks.Progress `json:",omitempty"`
	// Events are the last TaskEventsShown events of its stream
	// (tasks.Emit, its progress), oldest first.
	Events []tasks.Event `json:",omitempty"`
}

// TaskEventsShown is how many of a task's last events Task reads.
const TaskEventsShown = 50

// Task finds the task uuid: in queue, or when queue is "" in every queue
// (one read per queue, all at once). A task neither a queue nor the
// backend knows: an error wrapping brokers' ErrTaskNotFound.
func (o *Ops) Task(ctx context.Context, uuid, queue string) (*Task, error) {
	if uuid == "" {
		return nil, errors.New("no task UUID given")
	}
	queues := []string{queue}
	if queue == "" {
		var err error
		if queues, err = o.st.Queues(ctx); err != nil {
			return nil, err
		}
	}
	t := &Task{UUID: uuid}
	var mu sync.Mutex
	err := each(ctx, len(queues), func(ctx context.Context, i int) error {
		info, err := o.st.GetTask(ctx, queues[i], uuid)
		if errors.Is(err, store.ErrTaskNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if t.Info == nil {
			t.Info, t.Queue = info, queues[i]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	st, err := o.st.GetStateContext(ctx, uuid)
	switch {
	case err == nil:
		t.State = st
	case !errors.Is(err, store.ErrStateNotFound):
		return nil, err
	}
	if t.Info == nil && t.State == nil {
		return nil, fmt.Errorf("task %s: %w", uuid, store.ErrTaskNotFound)
	}
	if t.Info != nil {
		t.Attempts = attempts(t.Info, t.State)
		in := *t.Info.Signature
		in.RoutingKey = t.Queue
		if t.Progress, err = o.st.TaskProgress(ctx, &in); err != nil && !errors.Is(err, ErrUnsupported) {
			return nil, err
		}
	}
	if t.Progress == nil && t.State != nil {
		t.Progress = t.State.Progress
	}
	if t.Events, err = o.st.LastEvents(ctx, uuid, TaskEventsShown); err != nil && !errors.Is(err, ErrUnsupported) {
		return nil, err
	}
	if t.Info != nil && t.Info.Status == store.StatusActive {
		ws, err := o.st.Workers(ctx)
		if err != nil && !errors.Is(err, ErrUnsupported) {
			return nil, err
		}
		for _, w := range ws {
			if slices.Contains(w.Running, uuid) {
				t.Holder = w
				break
			}
		}
	}
	return t, nil
}

// attempts counts the runs of a task that info describes, with state
// (nil when there is none): see Task.Attempts.
func attempts(info *store.TaskInfo, state *tasks.TaskState) int {
	n := info.Retried + info.Recovered
	switch {
	case info.Status == store.StatusActive, info.Status == store.StatusCompleted:
		n++
	case info.Status == store.StatusArchived && state != nil && state.State == tasks.StateFailure &&
		state.Error == info.LastError && !operatorReason(info.LastError):
		n++ // its run failed for good
	}
	return n
}

// operatorReason reports whether reason is an operator's (archived,
// deleted or cancelled before or while it ran) rather than a run's error.
func operatorReason(reason string) bool {
	return strings.HasPrefix(reason, tasks.CancelledMessage) || strings.Contains(reason, "by an operator")
}

// Workers lists the workers alive (ErrUnsupported when the broker keeps
// none).
func (o *Ops) Workers(ctx context.Context) ([]*store.WorkerInfo, error) {
	ws, err := o.st.Workers(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	return ws, nil
}

// Aggregations lists the aggregation groups waiting in queue.
func (o *Ops) Aggregations(ctx context.Context, queue string) ([]*store.AggregationInfo, error) {
	gs, err := o.st.Aggregations(ctx, queue)
	if err != nil {
		return nil, fmt.Errorf("list aggregation groups: %w", err)
	}
	return gs, nil
}

// each runs fn(0) … fn(n-1), at most 16 at once, and returns the first
// error.
func each(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, 16)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if errs[i] = fn(ctx, i); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return errors.Join(errs...)
}

// TaskEvents returns up to max events of task uuid's stream after the
// event after ("" from the start), read after the task's state, which it
// returns too (nil when there is none): when that state is final, the
// events returned and those before them are all there will be.
func (o *Ops) TaskEvents(ctx context.Context, uuid, after string, max int) ([]tasks.Event, *tasks.TaskState, error) {
	st, err := o.st.GetStateContext(ctx, uuid)
	if err != nil && !errors.Is(err, store.ErrStateNotFound) {
		return nil, nil, err
	}
	events, err := o.st.ReadEvents(ctx, uuid, after, max, 0)
	if err != nil {
		return nil, nil, err
	}
	return events, st, nil
}

// LevelCounts reads "9: 3, 0: 120": the pending tasks of each priority
// level, highest first.
func LevelCounts(levels map[int]int) string {
	keys := slices.Sorted(maps.Keys(levels))
	slices.Reverse(keys)
	parts := make([]string, len(keys))
	for i, l := range keys {
		parts[i] = fmt.Sprintf("%d: %d", l, levels[l])
	}
	return strings.Join(parts, ", ")
}

// Periodic is a periodic entry as recorded, with when it runs next and
// how its last tick ended.
type Periodic struct {
	store.PeriodicEntry
	// Next is its next tick by its spec (zero for a spec that cannot be
	// read).
	Next time.Time
	// Outcome is the last tick's state (SUCCESS, FAILURE, PENDING, …; for
	// a group, its members' states counted, "2 SUCCESS"), "" before any
	// tick, "unknown" once the state has expired.
	Outcome string
}

// Periodic lists the periodic tasks the schedulers recorded, by name.
func (o *Ops) Periodic(ctx context.Context) ([]*Periodic, error) {
	entries, err := o.st.PeriodicEntries(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]*Periodic, len(entries))
	for i, e := range entries {
		p := &Periodic{PeriodicEntry: *e}
		p.Next, _ = periodic.NextTick(e.Spec, now)
		switch last := e.Last; {
		case last.Task != "":
			p.Outcome = "unknown"
			if st, err := o.st.GetStateContext(ctx, last.Task); err == nil && st != nil {
				p.Outcome = st.State
			}
		case last.Group != "":
			p.Outcome = "unknown"
			if states, err := o.st.GroupTaskStatesContext(ctx, last.Group, last.GroupCount); err == nil {
				p.Outcome = countStates(states)
			}
		}
		out[i] = p
	}
	return out, nil
}

// countStates reads "2 SUCCESS, 1 FAILURE": states counted by state, in
// the order each first appears.
func countStates(states []*tasks.TaskState) string {
	var order []string
	n := map[string]int{}
	for _, st := range states {
		s := "PENDING"
		if st != nil {
			s = st.State
		}
		if n[s] == 0 {
			order = append(order, s)
		}
		n[s]++
	}
	parts := make([]string, len(order))
	for i, s := range order {
		parts[i] = fmt.Sprintf("%d %s", n[s], s)
	}
	return strings.Join(parts, ", ")
}
