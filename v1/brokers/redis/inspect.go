package redisbroker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// Queues lists the queues tasks were ever published to.
func (b *Broker) Queues(ctx context.Context) ([]string, error) {
	qs, err := b.client.SMembers(ctx, b.keys.queues()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisbroker: list queues: %w", err)
	}
	sort.Strings(qs)
	return qs, nil
}

// QueueInfo returns the sizes of queue, read in one pipeline.
func (b *Broker) QueueInfo(ctx context.Context, queue string) (*iface.QueueInfo, error) {
	if err := validQueue(queue); err != nil {
		return nil, err
	}
	qk := b.keys.queue(queue)
	pipe := b.client.Pipeline()
	pending := pipe.LLen(ctx, qk.pending)
	active := pipe.ZCard(ctx, qk.lease)
	scheduled := pipe.ZCard(ctx, qk.scheduled)
	retry := pipe.ZCard(ctx, qk.retry)
	archived := pipe.ZCard(ctx, qk.archived)
	paused := pipe.Exists(ctx, qk.paused)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("redisbroker: queue info %s: %w", queue, err)
	}
	return &iface.QueueInfo{
		Queue:     queue,
		Paused:    paused.Val() == 1,
		Pending:   int(pending.Val()),
		Active:    int(active.Val()),
		Scheduled: int(scheduled.Val()),
		Retry:     int(retry.Val()),
		Archived:  int(archived.Val()),
	}, nil
}

// ListTasks lists tasks of queue with status.
func (b *Broker) ListTasks(ctx context.Context, queue string, status iface.TaskStatus, offset, limit int) ([]*iface.TaskInfo, error) {
	if err := validQueue(queue); err != nil {
		return nil, err
	}
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	qk := b.keys.queue(queue)
	start, stop := int64(offset), int64(offset+limit-1)
	if limit < 1 {
		stop = -1 // everything from offset on
	}
	var ids []string
	var err error
	switch status {
	case iface.StatusPending:
		ids, err = b.client.LRange(ctx, qk.pending, start, stop).Result()
	case iface.StatusActive:
		ids, err = b.client.ZRange(ctx, qk.lease, start, stop).Result()
	case iface.StatusScheduled:
		ids, err = b.client.ZRange(ctx, qk.scheduled, start, stop).Result()
	case iface.StatusRetry:
		ids, err = b.client.ZRange(ctx, qk.retry, start, stop).Result()
	case iface.StatusArchived:
		ids, err = b.client.ZRevRange(ctx, qk.archived, start, stop).Result()
	default:
		return nil, fmt.Errorf("redisbroker: list tasks: unknown status %q", status)
	}
	if err != nil {
		return nil, fmt.Errorf("redisbroker: list %s tasks of %s: %w", status, queue, err)
	}
	return b.taskInfos(ctx, queue, status, ids)
}

// taskInfos reads the hashes of ids in one pipeline.
func (b *Broker) taskInfos(ctx context.Context, queue string, status iface.TaskStatus, ids []string) ([]*iface.TaskInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	qk := b.keys.queue(queue)
	pipe := b.client.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, qk.task+id, "msg", "retried", "recovered", "error", "failed_at", "process_at")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("redisbroker: read tasks of %s: %w", queue, err)
	}
	out := make([]*iface.TaskInfo, 0, len(ids))
	for i, id := range ids {
		vals := cmds[i].Val()
		msg, _ := vals[0].(string)
		if msg == "" {
			continue // settled between the two reads
		}
		info := &iface.TaskInfo{Queue: queue, Status: status}
		sig, err := tasks.DecodeSignature([]byte(msg))
		if err != nil {
			sig = &tasks.Signature{UUID: id, RoutingKey: queue}
			info.LastError = err.Error()
		}
		sig.UUID = id
		info.Signature = sig
		info.Retried = atoi(vals[1])
		info.Recovered = atoi(vals[2])
		if e, ok := vals[3].(string); ok {
			info.LastError = e
		}
		if ms := atoi(vals[4]); ms > 0 {
			info.LastFailedAt = time.UnixMilli(int64(ms))
		}
		if ms := atoi(vals[5]); ms > 0 {
			info.NextProcessAt = time.UnixMilli(int64(ms))
		}
		out = append(out, info)
	}
	return out, nil
}

func atoi(v interface{}) int {
	s, _ := v.(string)
	n, _ := strconv.Atoi(s)
	return n
}

// RequeueArchived moves archived tasks back to pending.
func (b *Broker) RequeueArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	if err := validQueue(queue); err != nil {
		return 0, err
	}
	qk := b.keys.queue(queue)
	args := append([]interface{}{qk.task}, stringsToArgs(uuids)...)
	n, err := requeueArchivedScript.Run(ctx, b.client, []string{qk.archived, qk.pending, qk.notify}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redisbroker: requeue archived tasks of %s: %w", queue, err)
	}
	return n, nil
}

// DeleteArchived deletes archived tasks.
func (b *Broker) DeleteArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	if err := validQueue(queue); err != nil {
		return 0, err
	}
	qk := b.keys.queue(queue)
	args := append([]interface{}{qk.task}, stringsToArgs(uuids)...)
	n, err := deleteArchivedScript.Run(ctx, b.client, []string{qk.archived}, args...).Int()
	if err != nil {
		return 0, fmt.Errorf("redisbroker: delete archived tasks of %s: %w", queue, err)
	}
	return n, nil
}

func stringsToArgs(ss []string) []interface{} {
	out := make([]interface{}, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// PauseQueue stops Fetch from taking tasks of queue.
func (b *Broker) PauseQueue(ctx context.Context, queue string) error {
	if err := validQueue(queue); err != nil {
		return err
	}
	if err := b.client.Set(ctx, b.keys.queue(queue).paused, time.Now().Unix(), 0).Err(); err != nil {
		return fmt.Errorf("redisbroker: pause queue %s: %w", queue, err)
	}
	return nil
}

// ResumeQueue undoes PauseQueue and wakes an idle worker.
func (b *Broker) ResumeQueue(ctx context.Context, queue string) error {
	if err := validQueue(queue); err != nil {
		return err
	}
	qk := b.keys.queue(queue)
	pipe := b.client.TxPipeline()
	pipe.Del(ctx, qk.paused)
	pipe.LPush(ctx, qk.notify, "1")
	pipe.LTrim(ctx, qk.notify, 0, 0)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redisbroker: resume queue %s: %w", queue, err)
	}
	return nil
}

// GetPendingTasks lists the pending tasks of queue (DefaultQueue when empty).
// It is machinery's method, bounded to 1000 tasks and 10 seconds.
func (b *Broker) GetPendingTasks(queue string) ([]*tasks.Signature, error) {
	if queue == "" {
		queue = b.cnf.DefaultQueue
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	infos, err := b.ListTasks(ctx, queue, iface.StatusPending, 0, 1000)
	return signatures(infos), err
}

// GetDelayedTasks lists the scheduled and retrying tasks of every queue. It
// is machinery's method, bounded to 1000 tasks per queue and 10 seconds.
func (b *Broker) GetDelayedTasks() ([]*tasks.Signature, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	queues, err := b.Queues(ctx)
	if err != nil {
		return nil, err
	}
	var out []*tasks.Signature
	for _, q := range queues {
		for _, st := range []iface.TaskStatus{iface.StatusScheduled, iface.StatusRetry} {
			infos, err := b.ListTasks(ctx, q, st, 0, 1000)
			if err != nil {
				return nil, err
			}
			out = append(out, signatures(infos)...)
		}
	}
	return out, nil
}

func signatures(infos []*iface.TaskInfo) []*tasks.Signature {
	out := make([]*tasks.Signature, len(infos))
	for i, info := range infos {
		out[i] = info.Signature
	}
	return out
}
