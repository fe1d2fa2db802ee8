package redisbroker

import (
	"context"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

var _ store.TaskData = (*Broker)(nil)

// ReadTaskData returns what d's task keeps: its checkpoint, its steps'
// results, its progress (see store.TaskData).
func (b *Broker) ReadTaskData(ctx context.Context, d *store.Delivery) (map[string][]byte, error) {
	return b.store.ReadTaskData(ctx, d)
}

// WriteTaskData keeps data for d's task while the caller holds its lease.
func (b *Broker) WriteTaskData(ctx context.Context, d *store.Delivery, data map[string][]byte) error {
	return b.store.WriteTaskData(ctx, d, data)
}

// TaskProgress returns the progress a running task last wrote.
func (b *Broker) TaskProgress(ctx context.Context, sig *tasks.Signature) (*tasks.Progress, error) {
	return b.store.TaskProgress(ctx, sig)
}
