package redisbroker

import (
	"context"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

var _ store.Graphs = (*Broker)(nil)

// RecordGraph writes the graph of a workflow of any shape (see
// store.Graphs).
func (b *Broker) RecordGraph(ctx context.Context, g *store.Graph) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return b.store.RecordGraph(ctx, g)
}

// WithdrawGraph deletes a graph RecordGraph wrote for a send that failed.
func (b *Broker) WithdrawGraph(id string) error { return b.store.WithdrawGraph(id) }

// NodeSucceeded records a node's success and returns the nodes it made
// ready (see store.Graphs).
func (b *Broker) NodeSucceeded(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) ([]*tasks.Signature, error) {
	return b.store.NodeSucceeded(ctx, sig, results)
}

// FailGraph records the failure of a node of a workflow of any shape, or
// its cancellation (see store.Graphs).
func (b *Broker) FailGraph(ctx context.Context, id, node, reason string) (*store.GraphFailure, error) {
	return b.store.FailGraph(ctx, id, node, reason)
}

// WatchGraph watches a workflow of any shape until it is final (see
// store.Graphs).
func (b *Broker) WatchGraph(ctx context.Context, id string) (<-chan struct{}, func()) {
	return b.store.WatchGraph(ctx, id)
}

// GraphStatus returns where a workflow of any shape stands.
func (b *Broker) GraphStatus(ctx context.Context, id string) (*tasks.WorkflowStatus, error) {
	return b.store.GraphStatus(ctx, id)
}
