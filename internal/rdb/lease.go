package rdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/b6192125/machinist/internal/store"
)

// ExtendLeases renews the leases of ds, one script per queue, marking lost
// those Redis no longer grants.
func (s *Store) ExtendLeases(ctx context.Context, ds []*store.Delivery) error {
	byQueue := make(map[string][]*store.Delivery)
	for _, d := range ds {
		if d.Lease.Valid() { // a lease lost here is not renewed there either
			byQueue[d.Queue] = append(byQueue[d.Queue], d)
		}
	}
	var errs []error
	for q, group := range byQueue {
		qk := s.keys.queue(q)
		args := make([]interface{}, 0, 2+2*len(group))
		args = append(args, qk.task, s.opts.LeaseDuration.Milliseconds())
		for _, d := range group {
			args = append(args, d.Signature.UUID, d.Lease.Token())
		}
		start := time.Now()
		cmd := extendScript.Run(ctx, s.client, []string{qk.lease}, args...)
		err := cmd.Err()
		var lostIDs []string
		if err == nil {
			lostIDs, err = parseExtendReply(cmd.Val())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("extend leases in queue %s: %w", q, err))
			continue
		}
		lost := make(map[string]bool, len(lostIDs))
		for _, id := range lostIDs {
			lost[id] = true
		}
		for _, d := range group {
			if lost[d.Signature.UUID] {
				d.Lease.Lose()
			} else {
				d.Lease.Extend(start.Add(s.opts.LeaseDuration))
			}
		}
	}
	return errors.Join(errs...)
}
