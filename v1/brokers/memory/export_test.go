package memory

import (
	"context"

	"github.com/b6192125/machinist/v1/brokers/iface"
)

// EndLease ends d's lease now, for the conformance suite
// (brokertest.LeaseEnder): its settles are refused, and the next recovery
// takes the task back.
func (b *Broker) EndLease(_ context.Context, d *iface.Delivery) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.leases[d.Lease.Token()]; t != nil {
		t.leaseExpiresAt = b.clock.Now()
	}
	return nil
}

// EndBatchLease is EndLease for an aggregation batch.
func (b *Broker) EndBatchLease(_ context.Context, ib *iface.Batch) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.queues[ib.Queue]; q != nil {
		if a := q.aggregations[ib.Name]; a != nil {
			if bt := a.batches[ib.ID]; bt != nil && bt.token == ib.Lease.Token() {
				bt.at = b.clock.Now()
				a.waiting.set(bt)
			}
		}
	}
	return nil
}
