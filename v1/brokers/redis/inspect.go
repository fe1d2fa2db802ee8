package redisbroker

import (
	"context"
	"fmt"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

var (
	_ brokers.Monitor   = (*Broker)(nil)
	_ brokers.Inspector = (*Broker)(nil)
	_ brokers.Canceller = (*Broker)(nil)
)

// WatchCancels calls fn with the UUID of each task cancelled,
// from a subscription of its own, until ctx ends or the broker is closed.
func (b *Broker) WatchCancels(ctx context.Context, fn func(uuid string)) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-b.ctx.Done(): // Close
			stop()
		case <-ctx.Done():
		}
	}()
	err := b.store.WatchCancels(ctx, fn)
	if b.ctx.Err() != nil {
		return wrap(fmt.Errorf("watch cancellations: %w", brokers.ErrClosed))
	}
	return wrap(err)
}

// GetPendingTasks lists every pending task of queue (DefaultQueue when
// empty), in the order Fetch takes them. It is machinery's method.
func (b *Broker) GetPendingTasks(queue string) ([]*tasks.Signature, error) {
	if queue == "" {
		queue = b.opts.DefaultQueue
	}
	infos, err := b.ListTasks(context.Background(), queue, brokers.StatusPending, 0, 0)
	return signatures(infos), err
}

// GetDelayedTasks lists every scheduled and retrying task of every queue.
// It is machinery's method.
func (b *Broker) GetDelayedTasks() ([]*tasks.Signature, error) {
	ctx := context.Background()
	queues, err := b.Queues(ctx)
	if err != nil {
		return nil, err
	}
	var out []*tasks.Signature
	for _, q := range queues {
		for _, st := range []brokers.TaskStatus{brokers.StatusScheduled, brokers.StatusRetry} {
			infos, err := b.ListTasks(ctx, q, st, 0, 0)
			if err != nil {
				return nil, err
			}
			out = append(out, signatures(infos)...)
		}
	}
	return out, nil
}

func signatures(infos []*brokers.TaskInfo) []*tasks.Signature {
	out := make([]*tasks.Signature, len(infos))
	for i, info := range infos {
		out[i] = info.Signature
	}
	return out
}

// Heartbeat records w alive for ttl and adds counts to their queues'
// statistics; see brokers.Monitor.
func (b *Broker) Heartbeat(ctx context.Context, w *brokers.WorkerInfo, ttl time.Duration, counts ...brokers.StatCount) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.Heartbeat(ctx, w, ttl, counts...))
}

// Unregister forgets the worker id.
func (b *Broker) Unregister(ctx context.Context, id string) error {
	return wrap(b.store.Unregister(ctx, id))
}

// Workers lists the workers alive.
func (b *Broker) Workers(ctx context.Context) ([]*brokers.WorkerInfo, error) {
	ws, err := b.store.Workers(ctx)
	return ws, wrap(err)
}

// QueueHistory returns the counts of queue by day over the last
// HistoryDays days.
func (b *Broker) QueueHistory(ctx context.Context, queue string) ([]brokers.DayCount, error) {
	h, err := b.store.QueueHistory(ctx, queue)
	return h, wrap(err)
}

// QueueStats returns the counts of queue over the last StatsWindow.
func (b *Broker) QueueStats(ctx context.Context, queue string) (*brokers.QueueStats, error) {
	st, err := b.store.QueueStats(ctx, queue)
	return st, wrap(err)
}
