package rdb

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Dequeue takes up to n pending tasks of queue q under fresh leases. A
// message that cannot be decoded is returned with Delivery.Err set.
func (s *Store) Dequeue(ctx context.Context, q string, n int, names *store.TaskNames) ([]*store.Delivery, error) {
	qk := s.keys.queue(q)
	lease := s.opts.LeaseDuration
	args := make([]interface{}, 0, 3+n)
	args = append(args, qk.task, n, lease.Milliseconds())
	base := randomHex(12) // one random read per fetch; the index makes each token unique
	for i := 0; i < n; i++ {
		args = append(args, base+strconv.Itoa(i))
	}
	keys := []string{qk.pending, qk.paused, qk.lease, qk.notify}
	if names != nil {
		keys = append(keys, qk.rerouted, qk.names+names.Key())
	}
	start := time.Now()
	cmd := s.repl.Eval(ctx, s.client, true, dequeueScript, keys, args)
	if err := cmd.Err(); err != nil {
		if transport.OutcomeUnknown(err) {
			// The fetch may have taken tasks nobody will run: put them
			// back now rather than at the end of their leases.
			s.releaseFetch(ctx, q, base, start)
		}
		return nil, fmt.Errorf("fetch from queue %s: %w", q, err)
	}
	taken, err := parseDequeueReply(cmd.Val(), n)
	if err != nil {
		return nil, fmt.Errorf("fetch from queue %s: %w", q, err)
	}
	return s.deliveries(q, taken, start), nil
}

// deliveries makes the deliveries of tasks taken from queue q by a call
// begun at start. The local lease expiry is counted from start, so the
// worker gives a lease up no later than Redis does. A message that cannot
// be decoded is returned with Delivery.Err set.
func (s *Store) deliveries(q string, taken []dequeued, start time.Time) []*store.Delivery {
	localExpiry := start.Add(s.opts.LeaseDuration)
	var out []*store.Delivery
	for _, t := range taken {
		id := t.id
		d := &store.Delivery{
			Queue:     q,
			Lease:     store.NewLease(t.token, localExpiry),
			Retried:   t.retried,
			Recovered: t.recovered,
		}
		sig, err := decodeStored(t.msg, id, q)
		if err == nil && t.outcome != "" {
			d.Outcome = new(tasks.TaskState)
			if derr := decodeJSON(t.outcome, d.Outcome); derr != nil {
				err = fmt.Errorf("decode committed outcome: %w", derr)
			}
		}
		if err != nil {
			// The worker fails it with the reason (FAILURE, archive,
			// error handler): the id is all that is known of it.
			d.Signature = &tasks.Signature{UUID: id, RoutingKey: q}
			d.Err = fmt.Errorf("cannot decode task message: %w", err)
			out = append(out, d)
			continue
		}
		sig.UUID = id
		d.Signature = sig
		out = append(out, d)
	}
	return out
}

// releaseScanLimit bounds the leases releaseFetch looks at.
const releaseScanLimit = 100000

// releaseFetch puts back the tasks a fetch begun at start, with token
// base, took if its reply was lost (release_fetch.lua). It is best effort:
// when it fails too, those tasks come back when their leases end.
func (s *Store) releaseFetch(ctx context.Context, q, base string, start time.Time) {
	// The fetch's own context may be what ended it (its deadline cut the
	// reply off): the tasks are put back regardless, within a bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	qk := s.keys.queue(q)
	// The fetch set its leases at Redis's time, no earlier than start
	// (less a second for the clocks' difference).
	lowest := start.Add(s.opts.LeaseDuration - time.Second).UnixMilli()
	var n int64
	err := transport.Again(ctx, func() error {
		var err error
		n, err = s.repl.Eval(ctx, s.client, false, releaseScript, []string{qk.pending, qk.lease, qk.notify},
			[]interface{}{qk.task, base, lowest, releaseScanLimit}).Int64()
		return err
	}, transport.Retry{})
	if err != nil {
		s.log.Warn("putting back the tasks of a fetch whose reply was lost failed; they come back when their leases end",
			slog.String("queue", q), slog.Any("error", err))
		return
	}
	if n > 0 {
		s.log.Info("put back the tasks of a fetch whose reply was lost", slog.String("queue", q), slog.Int64("tasks", n))
	}
}
