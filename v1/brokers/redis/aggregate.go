package redisbroker

import (
	"context"
	"fmt"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

var _ brokers.Aggregator = (*Broker)(nil)

// AnnounceAggregators records that a worker alive aggregates each task name
// of policies on queues, with that policy, for ttl; see brokers.Aggregator.
func (b *Broker) AnnounceAggregators(ctx context.Context, queues []string, policies map[string]brokers.AggregationPolicy, ttl time.Duration) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	queues, err := b.shardsOf(ctx, queues, false)
	if err != nil {
		return wrap(err)
	}
	return wrap(b.store.AnnounceAggregators(ctx, queues, policies, ttl))
}

// ClaimBatch takes one due batch of queues, in order (a sharded queue's
// shards from one picked at random), whose task name is in names, under a
// lease, or returns nil. It starts the queues' maintenance,
// as Fetch does, so that members with an ETA join their groups when due.
func (b *Broker) ClaimBatch(ctx context.Context, queues []string, names *brokers.TaskNames) (*brokers.Batch, error) {
	if len(queues) == 0 {
		return nil, brokers.ErrNoQueue
	}
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	queues, err := b.shardsOf(ctx, queues, true)
	if err != nil {
		return nil, wrap(err)
	}
	batch, err := b.store.ClaimBatch(ctx, queues, names)
	if err != nil {
		return nil, wrap(err)
	}
	b.maintain(queues)
	return batch, nil
}

// NextDue returns when the next group or batch of queues whose task name is
// in names becomes due, or the zero time.
func (b *Broker) NextDue(ctx context.Context, queues []string, names *brokers.TaskNames) (time.Time, error) {
	if err := b.checkOpen(); err != nil {
		return time.Time{}, err
	}
	queues, err := b.shardsOf(ctx, queues, false)
	if err != nil {
		return time.Time{}, wrap(err)
	}
	due, err := b.store.NextDue(ctx, queues, names)
	return due, wrap(err)
}

// WaitDue waits until a group or batch of queues with a name in names may
// be due, or max has passed. A member that fills a group wakes it; the due
// times are watched by each queue's elected maintainer (which this broker
// stands for, as ClaimBatch does), so no worker polls for them.
func (b *Broker) WaitDue(ctx context.Context, queues []string, names *brokers.TaskNames, max time.Duration) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	queues, err := b.shardsOf(ctx, queues, false)
	if err != nil {
		return wrap(fmt.Errorf("wait for a due batch: %w", err))
	}
	b.maintain(queues)
	return wrap(b.store.WaitDue(ctx, queues, names, max))
}

// CompleteBatch publishes aggregate and forgets batch's members in one
// script, only while the caller holds batch's lease. On Redis Cluster an
// aggregate bound for another queue is handed over in steps (see the
// package documentation) and batch.Aggregate set.
func (b *Broker) CompleteBatch(ctx context.Context, batch *brokers.Batch, aggregate *tasks.Signature) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.CompleteBatch(ctx, batch, aggregate))
}

// ExtendBatch renews batch's lease for a LeaseDuration, only while the
// caller holds it.
func (b *Broker) ExtendBatch(ctx context.Context, batch *brokers.Batch) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.ExtendBatch(ctx, batch))
}

// RetryBatch gives batch back, whole, to be taken again from at, only
// while the caller holds its lease.
func (b *Broker) RetryBatch(ctx context.Context, batch *brokers.Batch, at time.Time, errMsg string) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.RetryBatch(ctx, batch, at, errMsg))
}

// ArchiveBatch keeps batch's members as dead letters with reason, only
// while the caller holds its lease.
func (b *Broker) ArchiveBatch(ctx context.Context, batch *brokers.Batch, reason string) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.ArchiveBatch(ctx, batch, reason))
}
