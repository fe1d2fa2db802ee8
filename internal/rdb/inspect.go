package rdb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Queues lists the queues tasks were ever published to.
func (s *Store) Queues(ctx context.Context) ([]string, error) {
	qs, err := s.client.SMembers(ctx, s.keys.queues()).Result()
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	sort.Strings(qs)
	return qs, nil
}

// QueueInfo returns the sizes of queue, read in one pipeline.
func (s *Store) QueueInfo(ctx context.Context, queue string) (*store.QueueInfo, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	qk := s.keys.queue(queue)
	pipe := s.client.Pipeline()
	pending := pipe.LLen(ctx, qk.pending)
	banded := pipe.Exists(ctx, qk.levels())
	active := pipe.ZCard(ctx, qk.lease)
	scheduled := pipe.ZCard(ctx, qk.scheduled)
	retry := pipe.ZCard(ctx, qk.retry)
	archived := pipe.ZCard(ctx, qk.archived)
	paused := pipe.Exists(ctx, qk.paused)
	rerouted := pipe.SMembers(ctx, qk.rerouted)
	count := pipe.Get(ctx, qk.aggCount) // the only one that may be redis.Nil
	limited := pipe.ZCard(ctx, qk.parked)
	completed := pipe.ZCard(ctx, qk.completed)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("queue info %s: %w", queue, err)
	}
	nAggregating, err := aggregating(count)
	if err != nil {
		return nil, fmt.Errorf("queue info %s: %w", queue, err)
	}
	nPending := pending.Val()
	var levels map[int]int
	fairKeys := 0
	if banded.Val() == 1 {
		bands, err := s.bands(ctx, qk)
		if err != nil {
			return nil, fmt.Errorf("queue info %s: %w", queue, err)
		}
		levels = make(map[int]int)
		nPending = 0
		for _, b := range bands {
			nPending += b.len
			levels[b.level] += int(b.len)
			if b.key != "" {
				fairKeys++
			}
		}
	}
	if names := rerouted.Val(); len(names) > 0 {
		// Tasks rerouted to the workers that have them are pending too.
		pipe := s.client.Pipeline()
		lens := make([]*goredis.IntCmd, len(names))
		for i, n := range names {
			lens[i] = pipe.LLen(ctx, qk.rerouted+":"+n)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("queue info %s: %w", queue, err)
		}
		for _, l := range lens {
			nPending += l.Val()
		}
	}
	return &store.QueueInfo{
		Queue:     queue,
		Paused:    paused.Val() == 1,
		Pending:   int(nPending),
		Active:    int(active.Val()),
		Scheduled: int(scheduled.Val()),
		Retry:     int(retry.Val()),
		Archived:  int(archived.Val()),

		Aggregating: nAggregating,
		Limited:     int(limited.Val()),
		Completed:   int(completed.Val()),
		Levels:      levels,
		FairKeys:    fairKeys,
	}, nil
}

// ListTasks lists tasks of queue with status.
func (s *Store) ListTasks(ctx context.Context, queue string, status store.TaskStatus, offset, limit int) ([]*store.TaskInfo, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	qk := s.keys.queue(queue)
	start, stop := int64(offset), int64(offset+limit-1)
	if limit < 1 {
		stop = -1 // everything from offset on
	}
	var ids []string
	var err error
	switch status {
	case store.StatusPending:
		ids, err = s.pendingIDs(ctx, qk, start, stop)
	case store.StatusActive:
		ids, err = s.client.ZRange(ctx, qk.lease, start, stop).Result()
	case store.StatusScheduled:
		ids, err = s.client.ZRange(ctx, qk.scheduled, start, stop).Result()
	case store.StatusRetry:
		ids, err = s.client.ZRange(ctx, qk.retry, start, stop).Result()
	case store.StatusArchived:
		ids, err = s.client.ZRevRange(ctx, qk.archived, start, stop).Result()
	case store.StatusLimited:
		ids, err = s.client.ZRange(ctx, qk.parked, start, stop).Result()
	case store.StatusCompleted:
		// By expiry, which is when each completed plus the retention.
		ids, err = s.client.ZRevRange(ctx, qk.completed, start, stop).Result()
	default:
		return nil, fmt.Errorf("list tasks: unknown status %q", status)
	}
	if err != nil {
		return nil, fmt.Errorf("list %s tasks of %s: %w", status, queue, err)
	}
	return s.taskInfos(ctx, queue, status, ids)
}

// band is one list of a queue's pending tasks (lua/lib/band.lua): its
// priority level, fair key ("" for none) and length.
type band struct {
	list  string
	level int
	key   string
	len   int64
}

// bands returns the bands of queue qk with tasks, in the order they are
// served (bands.lua).
func (s *Store) bands(ctx context.Context, qk *queueKeys) ([]band, error) {
	v, err := s.repl.Eval(ctx, s.client, false, bandsScript, []string{qk.pending}, nil).Result()
	if err != nil {
		return nil, err
	}
	items, ok := v.([]interface{})
	if !ok || len(items)%2 != 0 {
		return nil, malformed("bands", nil, "%T of %v, not band, length pairs", v, v)
	}
	bands := make([]band, 0, len(items)/2)
	for i := 0; i < len(items); i += 2 {
		name, _ := items[i].(string)
		n, _ := items[i+1].(int64)
		b := band{list: qk.pending, len: n}
		if name != "" {
			b.list = qk.pending + ":" + name
			level, key, _ := strings.Cut(name, ":")
			if b.level, err = strconv.Atoi(level); err != nil {
				return nil, malformed("bands", err, "band %q", name)
			}
			b.key = key
		}
		bands = append(bands, b)
	}
	return bands, nil
}

// pendingIDs returns the ids of the pending tasks from start to stop (-1:
// to the end): those on the pending list or its bands, in the order the
// bands are served, then the tasks rerouted to the workers that have
// them, by name.
func (s *Store) pendingIDs(ctx context.Context, qk *queueKeys, start, stop int64) ([]string, error) {
	names, err := s.client.SMembers(ctx, qk.rerouted).Result()
	if err != nil {
		return nil, err
	}
	bands := []band{{list: qk.pending, len: -1}}
	if s.client.Exists(ctx, qk.levels()).Val() == 1 {
		if bands, err = s.bands(ctx, qk); err != nil {
			return nil, err
		}
	}
	if len(names) == 0 && len(bands) == 1 {
		return s.client.LRange(ctx, bands[0].list, start, stop).Result()
	}
	if bands[0].len < 0 {
		bands[0].len = s.client.LLen(ctx, qk.pending).Val()
	}
	// The page of each band it spans, then of the tasks rerouted, which
	// are few and short-lived: those are read whole.
	sort.Strings(names)
	pipe := s.client.Pipeline()
	var pages []*goredis.StringSliceCmd
	var n int64 // tasks in the bands before this one
	for _, b := range bands {
		from, to := max(start-n, 0), b.len-1
		if stop >= 0 {
			to = min(to, stop-n)
		}
		if from <= to {
			pages = append(pages, pipe.LRange(ctx, b.list, from, to))
		}
		n += b.len
	}
	lists := make([]*goredis.StringSliceCmd, len(names))
	for i, name := range names {
		lists[i] = pipe.LRange(ctx, qk.rerouted+":"+name, 0, -1)
	}
	if len(pages)+len(lists) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var ids []string
	for _, p := range pages {
		ids = append(ids, p.Val()...)
	}
	if stop >= 0 && stop < n {
		return ids, nil
	}
	var rerouted []string
	for _, l := range lists {
		rerouted = append(rerouted, l.Val()...)
	}
	from, to := max(start-n, 0), int64(len(rerouted))-1
	if stop >= 0 {
		to = min(to, stop-n)
	}
	if from <= to {
		ids = append(ids, rerouted[from:to+1]...)
	}
	return ids, nil
}

// taskInfoPage is how many task hashes one pipeline of taskInfos reads: a
// pipeline's replies must all arrive within one read timeout, and a long
// one holds Redis (or the embedded engine) from other clients meanwhile.
const taskInfoPage = 500

// taskInfos reads the hashes of ids, a pipeline per taskInfoPage of them.
func (s *Store) taskInfos(ctx context.Context, queue string, status store.TaskStatus, ids []string) ([]*store.TaskInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	qk := s.keys.queue(queue)
	cmds := make([]*goredis.SliceCmd, len(ids))
	for start := 0; start < len(ids); start += taskInfoPage {
		pipe := s.client.Pipeline()
		for i := start; i < min(start+taskInfoPage, len(ids)); i++ {
			cmds[i] = pipe.HMGet(ctx, qk.task+ids[i], taskInfoFields...)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
			return nil, fmt.Errorf("read tasks of %s: %w", queue, err)
		}
	}
	out := make([]*store.TaskInfo, 0, len(ids))
	for i, id := range ids {
		f, err := parseTaskFields(cmds[i].Val())
		if err != nil {
			return nil, fmt.Errorf("read task %s of %s: %w", id, queue, err)
		}
		if f.msg == "" {
			continue // settled between the two reads
		}
		out = append(out, newTaskInfo(queue, id, status, f))
	}
	return out, nil
}

// GetTask describes the task uuid of queue, from its hash: its status is
// the hash's state.
func (s *Store) GetTask(ctx context.Context, queue, uuid string) (*store.TaskInfo, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	if uuid == "" {
		return nil, fmt.Errorf("get a task of %s: no task UUID given", queue)
	}
	vals, err := s.client.HMGet(ctx, s.keys.queue(queue).task+uuid, taskInfoFields...).Result()
	if err != nil {
		return nil, fmt.Errorf("get task %s of %s: %w", uuid, queue, err)
	}
	f, err := parseTaskFields(vals)
	if err != nil {
		return nil, fmt.Errorf("get task %s of %s: %w", uuid, queue, err)
	}
	// No message: never sent, gone, or a cancelled workflow's tombstone.
	if f.msg == "" {
		return nil, fmt.Errorf("get task %s of %s: %w", uuid, queue, store.ErrTaskNotFound)
	}
	return newTaskInfo(queue, uuid, store.TaskStatus(f.state), f), nil
}

// newTaskInfo describes task id of queue, with status, from its hash's
// fields f.
func newTaskInfo(queue, id string, status store.TaskStatus, f taskFields) *store.TaskInfo {
	info := &store.TaskInfo{Queue: queue, Status: status}
	sig, err := decodeStored(f.msg, id, queue)
	if err != nil {
		sig = &tasks.Signature{UUID: id, RoutingKey: queue}
		info.LastError = err.Error()
	}
	info.Signature = sig
	info.Retried = f.retried
	info.Recovered = f.recovered
	if f.hasError {
		info.LastError = f.lastError
	}
	if f.failedAt > 0 {
		info.LastFailedAt = time.UnixMilli(f.failedAt)
	}
	if f.processAt > 0 {
		info.NextProcessAt = time.UnixMilli(f.processAt)
	}
	if status == store.StatusActive && f.leaseExp > 0 {
		info.LeaseExpiresAt = time.UnixMilli(f.leaseExp)
	}
	return info
}

// RequeueArchived moves archived tasks back to pending.
func (s *Store) RequeueArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	if err := ValidQueue(queue); err != nil {
		return 0, err
	}
	qk := s.keys.queue(queue)
	args := append([]interface{}{qk.task}, stringsToArgs(uuids)...)
	cmd := s.repl.Eval(ctx, s.client, true, requeueArchivedScript, []string{qk.archived, qk.pending, qk.notify}, args)
	err := cmd.Err()
	var n int64
	if err == nil {
		n, err = parseCountReply("requeue_archived", cmd.Val())
	}
	if err != nil {
		return 0, fmt.Errorf("requeue archived tasks of %s: %w", queue, err)
	}
	return clampInt(n), nil
}

// DeleteArchived deletes archived tasks.
func (s *Store) DeleteArchived(ctx context.Context, queue string, uuids ...string) (int, error) {
	if err := ValidQueue(queue); err != nil {
		return 0, err
	}
	qk := s.keys.queue(queue)
	args := append([]interface{}{qk.task}, stringsToArgs(uuids)...)
	cmd := s.repl.Eval(ctx, s.client, true, deleteArchivedScript, []string{qk.archived}, args)
	err := cmd.Err()
	var n int64
	if err == nil {
		n, err = parseCountReply("delete_archived", cmd.Val())
	}
	if err != nil {
		return 0, fmt.Errorf("delete archived tasks of %s: %w", queue, err)
	}
	return clampInt(n), nil
}

func stringsToArgs(ss []string) []interface{} {
	out := make([]interface{}, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TakeWaiting acts on a task of queue that waits there (take_waiting.lua)
// and returns its signature; see store.Inspector.TakeWaiting.
func (s *Store) TakeWaiting(ctx context.Context, queue, uuid string, action store.TakeAction, reason string) (*tasks.Signature, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	switch {
	case uuid == "":
		return nil, fmt.Errorf("%s task of %s: no task UUID given", action, queue)
	case action != store.TakeDelete && action != store.TakeArchive && action != store.TakeRun:
		return nil, fmt.Errorf("task %s of %s: unknown action %q (want delete, archive or run)", uuid, queue, action)
	}
	qk := s.keys.queue(queue)
	cmd := s.repl.Eval(ctx, s.client, true, takeWaitingScript,
		[]string{qk.task + uuid, qk.pending, qk.scheduled, qk.retry, qk.archived, qk.notify, qk.rerouted},
		[]interface{}{uuid, string(action), reason, s.opts.ArchiveMaxAge.Milliseconds(), s.opts.ArchiveMaxSize, qk.task})
	err := cmd.Err()
	var code int64
	var val string
	if err == nil {
		code, val, err = parseTakeWaitingReply(cmd.Val())
	}
	if err != nil {
		return nil, fmt.Errorf("%s task %s of %s: %w", action, uuid, queue, err)
	}
	switch code {
	case 1:
		return nil, fmt.Errorf("%s task %s of %s: %w", action, uuid, queue, store.ErrTaskNotFound)
	case 2:
		return nil, fmt.Errorf("%s task %s of %s: it is %s: %w", action, uuid, queue, val, store.ErrTaskNotWaiting)
	}
	sig, err := decodeStored(val, uuid, queue)
	if err != nil {
		return nil, fmt.Errorf("%s task %s of %s: done, but its message cannot be read: %w", action, uuid, queue, err)
	}
	return sig, nil
}

// TakeAll acts on up to n of queue's tasks with status; see
// store.Inspector.TakeAll.
func (s *Store) TakeAll(ctx context.Context, queue string, status store.TaskStatus, action store.TakeAction, reason string, n int) (*store.TakenPage, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	if err := store.CheckTakeAll(status, action); err != nil {
		return nil, fmt.Errorf("%s the %s tasks of %s: %w", action, status, queue, err)
	}
	n = max(n, 1)
	if s.takeAllMax > 0 {
		n = min(n, s.takeAllMax)
	}
	qk := s.keys.queue(queue)
	if status == store.StatusArchived {
		return s.takeArchived(ctx, qk, queue, action, n)
	}
	cmd := s.repl.Eval(ctx, s.client, true, takeAllScript,
		[]string{qk.pending, qk.scheduled, qk.retry, qk.archived, qk.parked, qk.notify, qk.rerouted},
		[]interface{}{qk.task, string(status), string(action), n, reason, s.opts.ArchiveMaxAge.Milliseconds(), s.opts.ArchiveMaxSize})
	v, err := cmd.Result()
	if err != nil {
		return nil, fmt.Errorf("%s the %s tasks of %s: %w", action, status, queue, err)
	}
	items, ok := v.([]interface{})
	if !ok || len(items)%2 != 1 {
		return nil, fmt.Errorf("%s the %s tasks of %s: %w", action, status, queue,
			malformed("take_all", nil, "%T of %v, not a flag then id, message pairs", v, v))
	}
	left, _ := items[0].(int64)
	page := &store.TakenPage{More: left == 1}
	for i := 1; i < len(items); i += 2 {
		id, _ := items[i].(string)
		msg, _ := items[i+1].(string)
		sig, err := decodeStored(msg, id, queue)
		if err != nil {
			// Acted on: it is gone from the status. What is known of it
			// still comes back, so that its state can be written.
			sig = &tasks.Signature{UUID: id, RoutingKey: queue}
		}
		page.Taken = append(page.Taken, sig)
	}
	return page, nil
}

// takeArchived deletes or requeues (TakeRun) up to n of the archived
// tasks of queue, oldest first.
func (s *Store) takeArchived(ctx context.Context, qk *queueKeys, queue string, action store.TakeAction, n int) (*store.TakenPage, error) {
	ids, err := s.client.ZRange(ctx, qk.archived, 0, int64(n-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("%s the archived tasks of %s: %w", action, queue, err)
	}
	if len(ids) > 0 {
		act := s.DeleteArchived
		if action == store.TakeRun {
			act = s.RequeueArchived
		}
		if _, err := act(ctx, queue, ids...); err != nil {
			return nil, err
		}
	}
	page := &store.TakenPage{More: len(ids) == n}
	for _, id := range ids {
		page.Taken = append(page.Taken, &tasks.Signature{UUID: id, RoutingKey: queue})
	}
	return page, nil
}

// RemoveQueue deletes every key of queue, 1,000 found at a time by a SCAN
// of the node that holds its slot, and its name from the set of queues;
// see store.Inspector.RemoveQueue.
func (s *Store) RemoveQueue(ctx context.Context, queue string) error {
	if err := ValidQueue(queue); err != nil {
		return err
	}
	qk := s.keys.queue(queue)
	var node goredis.Cmdable = s.client
	if cc, ok := s.client.(*goredis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, qk.pending)
		if err != nil {
			return fmt.Errorf("remove queue %s: %w", queue, err)
		}
		node = n
	}
	match := globEscape(s.keys.prefix+":{"+queue+"}:") + "*"
	var cursor uint64
	for {
		keys, next, err := node.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return fmt.Errorf("remove queue %s: %w", queue, err)
		}
		if len(keys) > 0 {
			if err := node.Unlink(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("remove queue %s: %w", queue, err)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if err := s.client.SRem(ctx, s.keys.queues(), queue).Err(); err != nil {
		return fmt.Errorf("remove queue %s: %w", queue, err)
	}
	s.mu.Lock()
	delete(s.knownQueue, queue)
	s.mu.Unlock()
	return nil
}

// globEscape escapes the characters a SCAN pattern gives a meaning to.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^-`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
