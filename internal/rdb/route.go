package rdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/b6192125/machinist/internal/store"
)

// Routing tasks to the workers that have them. A worker announces its task
// names per queue (announce.lua): the queue's handlers hash records, per
// name, until when a worker alive has it, and a set keyed by the digest of
// the worker's names holds them. A worker that takes a task it lacks
// reroutes it (reroute.lua): the task waits in its name's rerouted list,
// a wake-up token goes to the workers whose names include it (each waits
// on its names' wake-up list besides the queue's), and a fetch whose names
// include the name takes it before the pending list (dequeue.lua). The queue's maintainer puts back on pending the
// rerouted tasks of names whose announcements expired (unroute.lua), so
// that they end, through the worker's retries, in a FAILURE that says no
// worker has them.

// statusNoHandler is reroute.lua's answer when no worker alive has
// announced the task's name.
const statusNoHandler = 3

// errNoHandler is statusNoHandler as an error, for runSettle's callers.
var errNoHandler = errors.New("no worker alive has announced the task's name")

// Announce records that a worker with names consumes queues, for ttl.
func (s *Store) Announce(ctx context.Context, queues []string, names *store.TaskNames, ttl time.Duration) error {
	if len(names.List()) == 0 {
		return nil
	}
	args := make([]interface{}, 0, 2+len(names.List()))
	args = append(args, ttl.Milliseconds(), names.Key())
	for _, n := range names.List() {
		args = append(args, n)
	}
	var errs []error
	for _, q := range queues {
		qk := s.keys.queue(q)
		// One attempt: the worker announces again with every lease renewal.
		err := s.repl.Eval(ctx, s.client, true, announceScript, []string{qk.handlers, qk.names + names.Key(), qk.nameKeys}, args).Err()
		if err != nil {
			errs = append(errs, fmt.Errorf("announce the tasks of queue %s: %w", q, err))
		}
	}
	return errors.Join(errs...)
}

// Reroute hands d's task to the workers that announced its name, if the
// caller holds its lease; it reports false, changing nothing, when no
// worker alive has announced it.
func (s *Store) Reroute(ctx context.Context, d *store.Delivery) (bool, error) {
	qk := s.keys.queue(d.Queue)
	id := d.Signature.UUID
	err := s.runSettle(ctx, rerouteScript, id, d.Lease.Valid,
		[]string{qk.task + id, qk.lease, qk.handlers, qk.rerouted, qk.notify, qk.nameKeys, qk.names},
		id, d.Lease.Token(), d.Signature.Name)
	if errors.Is(err, errNoHandler) {
		return false, nil
	}
	if err = settled(d, err); err != nil {
		return false, err
	}
	return true, nil
}

// unrouteBatch bounds the tasks one unroute script puts back.
const unrouteBatch = 1000

// Unroute puts back on q's pending list the rerouted tasks of names no
// worker alive has announced any more, a batch per script, and returns how
// many.
func (s *Store) Unroute(ctx context.Context, q string) (int64, error) {
	qk := s.keys.queue(q)
	var total int64
	for {
		cmd := s.repl.Eval(ctx, s.client, true, unrouteScript,
			[]string{qk.rerouted, qk.handlers, qk.pending, qk.notify}, []interface{}{qk.task, unrouteBatch})
		err := cmd.Err()
		var moved int64
		var more bool
		if err == nil {
			moved, more, err = parseUnrouteReply(cmd.Val())
		}
		total += moved
		if err != nil {
			return total, fmt.Errorf("put back the rerouted tasks of queue %s: %w", q, err)
		}
		if !more {
			return total, nil
		}
	}
}
