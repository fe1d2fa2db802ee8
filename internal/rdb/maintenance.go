package rdb

import (
	"context"
	"fmt"
	"time"

	"github.com/b6192125/machinist/internal/store"
)

// forwardBatch and recoverBatch bound the work of one script call.
const (
	forwardBatch = 1000
	recoverBatch = 100
)

// Forward moves due scheduled and retry tasks of queue q to pending, up to
// a batch, wakes the workers of q's due aggregation groups and batches,
// strands the members of those whose task name no worker alive aggregates
// any more (forward.lua), and trims the completed tasks past their
// retention by Redis's clock, which scored them. With most > 0 it records when its caller will run it next
// (after store.Forwarded.Next, at most most from now, or at once with
// More), so that whatever comes due sooner wakes the caller (WatchDue).
func (s *Store) Forward(ctx context.Context, q string, most time.Duration) (store.Forwarded, error) {
	qk := s.keys.queue(q)
	start := time.Now()
	trim := 0
	if s.opts.CompletedRetention > 0 {
		trim = 1
	}
	cmd := forwardScript.Run(ctx, s.client, []string{qk.scheduled, qk.retry, qk.pending, qk.notify, qk.paused, qk.completed},
		qk.task, forwardBatch, most.Milliseconds(), trim)
	err := cmd.Err()
	var moved, nextIn, stranded int64
	if err == nil {
		moved, nextIn, stranded, err = parseForwardReply(cmd.Val())
	}
	if err != nil {
		return store.Forwarded{}, fmt.Errorf("promote due tasks of queue %s: %w", q, err)
	}
	f := store.Forwarded{More: moved >= forwardBatch, Next: -1, Stranded: stranded}
	if nextIn >= 0 {
		f.Next = max(time.Duration(nextIn)*time.Microsecond-time.Since(start), 0)
	}
	return f, nil
}

// Recover returns tasks of queue q whose lease expired to the head of
// pending, or archives those recovered more than MaxRecoveries times, up to
// a batch. It returns the ids of both, and whether a full batch was done
// (call again).
func (s *Store) Recover(ctx context.Context, q string) (recovered, archived []string, more bool, err error) {
	qk := s.keys.queue(q)
	cmd := recoverScript.Run(ctx, s.client, []string{qk.lease, qk.pending, qk.archived, qk.notify},
		qk.task, recoverBatch, s.opts.MaxRecoveries, "lease expired: the worker running the task died, hung or lost Redis")
	err = cmd.Err()
	if err == nil {
		recovered, archived, err = parseRecoverReply(cmd.Val())
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("recover expired leases of queue %s: %w", q, err)
	}
	return recovered, archived, len(recovered)+len(archived) >= recoverBatch, nil
}

// Elect makes holder the maintainer of queue q for term, or renews its
// term, and reports whether holder is the maintainer: the one process that
// runs q's forwarder and recoverer, so that the maintenance of a queue
// costs the same however many processes consume it.
func (s *Store) Elect(ctx context.Context, q, holder string, term time.Duration) (bool, error) {
	cmd := electScript.Run(ctx, s.client, []string{s.keys.queue(q).maintainer}, holder, term.Milliseconds())
	err := cmd.Err()
	var won bool
	if err == nil {
		won, err = parseElectReply(cmd.Val())
	}
	if err != nil {
		return false, fmt.Errorf("elect the maintainer of queue %s: %w", q, err)
	}
	return won, nil
}

// Resign ends holder's term as the maintainer of queue q, if it has it.
func (s *Store) Resign(ctx context.Context, q, holder string) error {
	if err := resignScript.Run(ctx, s.client, []string{s.keys.queue(q).maintainer}, holder).Err(); err != nil {
		return fmt.Errorf("resign as the maintainer of queue %s: %w", q, err)
	}
	return nil
}
