package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
)

// Heartbeat records w alive for ttl (heartbeat.lua), then adds counts to
// their queues' hourly statistics hashes and day hashes in one pipeline
// (one per node on Cluster). The counts are sent once (go-redis does not send an HINCRBY
// again after a lost reply): a heartbeat that fails loses them, rather
// than count them twice.
func (s *Store) Heartbeat(ctx context.Context, w *store.WorkerInfo, ttl time.Duration, counts ...store.StatCount) error {
	if w == nil || w.ID == "" {
		return errors.New("heartbeat: the worker has no ID")
	}
	seen := *w
	seen.Seen = time.Now()
	raw, err := json.Marshal(&seen)
	if err != nil {
		return fmt.Errorf("heartbeat of worker %s: %w", w.ID, err)
	}
	err = s.repl.Eval(ctx, s.client, false, heartbeatScript,
		[]string{s.keys.workersAlive(), s.keys.workersInfo()},
		[]interface{}{w.ID, max(ttl.Milliseconds(), 1), raw}).Err()
	if err != nil {
		err = fmt.Errorf("heartbeat of worker %s: %w", w.ID, err)
	}
	if serr := s.addStats(ctx, counts); serr != nil {
		err = errors.Join(err, fmt.Errorf("heartbeat of worker %s: %w", w.ID, serr))
	}
	return err
}

// addStats adds counts to the statistics hashes: HINCRBY of the period's
// fields, the hash kept a StatsWindow past its hour's end; and of the
// day's hash, kept HistoryDays past its day's end.
func (s *Store) addStats(ctx context.Context, counts []store.StatCount) error {
	oldest := store.StatsOldest(time.Now())
	pipe := s.client.Pipeline()
	for _, c := range counts {
		at := c.At.Truncate(store.StatsPeriod)
		if ValidQueue(c.Queue) != nil || at.Before(oldest) || (c.Processed == 0 && c.Failed == 0) {
			continue
		}
		key, field := s.statsField(c.Queue, at)
		if c.Processed != 0 {
			_ = pipe.Process(ctx, transport.OnceCmd{Cmd: goredis.NewCmd(ctx, "hincrby", key, field+"p", c.Processed)})
		}
		if c.Failed != 0 {
			_ = pipe.Process(ctx, transport.OnceCmd{Cmd: goredis.NewCmd(ctx, "hincrby", key, field+"f", c.Failed)})
		}
		hour := at.Truncate(time.Hour)
		pipe.PExpireAt(ctx, key, hour.Add(time.Hour+store.StatsWindow))
		// The day's counts, in a hash of the day's that expires
		// HistoryDays after it.
		day := s.historyKey(c.Queue, at)
		if c.Processed != 0 {
			_ = pipe.Process(ctx, transport.OnceCmd{Cmd: goredis.NewCmd(ctx, "hincrby", day, "p", c.Processed)})
		}
		if c.Failed != 0 {
			_ = pipe.Process(ctx, transport.OnceCmd{Cmd: goredis.NewCmd(ctx, "hincrby", day, "f", c.Failed)})
		}
		pipe.PExpireAt(ctx, day, store.HistoryDay(at).AddDate(0, 0, store.HistoryDays+1))
	}
	if pipe.Len() == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("add statistics: %w", err)
	}
	return nil
}

// statsField returns the hash of queue's statistics for the hour of the
// period at, and the prefix of the period's fields ("<unix s>:").
func (s *Store) statsField(queue string, at time.Time) (key, field string) {
	hour := at.Truncate(time.Hour)
	return s.keys.queue(queue).stats + strconv.FormatInt(hour.Unix(), 10), strconv.FormatInt(at.Unix(), 10) + ":"
}

// historyKey returns the hash of queue's counts of the UTC day at falls
// in.
func (s *Store) historyKey(queue string, at time.Time) string {
	return s.keys.queue(queue).stats + "day:" + store.HistoryDay(at).Format("20060102")
}

// QueueHistory returns queue's counts by day over the last
// store.HistoryDays days, today last.
func (s *Store) QueueHistory(ctx context.Context, queue string) ([]store.DayCount, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	today := store.HistoryDay(time.Now())
	out := make([]store.DayCount, store.HistoryDays)
	pipe := s.client.Pipeline()
	cmds := make([]*goredis.MapStringStringCmd, len(out))
	for i := range out {
		out[i].Day = today.AddDate(0, 0, i-store.HistoryDays+1)
		cmds[i] = pipe.HGetAll(ctx, s.historyKey(queue, out[i].Day))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("history of %s: %w", queue, err)
	}
	for i, cmd := range cmds {
		var err error
		if out[i].Processed, err = statsCount(cmd.Val(), "p"); err == nil {
			out[i].Failed, err = statsCount(cmd.Val(), "f")
		}
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", queue, err)
		}
	}
	return out, nil
}

// Unregister forgets the worker id.
func (s *Store) Unregister(ctx context.Context, id string) error {
	pipe := s.client.TxPipeline()
	pipe.ZRem(ctx, s.keys.workersAlive(), id)
	pipe.HDel(ctx, s.keys.workersInfo(), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("unregister worker %s: %w", id, err)
	}
	return nil
}

// Workers lists the workers alive (workers.lua).
func (s *Store) Workers(ctx context.Context) ([]*store.WorkerInfo, error) {
	cmd := s.repl.Eval(ctx, s.client, false, workersScript,
		[]string{s.keys.workersAlive(), s.keys.workersInfo()}, nil)
	if err := cmd.Err(); err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	ws, err := parseWorkersReply(cmd.Val())
	if err != nil {
		return nil, fmt.Errorf("list workers: %w", err)
	}
	store.SortWorkers(ws)
	return ws, nil
}

// parseWorkersReply decodes workers.lua's reply: {id, until (ms, a
// number as a string), JSON WorkerInfo or nil, ...}. A worker whose info
// is gone is left out.
func parseWorkersReply(v interface{}) ([]*store.WorkerInfo, error) {
	const reply = "workers"
	arr, err := asArray(reply, v)
	if err != nil {
		return nil, err
	}
	if len(arr)%3 != 0 {
		return nil, malformed(reply, nil, "an array of %d, want triples {id, until, info}", len(arr))
	}
	out := make([]*store.WorkerInfo, 0, len(arr)/3)
	for i := 0; i < len(arr); i += 3 {
		id, err := asString(reply, elem(i, "id"), arr[i])
		if err != nil {
			return nil, err
		}
		until, err := asString(reply, elem(i+1, "until"), arr[i+1])
		if err != nil {
			return nil, err
		}
		ms, err := strconv.ParseFloat(until, 64)
		if err != nil || ms < 0 {
			return nil, malformed(reply, err, "element %d (until) is %q, want a time in ms", i+1, until)
		}
		if arr[i+2] == nil {
			continue // forgotten meanwhile
		}
		raw, err := asString(reply, elem(i+2, "info"), arr[i+2])
		if err != nil {
			return nil, err
		}
		var w store.WorkerInfo
		if err := json.Unmarshal([]byte(raw), &w); err != nil {
			return nil, malformed(reply, err, "element %d (info) is not a worker's JSON", i+2)
		}
		w.ID = id
		w.Expires = time.UnixMilli(int64(ms))
		out = append(out, &w)
	}
	return out, nil
}

// QueueStats returns queue's counts over the last StatsWindow, from the
// statistics hashes of this hour and the one before.
func (s *Store) QueueStats(ctx context.Context, queue string) (*store.QueueStats, error) {
	if err := ValidQueue(queue); err != nil {
		return nil, err
	}
	periods := store.StatsPeriods(time.Now())
	hours := map[string]*goredis.MapStringStringCmd{}
	pipe := s.client.Pipeline()
	for _, at := range []time.Time{periods[0], periods[len(periods)-1]} {
		key, _ := s.statsField(queue, at)
		if hours[key] == nil {
			hours[key] = pipe.HGetAll(ctx, key)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("statistics of %s: %w", queue, err)
	}
	out := &store.QueueStats{Queue: queue, Periods: make([]store.StatCount, len(periods))}
	for i, at := range periods {
		key, field := s.statsField(queue, at)
		fields := hours[key].Val()
		c := store.StatCount{Queue: queue, At: at}
		var err error
		if c.Processed, err = statsCount(fields, field+"p"); err == nil {
			c.Failed, err = statsCount(fields, field+"f")
		}
		if err != nil {
			return nil, fmt.Errorf("statistics of %s: %w", queue, err)
		}
		out.Periods[i] = c
	}
	return out, nil
}

// statsCount reads a count of a statistics hash: 0 when missing.
func statsCount(fields map[string]string, name string) (int, error) {
	v, ok := fields[name]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, malformed("HGETALL statistics", err, "field %s is %q, want an integer", name, v)
	}
	return clampInt(n), nil
}
