package pair

import (
	"context"
	"time"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// The capabilities a broker may lack: each passes to the broker when it has
// it, else fails with store.ErrUnsupported.

func (s *Store) ClaimLease(ctx context.Context, key string, lease, keep time.Duration) (store.ClaimResult, error) {
	if s.claimer == nil {
		return store.ClaimResult{}, unsupported("claim tasks once across processes", s.broker)
	}
	return s.claimer.ClaimLease(ctx, key, lease, keep)
}

func (s *Store) CompleteClaim(ctx context.Context, key, token string) error {
	if s.claimer == nil {
		return unsupported("claim tasks once across processes", s.broker)
	}
	return s.claimer.CompleteClaim(ctx, key, token)
}

func (s *Store) Holds(ctx context.Context, sigs ...*tasks.Signature) ([]bool, error) {
	if s.claimer == nil {
		return nil, unsupported("claim tasks once across processes", s.broker)
	}
	return s.claimer.Holds(ctx, sigs...)
}

func (s *Store) RecordPeriodic(ctx context.Context, e *store.PeriodicEntry) error {
	if s.claimer == nil {
		return unsupported("claim tasks once across processes", s.broker)
	}
	return s.claimer.RecordPeriodic(ctx, e)
}

func (s *Store) RecordPeriodicTick(ctx context.Context, name, spec string, last store.PeriodicTick) error {
	if s.claimer == nil {
		return unsupported("claim tasks once across processes", s.broker)
	}
	return s.claimer.RecordPeriodicTick(ctx, name, spec, last)
}

func (s *Store) PeriodicEntries(ctx context.Context) ([]*store.PeriodicEntry, error) {
	if s.claimer == nil {
		return nil, unsupported("claim tasks once across processes", s.broker)
	}
	return s.claimer.PeriodicEntries(ctx)
}

func (s *Store) PauseQueue(ctx context.Context, queue string) error {
	if s.pauser == nil {
		return unsupported("pause queues", s.broker)
	}
	return s.pauser.PauseQueue(ctx, queue)
}

func (s *Store) ResumeQueue(ctx context.Context, queue string) error {
	if s.pauser == nil {
		return unsupported("pause queues", s.broker)
	}
	return s.pauser.ResumeQueue(ctx, queue)
}

func (s *Store) Queues(ctx context.Context) ([]string, error) {
	if s.inspector == nil {
		return nil, unsupported("list its queues", s.broker)
	}
	return s.inspector.Queues(ctx)
}

func (s *Store) QueueInfo(ctx context.Context, queue string) (*store.QueueInfo, error) {
	if s.inspector == nil {
		return nil, unsupported("list its queues", s.broker)
	}
	return s.inspector.QueueInfo(ctx, queue)
}

func (s *Store) ListTasks(ctx context.Context, queue string, status store.TaskStatus, offset, limit int) ([]*store.TaskInfo, error) {
	if s.inspector == nil {
		return nil, unsupported("list its queues", s.broker)
	}
	return s.inspector.ListTasks(ctx, queue, status, offset, limit)
}

func (s *Store) GetTask(ctx context.Context, queue, uuid string) (*store.TaskInfo, error) {
	if s.inspector == nil {
		return nil, unsupported("list its queues", s.broker)
	}
	return s.inspector.GetTask(ctx, queue, uuid)
}

func (s *Store) RequeueArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	if s.inspector == nil {
		return 0, unsupported("list its queues", s.broker)
	}
	return s.inspector.RequeueArchived(ctx, queue, uuids...)
}

func (s *Store) DeleteArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	if s.inspector == nil {
		return 0, unsupported("list its queues", s.broker)
	}
	return s.inspector.DeleteArchived(ctx, queue, uuids...)
}

func (s *Store) TakeWaiting(ctx context.Context, queue, uuid string, action store.TakeAction, reason string) (*tasks.Signature, error) {
	if s.inspector == nil {
		return nil, unsupported("list its queues", s.broker)
	}
	return s.inspector.TakeWaiting(ctx, queue, uuid, action, reason)
}

func (s *Store) TakeAll(ctx context.Context, queue string, status store.TaskStatus, action store.TakeAction, reason string, n int) (*store.TakenPage, error) {
	if s.inspector == nil {
		return nil, unsupported("list its queues", s.broker)
	}
	return s.inspector.TakeAll(ctx, queue, status, action, reason, n)
}

func (s *Store) RemoveQueue(ctx context.Context, queue string) error {
	if s.inspector == nil {
		return unsupported("list its queues", s.broker)
	}
	return s.inspector.RemoveQueue(ctx, queue)
}

func (s *Store) CancelTask(ctx context.Context, queue, uuid, reason string, bar time.Duration) (*tasks.Signature, bool, error) {
	if s.canceller == nil {
		return nil, false, unsupported("cancel tasks", s.broker)
	}
	return s.canceller.CancelTask(ctx, queue, uuid, reason, bar)
}

func (s *Store) WatchCancels(ctx context.Context, fn func(uuid string)) error {
	if s.canceller == nil {
		return unsupported("cancel tasks", s.broker)
	}
	return s.canceller.WatchCancels(ctx, fn)
}

func (s *Store) AnnounceAggregators(ctx context.Context, queues []string, policies map[string]store.AggregationPolicy, ttl time.Duration) error {
	if s.aggregator == nil {
		return unsupported("aggregate tasks", s.broker)
	}
	return s.aggregator.AnnounceAggregators(ctx, queues, policies, ttl)
}

func (s *Store) ClaimBatch(ctx context.Context, queues []string, names *store.TaskNames) (*store.Batch, error) {
	if s.aggregator == nil {
		return nil, unsupported("aggregate tasks", s.broker)
	}
	return s.aggregator.ClaimBatch(ctx, queues, names)
}

func (s *Store) NextDue(ctx context.Context, queues []string, names *store.TaskNames) (time.Time, error) {
	if s.aggregator == nil {
		return time.Time{}, unsupported("aggregate tasks", s.broker)
	}
	return s.aggregator.NextDue(ctx, queues, names)
}

func (s *Store) WaitDue(ctx context.Context, queues []string, names *store.TaskNames, max time.Duration) error {
	if s.aggregator == nil {
		return unsupported("aggregate tasks", s.broker)
	}
	return s.aggregator.WaitDue(ctx, queues, names, max)
}

func (s *Store) CompleteBatch(ctx context.Context, b *store.Batch, aggregate *tasks.Signature) error {
	if s.aggregator == nil {
		return unsupported("aggregate tasks", s.broker)
	}
	return s.aggregator.CompleteBatch(ctx, b, aggregate)
}

func (s *Store) ExtendBatch(ctx context.Context, b *store.Batch) error {
	if s.aggregator == nil {
		return unsupported("aggregate tasks", s.broker)
	}
	return s.aggregator.ExtendBatch(ctx, b)
}

func (s *Store) RetryBatch(ctx context.Context, b *store.Batch, at time.Time, errMsg string) error {
	if s.aggregator == nil {
		return unsupported("aggregate tasks", s.broker)
	}
	return s.aggregator.RetryBatch(ctx, b, at, errMsg)
}

func (s *Store) ArchiveBatch(ctx context.Context, b *store.Batch, reason string) error {
	if s.aggregator == nil {
		return unsupported("aggregate tasks", s.broker)
	}
	return s.aggregator.ArchiveBatch(ctx, b, reason)
}

func (s *Store) Aggregations(ctx context.Context, queue string) ([]*store.AggregationInfo, error) {
	if s.aggregator == nil {
		return nil, unsupported("aggregate tasks", s.broker)
	}
	return s.aggregator.Aggregations(ctx, queue)
}

func (s *Store) Heartbeat(ctx context.Context, w *store.WorkerInfo, ttl time.Duration, counts ...store.StatCount) error {
	if s.monitor == nil {
		return unsupported("keep its workers", s.broker)
	}
	return s.monitor.Heartbeat(ctx, w, ttl, counts...)
}

func (s *Store) Unregister(ctx context.Context, id string) error {
	if s.monitor == nil {
		return unsupported("keep its workers", s.broker)
	}
	return s.monitor.Unregister(ctx, id)
}

func (s *Store) Workers(ctx context.Context) ([]*store.WorkerInfo, error) {
	if s.monitor == nil {
		return nil, unsupported("keep its workers", s.broker)
	}
	return s.monitor.Workers(ctx)
}

func (s *Store) QueueHistory(ctx context.Context, queue string) ([]store.DayCount, error) {
	if s.monitor == nil {
		return nil, unsupported("keep its workers", s.broker)
	}
	return s.monitor.QueueHistory(ctx, queue)
}

func (s *Store) QueueStats(ctx context.Context, queue string) (*store.QueueStats, error) {
	if s.monitor == nil {
		return nil, unsupported("keep its workers", s.broker)
	}
	return s.monitor.QueueStats(ctx, queue)
}

// WatchFinished watches a task's state where the backend can; elsewhere
// the channel is nil and waits only poll.
func (s *Store) WatchFinished(ctx context.Context, taskUUID string) (<-chan struct{}, func()) {
	return s.states.WatchFinished(ctx, taskUUID)
}

// GetStateInContext reads a task's state knowing its queue where the
// backend reads it sooner that way.
func (s *Store) GetStateInContext(ctx context.Context, queue, taskUUID string) (*tasks.TaskState, error) {
	return s.states.GetStateInContext(ctx, queue, taskUUID)
}

// Reader returns backend as results read it: with a read by queue and a
// watch of a task's end where the backend has them, else a plain read
// and no watch (waits poll). A nil backend gives nil.
func Reader(mb store.MachineryBackend) store.StateReader {
	backend := ContextBackend(mb)
	if backend == nil {
		return nil
	}
	if r, ok := backend.(store.StateReader); ok {
		return r
	}
	r := &reader{Backend: backend}
	r.notifier, _ = backend.(store.Notifier)
	r.inQueue, _ = backend.(store.QueueStateReader)
	return r
}

// reader is a backend that lacks some of store.StateReader.
type reader struct {
	store.Backend
	notifier store.Notifier
	inQueue  store.QueueStateReader
}

func (r *reader) WatchFinished(ctx context.Context, taskUUID string) (<-chan struct{}, func()) {
	if r.notifier == nil {
		return nil, func() {}
	}
	return r.notifier.WatchFinished(ctx, taskUUID)
}

func (r *reader) GetStateInContext(ctx context.Context, queue, taskUUID string) (*tasks.TaskState, error) {
	if r.inQueue == nil {
		return r.GetStateContext(ctx, taskUUID)
	}
	return r.inQueue.GetStateInContext(ctx, queue, taskUUID)
}

// RecordGraph writes the graph of a workflow of any shape.
func (s *Store) RecordGraph(ctx context.Context, g *store.Graph) error {
	if s.graphs == nil {
		return unsupported("run workflows of any shape", s.broker)
	}
	return s.graphs.RecordGraph(ctx, g)
}

// WithdrawGraph deletes a graph RecordGraph wrote for a send that failed.
func (s *Store) WithdrawGraph(id string) error {
	if s.graphs == nil {
		return unsupported("run workflows of any shape", s.broker)
	}
	return s.graphs.WithdrawGraph(id)
}

// NodeSucceeded records a node's success and returns the nodes ready.
func (s *Store) NodeSucceeded(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) ([]*tasks.Signature, error) {
	if s.graphs == nil {
		return nil, unsupported("run workflows of any shape", s.broker)
	}
	return s.graphs.NodeSucceeded(ctx, sig, results)
}

// FailGraph fails a workflow of any shape.
func (s *Store) FailGraph(ctx context.Context, id, node, reason string) (*store.GraphFailure, error) {
	if s.graphs == nil {
		return nil, unsupported("run workflows of any shape", s.broker)
	}
	return s.graphs.FailGraph(ctx, id, node, reason)
}

// AppendEvent appends e to the event stream of task uuid (store.Events).
func (s *Store) AppendEvent(ctx context.Context, uuid string, e tasks.Event) error {
	ev, ok := s.Backend.(store.Events)
	if !ok {
		return unsupported("keep a task's events", s.Backend)
	}
	return ev.AppendEvent(ctx, uuid, e)
}

// ReadEvents reads the event stream of task uuid (store.Events).
func (s *Store) ReadEvents(ctx context.Context, uuid, after string, max int, block time.Duration) ([]tasks.Event, error) {
	ev, ok := s.Backend.(store.Events)
	if !ok {
		return nil, unsupported("read a task's events", s.Backend)
	}
	return ev.ReadEvents(ctx, uuid, after, max, block)
}

// LastEvents returns the last n events of task uuid (store.Events).
func (s *Store) LastEvents(ctx context.Context, uuid string, n int) ([]tasks.Event, error) {
	ev, ok := s.Backend.(store.Events)
	if !ok {
		return nil, unsupported("read a task's events", s.Backend)
	}
	return ev.LastEvents(ctx, uuid, n)
}

// ReadTaskData returns what d's task keeps (store.TaskData).
func (s *Store) ReadTaskData(ctx context.Context, d *store.Delivery) (map[string][]byte, error) {
	td, ok := s.broker.(store.TaskData)
	if !ok {
		return nil, unsupported("keep a running task's checkpoints and steps", s.broker)
	}
	return td.ReadTaskData(ctx, d)
}

// WriteTaskData keeps data for d's task under its lease.
func (s *Store) WriteTaskData(ctx context.Context, d *store.Delivery, data map[string][]byte) error {
	td, ok := s.broker.(store.TaskData)
	if !ok {
		return unsupported("keep a running task's checkpoints and steps", s.broker)
	}
	return td.WriteTaskData(ctx, d, data)
}

// TaskProgress returns a running task's progress.
func (s *Store) TaskProgress(ctx context.Context, sig *tasks.Signature) (*tasks.Progress, error) {
	td, ok := s.broker.(store.TaskData)
	if !ok {
		return nil, unsupported("read a running task's progress", s.broker)
	}
	return td.TaskProgress(ctx, sig)
}

// WatchGraph watches a workflow of any shape until it is final; nil
// when the broker cannot.
func (s *Store) WatchGraph(ctx context.Context, id string) (<-chan struct{}, func()) {
	if s.graphs == nil {
		return nil, func() {}
	}
	return s.graphs.WatchGraph(ctx, id)
}

// GraphStatus returns where a workflow of any shape stands.
func (s *Store) GraphStatus(ctx context.Context, id string) (*tasks.WorkflowStatus, error) {
	if s.graphs == nil {
		return nil, unsupported("run workflows of any shape", s.broker)
	}
	return s.graphs.GraphStatus(ctx, id)
}
