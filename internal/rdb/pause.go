package rdb

import (
	"context"
	"fmt"
	"time"
)

// PauseQueue stops Fetch from taking tasks of queue.
func (s *Store) PauseQueue(ctx context.Context, queue string) error {
	if err := ValidQueue(queue); err != nil {
		return err
	}
	if err := s.client.Set(ctx, s.keys.queue(queue).paused, time.Now().Unix(), 0).Err(); err != nil {
		return fmt.Errorf("pause queue %s: %w", queue, err)
	}
	return nil
}

// ResumeQueue undoes PauseQueue and wakes an idle worker, and, on a single
// server, the queue's maintainer (WatchDue), which did not wake the
// workers of the queue's due aggregation groups and batches while it was
// paused.
func (s *Store) ResumeQueue(ctx context.Context, queue string) error {
	if err := ValidQueue(queue); err != nil {
		return err
	}
	qk := s.keys.queue(queue)
	pipe := s.client.TxPipeline()
	pipe.Del(ctx, qk.paused)
	pipe.LPush(ctx, qk.notify, "1")
	pipe.LTrim(ctx, qk.notify, 0, 0)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("resume queue %s: %w", queue, err)
	}
	if s.oneNode {
		if err := s.client.Publish(ctx, qk.fwake, "").Err(); err != nil {
			return fmt.Errorf("resume queue %s: wake its maintainer: %w", queue, err)
		}
	}
	return nil
}
