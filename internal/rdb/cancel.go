package rdb

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// CancelTask stops the task uuid of queue (cancel.lua); see
// store.Canceller.CancelTask.
func (s *Store) CancelTask(ctx context.Context, queue, uuid, reason string, bar time.Duration) (*tasks.Signature, bool, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, false, err
	}
	if uuid == "" {
		return nil, false, fmt.Errorf("cancel a task of %s: no task UUID given", queue)
	}
	qk := s.keys.queue(queue)
	cmd := s.repl.Eval(ctx, s.client, true, cancelScript,
		[]string{qk.task + uuid, qk.pending, qk.scheduled, qk.retry, qk.archived, qk.lease, qk.rerouted},
		[]interface{}{uuid, reason, s.opts.ArchiveMaxAge.Milliseconds(), s.opts.ArchiveMaxSize, qk.task, s.keys.cancelled(), bar.Milliseconds()})
	err := cmd.Err()
	var code int64
	var val string
	if err == nil {
		code, val, err = parseCancelReply(cmd.Val())
	}
	if err != nil {
		return nil, false, fmt.Errorf("cancel task %s of %s: %w", uuid, queue, err)
	}
	switch code {
	case 1:
		return nil, false, fmt.Errorf("cancel task %s of %s: %w", uuid, queue, store.ErrTaskNotFound)
	case 2:
		return nil, false, fmt.Errorf("cancel task %s of %s: it is %s: %w", uuid, queue, val, store.ErrTaskNotWaiting)
	case 4: // barred
		return nil, false, nil
	}
	sig, err := decodeStored(val, uuid, queue)
	if err != nil {
		return nil, false, fmt.Errorf("cancel task %s of %s: done, but its message cannot be read: %w", uuid, queue, err)
	}
	return sig, code == 3, nil
}

// WatchCancels calls fn with the UUID of each task cancelled
// (cancel.lua publishes them), until ctx ends; with "" once subscribed,
// and again each time go-redis subscribes again after an outage.
func (s *Store) WatchCancels(ctx context.Context, fn func(uuid string)) error {
	sub := s.client.Subscribe(ctx, s.keys.cancelled())
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // subscribed
		return fmt.Errorf("watch cancellations: %w", err)
	}
	fn("") // set up
	// go-redis subscribes again by itself after a broken connection: each
	// confirmation is told as "" again (cancellations published meanwhile
	// were missed).
	ch := sub.ChannelWithSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-ch:
			switch {
			case !ok:
				return fmt.Errorf("watch cancellations: %w", store.ErrClosed)
			case m == nil:
			default:
				switch v := m.(type) {
				case *goredis.Message:
					fn(v.Payload)
				case *goredis.Subscription:
					if v.Kind == "subscribe" {
						fn("")
					}
				}
			}
		}
	}
}
