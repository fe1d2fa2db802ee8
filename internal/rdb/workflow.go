package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// InitWorkflow records wf (its JSON under the workflow key, kept for
// ResultsExpireIn past its LastETA: its Lifetime) and writes the PENDING states of
// pending, in one pipeline: a chain's steps, a chord's callback.
func (s *Store) InitWorkflow(ctx context.Context, wf *tasks.WorkflowMeta, pending []*tasks.Signature) error {
	if wf == nil || wf.WorkflowUUID == "" {
		return errors.New("init workflow: no workflow UUID")
	}
	raw, err := json.Marshal(wf)
	if err != nil {
		return fmt.Errorf("init workflow %s: %w", wf.WorkflowUUID, err)
	}
	writes, err := s.pendingWrites(ctx, pending, tasks.NewPendingTaskState)
	if err != nil {
		return fmt.Errorf("init workflow %s: %w", wf.WorkflowUUID, err)
	}
	key := s.keys.workflow(wf.WorkflowUUID)
	err = transport.Again(ctx, func() error {
		return s.batch.Do(ctx, wf.WorkflowUUID, func(pipe goredis.Pipeliner) []goredis.Cmder {
			return append(writes(pipe), pipe.Set(ctx, key, raw, wf.Lifetime(s.opts.ResultsExpireIn)))
		})
	}, transport.Retry{})
	if err != nil {
		return fmt.Errorf("init workflow %s: %w", wf.WorkflowUUID, err)
	}
	return nil
}

// WithdrawWorkflow queues the deletion of the record of workflow id and
// of the PENDING states of pending, which InitWorkflow wrote for a
// workflow whose send then failed having published nothing, and returns
// without waiting for it (a failure is logged). It goes through the
// workflow's batcher lane, as InitWorkflow did, after what the lane holds
// now: so it follows those writes even when they were still under way as
// their caller gave up at its deadline (a lane's pipeline goes once its
// earlier ones have ended), and comes before what is sent through the
// lane later. A state is deleted only while it is still the PENDING the
// send wrote (withdraw.lua).
func (s *Store) WithdrawWorkflow(id string, pending []*tasks.Signature) error {
	if id == "" {
		return errors.New("withdraw workflow: no workflow UUID")
	}
	for _, sig := range pending {
		if err := checkSig(sig); err != nil {
			return fmt.Errorf("withdraw workflow %s: %w", id, err)
		}
	}
	key := s.keys.workflow(id)
	withdraw := func(pipe goredis.Pipeliner) []goredis.Cmder {
		return append(s.withdrawStates(pipe, pending), pipe.Del(context.Background(), key))
	}
	if !s.batch.Go(id, withdraw, s.logWithdrawal("workflow_id", id)) {
		return fmt.Errorf("withdraw workflow %s: %w", id, transport.ErrClosed)
	}
	return nil
}

// GetWorkflow returns the record of the workflow id names: the workflow's
// own UUID, or that of a task whose state names its workflow. None: an
// error wrapping store.ErrWorkflowNotFound.
func (s *Store) GetWorkflow(ctx context.Context, id string) (*tasks.WorkflowMeta, error) {
	raw, err := s.client.Get(ctx, s.keys.workflow(id)).Result()
	if errors.Is(err, goredis.Nil) {
		var fields map[string]string
		fields, err = s.stateFields(ctx, "", id)
		switch {
		case err != nil:
		case fields["workflow"] == "":
			err = goredis.Nil
		default:
			raw, err = s.client.Get(ctx, s.keys.workflow(fields["workflow"])).Result()
		}
	}
	if errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("workflow of %s: %w", id, store.ErrWorkflowNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("workflow of %s: %w", id, err)
	}
	var wf tasks.WorkflowMeta
	if err := decodeJSON(raw, &wf); err != nil {
		return nil, fmt.Errorf("workflow of %s: decode: %w", id, err)
	}
	return &wf, nil
}
