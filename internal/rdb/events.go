package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/v1/tasks"
)

// events is the key of task uuid's event stream (store.Events).
func (k *keys) events(taskUUID string) string { return k.prefix + ":events:" + taskUUID }

// AppendEvent appends e to the event stream of task uuid, trimmed to about
// tasks.MaxEvents entries, and makes the stream live as long as a state
// (ResultsExpireIn), in one pipeline.
func (s *Store) AppendEvent(ctx context.Context, uuid string, e tasks.Event) error {
	key := s.keys.events(uuid)
	at := e.At
	if at.IsZero() {
		at = time.Now()
	}
	_, err := s.batch.Submit(ctx, uuid, func(p goredis.Pipeliner) []goredis.Cmder {
		return []goredis.Cmder{
			p.XAdd(ctx, &goredis.XAddArgs{Stream: key, MaxLen: tasks.MaxEvents, Approx: true,
				Values: []interface{}{"k", e.Kind, "a", e.Attempt, "t", at.UnixMicro(), "d", []byte(e.Data)}}),
			p.PExpire(ctx, key, s.opts.ResultsExpireIn),
		}
	}).Wait(ctx)
	if err != nil {
		return fmt.Errorf("append an event of task %s: %w", uuid, err)
	}
	return nil
}

// ReadEvents returns up to max events of task uuid after the event after
// ("" from the start), waiting up to block for one when there is none.
func (s *Store) ReadEvents(ctx context.Context, uuid, after string, max int, block time.Duration) ([]tasks.Event, error) {
	if after == "" {
		after = "0"
	}
	args := &goredis.XReadArgs{Streams: []string{s.keys.events(uuid), after}, Count: int64(max), Block: -1}
	if block > 0 {
		args.Block = block
	}
	streams, err := s.client.XRead(ctx, args).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the events of task %s: %w", uuid, err)
	}
	var out []tasks.Event
	for _, st := range streams {
		out = append(out, decodeEvents(st.Messages)...)
	}
	return out, nil
}

// LastEvents returns the last n events of task uuid, oldest first.
func (s *Store) LastEvents(ctx context.Context, uuid string, n int) ([]tasks.Event, error) {
	msgs, err := s.client.XRevRangeN(ctx, s.keys.events(uuid), "+", "-", int64(n)).Result()
	if err != nil {
		return nil, fmt.Errorf("read the events of task %s: %w", uuid, err)
	}
	slices.Reverse(msgs)
	return decodeEvents(msgs), nil
}

// decodeEvents decodes stream entries that AppendEvent wrote.
func decodeEvents(msgs []goredis.XMessage) []tasks.Event {
	out := make([]tasks.Event, 0, len(msgs))
	for _, m := range msgs {
		e := tasks.Event{ID: m.ID}
		e.Kind, _ = m.Values["k"].(string)
		a, _ := m.Values["a"].(string)
		e.Attempt, _ = strconv.Atoi(a)
		t, _ := m.Values["t"].(string)
		if us, err := strconv.ParseInt(t, 10, 64); err == nil {
			e.At = time.UnixMicro(us).UTC()
		}
		d, _ := m.Values["d"].(string)
		e.Data = []byte(d)
		out = append(out, e)
	}
	return out
}
