package redisbroker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// A sharded queue (config.RedisConfig.QueueShards) is several queues in
// Redis, its shards (internal/rdb/shards.go). The broker's methods take
// the queue's name and act on every shard: a Fetch takes from all of
// them, an inspection adds them up, a pause pauses each. A shard's own
// name (brokers.ShardOf) names that shard alone.

// shardsOf returns the queues that hold the tasks of queues, each queue's
// shards in its place; with rotate, starting from a shard picked at
// random, so that each shard is tried first as often as the others.
func (b *Broker) shardsOf(ctx context.Context, queues []string, rotate bool) ([]string, error) {
	out := make([]string, 0, len(queues))
	for _, q := range queues {
		names, err := b.store.Shards(ctx, q)
		if err != nil {
			return nil, err
		}
		if i := 0; rotate && len(names) > 1 {
			i = rand.IntN(len(names))
			out = append(append(out, names[i:]...), names[:i]...)
			continue
		}
		out = append(out, names...)
	}
	return out, nil
}

// Shards returns the queues in Redis that hold queue's tasks: queue
// alone, or queue and its shards (q{k), as read at most 5 s ago.
func (b *Broker) Shards(ctx context.Context, queue string) ([]string, error) {
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	names, err := b.store.Shards(ctx, queue)
	return names, wrap(err)
}

// eachShard calls f with each shard of queue, in order, until f returns
// false or an error; with now, the shards as recorded now rather than as
// read at most 5 s ago (a pause must reach a shard added a moment ago).
func (b *Broker) eachShard(ctx context.Context, queue string, now bool, f func(shard string) (bool, error)) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	shards := b.store.Shards
	if now {
		shards = b.store.ShardsNow
	}
	names, err := shards(ctx, queue)
	if err != nil {
		return wrap(err)
	}
	for _, sh := range names {
		more, err := f(sh)
		if err != nil {
			return wrap(err)
		}
		if !more {
			break
		}
	}
	return nil
}

// Queues lists the queues tasks were ever published to (a sharded queue
// once, by its name).
func (b *Broker) Queues(ctx context.Context) ([]string, error) {
	qs, err := b.store.Queues(ctx)
	if err != nil {
		return nil, wrap(err)
	}
	for i, q := range qs {
		qs[i] = brokers.LogicalQueue(q)
	}
	slices.Sort(qs)
	return slices.Compact(qs), nil
}

// QueueInfo returns the sizes of queue, read in one pipeline per shard:
// those of a sharded queue add up its shards', and it is Paused when
// every shard is.
func (b *Broker) QueueInfo(ctx context.Context, queue string) (*brokers.QueueInfo, error) {
	sum := &brokers.QueueInfo{Queue: queue, Paused: true}
	err := b.eachShard(ctx, queue, false, func(sh string) (bool, error) {
		info, err := b.store.QueueInfo(ctx, sh)
		if err != nil {
			return false, err
		}
		sum.Paused = sum.Paused && info.Paused
		sum.Add(info)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return sum, nil
}

// ListTasks lists tasks of queue with status: those of a sharded queue
// shard after shard, each in its own order (a task's Queue names its
// shard).
func (b *Broker) ListTasks(ctx context.Context, queue string, status brokers.TaskStatus, offset, limit int) ([]*brokers.TaskInfo, error) {
	names, err := b.shardsOf(ctx, []string{queue}, false)
	if err != nil {
		return nil, wrap(err)
	}
	if len(names) == 1 {
		if err := b.checkOpen(); err != nil {
			return nil, err
		}
		infos, err := b.store.ListTasks(ctx, queue, status, offset, limit)
		return infos, wrap(err)
	}
	var out []*brokers.TaskInfo
	err = b.eachShard(ctx, queue, false, func(sh string) (bool, error) {
		info, err := b.store.QueueInfo(ctx, sh)
		if err != nil {
			return false, err
		}
		n, ok := info.Count(status)
		if !ok {
			return false, fmt.Errorf("list tasks: unknown status %q", status)
		}
		if offset >= n {
			offset -= n
			return true, nil
		}
		rest := 0 // all
		if limit > 0 {
			rest = limit - len(out)
		}
		infos, err := b.store.ListTasks(ctx, sh, status, offset, rest)
		if err != nil {
			return false, err
		}
		offset = 0
		out = append(out, infos...)
		return limit < 1 || len(out) < limit, nil
	})
	return out, err
}

// GetTask describes the task uuid of queue (of whichever shard holds it),
// from its hash.
func (b *Broker) GetTask(ctx context.Context, queue, uuid string) (*brokers.TaskInfo, error) {
	var found *brokers.TaskInfo
	err := b.eachShard(ctx, queue, false, func(sh string) (bool, error) {
		info, err := b.store.GetTask(ctx, sh, uuid)
		if errors.Is(err, brokers.ErrTaskNotFound) {
			return true, nil
		}
		found = info
		return false, err
	})
	if err == nil && found == nil {
		err = wrap(fmt.Errorf("get task %s of %s: %w", uuid, queue, brokers.ErrTaskNotFound))
	}
	return found, err
}

// RequeueArchived moves archived tasks back to pending (in their shards).
func (b *Broker) RequeueArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	return b.sumShards(ctx, queue, func(sh string) (int, error) { return b.store.RequeueArchived(ctx, sh, uuids...) })
}

// DeleteArchived deletes archived tasks.
func (b *Broker) DeleteArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	return b.sumShards(ctx, queue, func(sh string) (int, error) { return b.store.DeleteArchived(ctx, sh, uuids...) })
}

// sumShards adds up what f counts in each shard of queue.
func (b *Broker) sumShards(ctx context.Context, queue string, f func(shard string) (int, error)) (int, error) {
	total := 0
	err := b.eachShard(ctx, queue, false, func(sh string) (bool, error) {
		n, err := f(sh)
		total += n
		return true, err
	})
	return total, err
}

// TakeWaiting deletes, archives or runs now a task that waits in queue
// (take_waiting.lua; a pending task is found by LREM, O(pending)), in
// whichever shard holds it.
func (b *Broker) TakeWaiting(ctx context.Context, queue, uuid string, action brokers.TakeAction, reason string) (*tasks.Signature, error) {
	var sig *tasks.Signature
	var notFound error
	err := b.eachShard(ctx, queue, false, func(sh string) (bool, error) {
		s, err := b.store.TakeWaiting(ctx, sh, uuid, action, reason)
		if errors.Is(err, brokers.ErrTaskNotFound) {
			notFound = err
			return true, nil
		}
		sig = s
		return false, err
	})
	if err == nil && sig == nil && notFound != nil {
		err = wrap(notFound)
	}
	return sig, err
}

// TakeAll acts on up to n of queue's tasks with status (take_all.lua),
// shard after shard until n are acted on.
func (b *Broker) TakeAll(ctx context.Context, queue string, status brokers.TaskStatus, action brokers.TakeAction, reason string, n int) (*brokers.TakenPage, error) {
	out := &brokers.TakenPage{}
	err := b.eachShard(ctx, queue, false, func(sh string) (bool, error) {
		page, err := b.store.TakeAll(ctx, sh, status, action, reason, n-len(out.Taken))
		if err != nil {
			return false, err
		}
		out.Taken = append(out.Taken, page.Taken...)
		out.More = out.More || page.More
		return len(out.Taken) < n, nil
	})
	return out, err
}

// RemoveQueue deletes the keys of queue and of each of its shards, and
// its shard record.
func (b *Broker) RemoveQueue(ctx context.Context, queue string) error {
	err := b.eachShard(ctx, queue, true, func(sh string) (bool, error) {
		return true, b.store.RemoveQueue(ctx, sh)
	})
	if err != nil {
		return err
	}
	return wrap(b.store.ForgetShards(ctx, queue))
}

// CancelTask stops a task: deleted when it waits, its lease taken and the
// task archived when it runs (cancel.lua, which publishes the
// cancellation for WatchCancels); with a bar, a task the queue does not
// hold is kept out (its hash written as a "cancelled" tombstone that
// expires after bar). A sharded queue's shards (as recorded now) are
// tried in turn until one holds the task; with a bar, each shard tried
// that does not is barred, so that the task is kept out wherever it would
// be sent (but not from a shard added later).
func (b *Broker) CancelTask(ctx context.Context, queue, uuid, reason string, bar time.Duration) (*tasks.Signature, bool, error) {
	var (
		sig      *tasks.Signature
		running  bool
		notFound error
	)
	err := b.eachShard(ctx, queue, true, func(sh string) (bool, error) {
		s, r, err := b.store.CancelTask(ctx, sh, uuid, reason, bar)
		switch {
		case errors.Is(err, brokers.ErrTaskNotFound):
			notFound = err
			return true, nil
		case err == nil && s == nil: // barred: not in this shard
			return true, nil
		}
		sig, running = s, r
		return false, err
	})
	if err == nil && sig == nil && notFound != nil {
		err = wrap(notFound)
	}
	return sig, running, err
}

// PauseQueue stops Fetch from taking tasks of queue (of each shard, as
// recorded now; a shard added later is paused by the first process that
// finds it while the queue's first shard is paused).
func (b *Broker) PauseQueue(ctx context.Context, queue string) error {
	return b.eachShard(ctx, queue, true, func(sh string) (bool, error) {
		return true, b.store.PauseQueue(ctx, sh)
	})
}

// ResumeQueue undoes PauseQueue and wakes an idle worker (of each shard).
func (b *Broker) ResumeQueue(ctx context.Context, queue string) error {
	return b.eachShard(ctx, queue, true, func(sh string) (bool, error) {
		return true, b.store.ResumeQueue(ctx, sh)
	})
}

// Aggregations lists queue's groups with waiting members, by name then
// key (a sharded queue's shard after shard).
func (b *Broker) Aggregations(ctx context.Context, queue string) ([]*brokers.AggregationInfo, error) {
	var out []*brokers.AggregationInfo
	err := b.eachShard(ctx, queue, false, func(sh string) (bool, error) {
		info, err := b.store.Aggregations(ctx, sh)
		out = append(out, info...)
		return true, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
