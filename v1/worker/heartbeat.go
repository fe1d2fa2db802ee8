package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/b6192125/machinist/internal/service"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// newHeartbeat returns the loop that renews the leases of the running
// tasks and of the batches being built every LeaseRenewInterval. A failure
// is tried again at the next interval (not later: a lease would run out)
// and logged once per 30 s with a count.
func (w *Worker) newHeartbeat() *service.Periodic {
	interval := w.p.Config.LeaseRenewInterval
	return service.NewPeriodic(service.PeriodicParams{
		Name:      "heartbeat (lease renewal)",
		Interval:  interval,
		Backoff:   service.Backoff{Min: interval, Max: interval, Jitter: -1},
		Archetype: w.arch,
		RunFunc: func(ctx context.Context) error {
			return w.renewLeases(ctx, interval)
		},
	})
}

// renewNow renews the leases of the running tasks at once, so that one
// the broker took (a cancellation the watch may have missed while it was
// down) stops now rather than at the next renewal.
func (w *Worker) renewNow(ctx context.Context) {
	if err := w.renewLeases(ctx, w.p.Config.LeaseRenewInterval); err != nil {
		w.arch.Logger.Warn("renewing the leases after the cancellation watch was set up again failed", slog.Any("error", err))
	}
}

// renewLeases renews the leases of the running tasks that still hold
// theirs, and of the batches being built, in at most timeout (the
// heartbeat's work, and renewNow's).
func (w *Worker) renewLeases(ctx context.Context, timeout time.Duration) error {
	w.mu.Lock()
	ds := make([]*brokers.Delivery, 0, len(w.active))
	for r := range w.active {
		if r.d.Lease.Valid() {
			ds = append(ds, r.d)
		}
	}
	bs := make([]*brokers.Batch, 0, len(w.building))
	for b := range w.building {
		bs = append(bs, b)
	}
	w.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var errs []error
	if len(ds) > 0 {
		if err := w.store.ExtendLeases(rctx, ds...); err != nil {
			errs = append(errs, fmt.Errorf("renew the leases of %d tasks: %w", len(ds), err))
		}
	}
	// The batches are renewed at once, each a round trip of its own, so
	// that many builds on a slow Redis still fit in timeout.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, b := range bs {
		if !b.Lease.Valid() {
			continue
		}
		wg.Go(func() {
			// A batch whose lease is lost has its aggregator stopped (its
			// context ends with the lease): not an error of the renewal.
			if err := w.store.ExtendBatch(rctx, b); err != nil && !errors.Is(err, brokers.ErrLeaseLost) {
				mu.Lock()
				errs = append(errs, fmt.Errorf("renew the lease of aggregation batch %s: %w", b.ID, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
