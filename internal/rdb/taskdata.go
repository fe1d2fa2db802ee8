package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// dataPrefix starts the fields of a task hash that keep what the running
// task wrote (store.TaskData): no field of the store's own starts so.
const dataPrefix = "x:"

// ReadTaskData returns what d's task keeps (store.TaskData): every field
// of its hash that starts with dataPrefix, without it.
func (s *Store) ReadTaskData(ctx context.Context, d *store.Delivery) (map[string][]byte, error) {
	id := d.Signature.UUID
	key := s.keys.queue(d.Queue).task + id
	cmds, err := s.batch.Submit(ctx, id, func(p goredis.Pipeliner) []goredis.Cmder {
		return []goredis.Cmder{p.HGetAll(ctx, key)}
	}).Wait(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the data of task %s: %w", id, err)
	}
	fields, err := cmds[0].(*goredis.MapStringStringCmd).Result()
	if err != nil {
		return nil, fmt.Errorf("read the data of task %s: %w", id, err)
	}
	out := make(map[string][]byte)
	for k, v := range fields {
		if name, ok := strings.CutPrefix(k, dataPrefix); ok {
			out[name] = []byte(v)
		}
	}
	return out, nil
}

// WriteTaskData keeps data (key → value) in d's task hash while the
// caller holds d's lease (task_data.lua); a lost lease: an error wrapping
// store.ErrLeaseLost.
func (s *Store) WriteTaskData(ctx context.Context, d *store.Delivery, data map[string][]byte) error {
	id := d.Signature.UUID
	args := make([]interface{}, 0, 1+2*len(data))
	args = append(args, d.Lease.Token())
	for k, v := range data {
		args = append(args, dataPrefix+k, v)
	}
	reply, err := s.batch.RunScript(ctx, id, taskDataScript, []string{s.keys.queue(d.Queue).task + id}, args...).Int64()
	if err != nil {
		return fmt.Errorf("write the data of task %s: %w", id, err)
	}
	if err := statusError(reply, id); err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			d.Lease.Lose()
		}
		return fmt.Errorf("write the data of %w", err)
	}
	return nil
}

// TaskProgress returns the progress sig's task last wrote while it runs
// (store.TaskData), or nil when it wrote none or its hash is gone (the
// task finished: its final state carries its progress). The task is
// looked for in the queue (the shard of a sharded queue) it was sent to.
func (s *Store) TaskProgress(ctx context.Context, sig *tasks.Signature) (*tasks.Progress, error) {
	uuid := sig.UUID
	queue, err := s.route(ctx, sig)
	if err != nil {
		return nil, fmt.Errorf("read the progress of task %s: %w", uuid, err)
	}
	raw, err := s.client.HGet(ctx, s.keys.queue(queue).task+uuid, dataPrefix+store.ProgressKey).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the progress of task %s: %w", uuid, err)
	}
	var p tasks.Progress
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return nil, fmt.Errorf("read the progress of task %s: %w", uuid, err)
	}
	return &p, nil
}
