package rdb

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// pendingChunk is how many signatures WritePending writes per pipeline.
const pendingChunk = 1000

// stateWrite is a task state encoded for its hash. Every writer of a state
// hash (the pipelines below and ack_success.lua) takes its fields from
// here.
type stateWrite struct {
	state    *tasks.TaskState
	results  string // JSON of state.Results; "null" for none
	progress string // JSON of state.Progress; "" for none
}

func encodeState(state *tasks.TaskState) (*stateWrite, error) {
	results, err := json.Marshal(state.Results)
	if err != nil {
		return nil, fmt.Errorf("encode results: %w", err)
	}
	w := &stateWrite{state: state, results: string(results)}
	if state.Progress != nil {
		p, err := json.Marshal(state.Progress)
		if err != nil {
			return nil, fmt.Errorf("encode progress: %w", err)
		}
		w.progress = string(p)
	}
	return w, nil
}

// fields are the hash fields every write sets, so that a new state leaves
// nothing of an older one; created_at is not among them (see queueState).
func (w *stateWrite) fields() []interface{} {
	f := []interface{}{"state", w.state.State, "name", w.state.TaskName, "results", w.results, "error", w.state.Error}
	if w.state.Workflow != "" {
		// The first write of a state hash may be a later state's (the
		// PENDING state implicit): each names the workflow.
		f = append(f, "workflow", w.state.Workflow)
	}
	if w.state.Trace != "" {
		f = append(f, "trace", w.state.Trace)
	}
	if w.progress != "" {
		f = append(f, "progress", w.progress)
	}
	return f
}

// pendingFields are the fields of a PENDING write, which sends a task:
// fields and created_at, and, for an aggregation member, the aggregate it
// joined.
func (w *stateWrite) pendingFields() []interface{} {
	f := append(w.fields(), "created_at", formatCreated(w.state.CreatedAt))
	if w.state.Aggregate != "" {
		f = append(f, "aggregate", w.state.Aggregate)
	}
	return f
}

// queueState adds the writes of w, a state of a task of queue ("" when
// not known), to pipe. PENDING: its fields, created_at and the TTL. Any
// other state: set_state.lua, which keeps a final state from a late write
// of one that is not, takes created_at from the task's hash when it is in
// reach (on a single server: the time the task was sent), and announces a
// final state to the results waiting on it (watch.go).
func (s *Store) queueState(ctx context.Context, pipe goredis.Pipeliner, w *stateWrite, queue string) []goredis.Cmder {
	key := s.keys.state(w.state.TaskUUID)
	if w.state.State == tasks.StatePending {
		cmds := []goredis.Cmder{
			pipe.HSet(ctx, key, w.pendingFields()...),
			pipe.PExpire(ctx, key, s.opts.ResultsExpireIn),
		}
		if w.state.Aggregate != "" && s.oneNode {
			// A member's results now wait for its aggregate (watch.go).
			cmds = append(cmds, pipe.Publish(ctx, key, ""))
		}
		return cmds
	}
	keys := []string{key}
	announce := "0"
	if s.oneNode {
		announce = "1"
		if queue != "" {
			keys = append(keys, s.keys.queue(queue).task+w.state.TaskUUID)
		}
	}
	args := append([]interface{}{s.opts.ResultsExpireIn.Milliseconds(), formatCreated(w.state.CreatedAt), announce}, w.fields()...)
	return []goredis.Cmder{setStateScript.EvalSha(ctx, pipe, keys, args...)}
}

func checkSig(sig *tasks.Signature) error {
	if sig == nil {
		return tasks.ErrNilSignature
	}
	if sig.UUID == "" {
		return fmt.Errorf("signature %q has no UUID", sig.Name)
	}
	return nil
}

// pendingWrites checks and encodes the PENDING states of sigs, made by
// newState, and returns the commands that write them.
func (s *Store) pendingWrites(ctx context.Context, sigs []*tasks.Signature, newState func(*tasks.Signature) *tasks.TaskState) (transport.QueueFunc, error) {
	writes := make([]*stateWrite, len(sigs))
	for i, sig := range sigs {
		if err := checkSig(sig); err != nil {
			return nil, fmt.Errorf("set state pending: signature %d: %w", i, err)
		}
		w, err := encodeState(newState(sig))
		if err != nil {
			return nil, fmt.Errorf("set state pending of task %s: %w", sig.UUID, err)
		}
		writes[i] = w
	}
	return func(pipe goredis.Pipeliner) []goredis.Cmder {
		var cmds []goredis.Cmder
		for _, w := range writes {
			cmds = append(cmds, s.queueState(ctx, pipe, w, "")...)
		}
		return cmds
	}, nil
}

// WritePending writes the PENDING state of every signature: one pipeline
// per 1000 signatures, every signature checked before anything is written.
func (s *Store) WritePending(ctx context.Context, sigs []*tasks.Signature) error {
	return s.writePending(ctx, sigs, tasks.NewPendingTaskState)
}

// WriteAggregated writes the state of each member of the aggregate
// aggregateUUID: PENDING, pointing at it; as WritePending.
func (s *Store) WriteAggregated(ctx context.Context, aggregateUUID string, members []*tasks.Signature) error {
	return s.writePending(ctx, members, func(sig *tasks.Signature) *tasks.TaskState {
		return tasks.NewAggregatedTaskState(sig, aggregateUUID)
	})
}

func (s *Store) writePending(ctx context.Context, sigs []*tasks.Signature, newState func(*tasks.Signature) *tasks.TaskState) error {
	var chunks []transport.QueueFunc
	for start := 0; start < len(sigs); start += pendingChunk {
		chunk := sigs[start:min(start+pendingChunk, len(sigs))]
		writes, err := s.pendingWrites(ctx, chunk, newState)
		if err != nil {
			return err
		}
		chunks = append(chunks, writes)
	}
	for i, writes := range chunks {
		first := sigs[i*pendingChunk]
		// The writes are safe to repeat: they are sent again after an
		// error that leaves unknown whether they ran, or a refusal for
		// now (a failover).
		if err := transport.Again(ctx, func() error { return s.batch.Do(ctx, first.UUID, writes) }, transport.Retry{}); err != nil {
			if len(sigs) == 1 {
				return fmt.Errorf("set state pending of task %s: %w", first.UUID, err)
			}
			n := min(pendingChunk, len(sigs)-i*pendingChunk)
			return fmt.Errorf("set state pending of %d tasks (from task %s): %w", n, first.UUID, err)
		}
	}
	return nil
}

// WithdrawPending queues the deletion of the PENDING states of sigs,
// which WritePending wrote for tasks whose send then failed having
// published nothing, and returns without waiting for it (a failure is
// logged). Each chunk goes through the batcher lane its write went
// through, after what the lane holds now, as WithdrawWorkflow says.
func (s *Store) WithdrawPending(sigs []*tasks.Signature) error {
	for i, sig := range sigs {
		if err := checkSig(sig); err != nil {
			return fmt.Errorf("withdraw state pending: signature %d: %w", i, err)
		}
	}
	for start := 0; start < len(sigs); start += pendingChunk {
		chunk := sigs[start:min(start+pendingChunk, len(sigs))]
		withdraw := func(pipe goredis.Pipeliner) []goredis.Cmder { return s.withdrawStates(pipe, chunk) }
		if !s.batch.Go(chunk[0].UUID, withdraw, s.logWithdrawal("task_id", chunk[0].UUID)) {
			return fmt.Errorf("withdraw state pending of task %s: %w", chunk[0].UUID, transport.ErrClosed)
		}
	}
	return nil
}

// withdrawStates adds to pipe the deletion of the PENDING state of each of
// sigs, as a send wrote it (naming the signature's workflow), unless it was
// replaced since (withdraw.lua).
func (s *Store) withdrawStates(pipe goredis.Pipeliner, sigs []*tasks.Signature) []goredis.Cmder {
	ctx := context.Background() // queued without waiting: no caller's context
	cmds := make([]goredis.Cmder, len(sigs))
	for i, sig := range sigs {
		cmds[i] = withdrawScript.Eval(ctx, pipe, []string{s.keys.state(sig.UUID)}, sig.WorkflowUUID)
	}
	return cmds
}

// logWithdrawal returns the callback that logs a withdrawal's failure,
// with the attribute key and value that name it.
func (s *Store) logWithdrawal(key, value string) func([]goredis.Cmder) {
	return func(cmds []goredis.Cmder) {
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				s.log.Warn("deleting the PENDING states of a send that failed failed; they expire after ResultsExpireIn",
					slog.String(key, value), slog.Any("error", err))
				return
			}
		}
	}
}

// SetState writes state, the state of sig, in one pipeline, with no lease
// check (the Backend's SetState* methods); a final
// state of a group member is recorded in its group by the same pipeline.
// It returns how many members of sig's group have finished (0 for a task
// that is no group member, or a state that is not final).
func (s *Store) SetState(ctx context.Context, sig *tasks.Signature, state *tasks.TaskState) (int64, error) {
	write, err := s.stateWrites(ctx, sig, state)
	if err != nil {
		return 0, err
	}
	run := func() ([]goredis.Cmder, error) {
		cmds, err := s.batch.Submit(ctx, sig.UUID, write).Wait(ctx)
		if err != nil {
			return nil, err
		}
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				return nil, err
			}
		}
		return cmds, nil
	}
	// The writes are safe to repeat (see transport/retry.go).
	var cmds []goredis.Cmder
	err = transport.Again(ctx, func() error {
		var err error
		cmds, err = run()
		return err
	}, transport.Retry{})
	if transport.IsNoScript(err) {
		// Redis lost the script: load it and write again; every write of
		// the pipeline is idempotent.
		if err = s.reloadScripts(ctx); err == nil {
			cmds, err = run()
		}
	}
	if err != nil {
		return 0, fmt.Errorf("set state %s of task %s: %w", strings.ToLower(state.State), sig.UUID, err)
	}
	if sig.GroupUUID == "" || !state.IsCompleted() {
		return 0, nil
	}
	var finished int64
	if cmd, ok := cmds[len(cmds)-1].(*goredis.Cmd); ok { // group_done
		finished, err = parseCountReply("group_done", cmd.Val())
	} else {
		err = fmt.Errorf("the last command is %T, not group_done", cmds[len(cmds)-1])
	}
	if err != nil {
		return 0, fmt.Errorf("set state %s of task %s: %w", strings.ToLower(state.State), sig.UUID, err)
	}
	return finished, nil // how many members have finished
}

// SetStateAsync queues the write of state, a state of sig that is not
// final, and returns without waiting for it. The store's writes of a task
// land in the order they were made, so a later final state is never
// overwritten by it; a failed write is logged.
func (s *Store) SetStateAsync(ctx context.Context, sig *tasks.Signature, state *tasks.TaskState) error {
	write, err := s.stateWrites(ctx, sig, state)
	if err != nil {
		return err
	}
	sent := s.batch.Go(sig.UUID, write, func(cmds []goredis.Cmder) {
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				if transport.IsNoScript(err) {
					s.forgetScripts() // Redis lost them: the next write loads them
				}
				s.log.Warn("writing task state failed", slog.String("task_id", sig.UUID), slog.String("state", state.State), slog.Any("error", err))
				return
			}
		}
	})
	if !sent {
		return fmt.Errorf("set state %s of task %s: %w", strings.ToLower(state.State), sig.UUID, store.ErrBackendClosed)
	}
	return nil
}

// stateWrites encodes state and returns the commands that write it, with
// group_done for the final state of a group member.
func (s *Store) stateWrites(ctx context.Context, sig *tasks.Signature, state *tasks.TaskState) (transport.QueueFunc, error) {
	op := "set state " + strings.ToLower(state.State)
	if err := checkSig(sig); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	w, err := encodeState(state)
	if err != nil {
		return nil, fmt.Errorf("%s of task %s: %w", op, sig.UUID, err)
	}
	var (
		groupKeys []string
		groupArgs []interface{}
	)
	if state.State != tasks.StatePending {
		if err := s.loadScripts(ctx); err != nil {
			return nil, fmt.Errorf("%s of task %s: %w", op, sig.UUID, err)
		}
	}
	if sig.GroupUUID != "" && state.IsCompleted() {
		if err := validGroup(sig.GroupUUID); err != nil {
			return nil, fmt.Errorf("%s of task %s: %w", op, sig.UUID, err)
		}
		doneJSON, err := json.Marshal(state)
		if err != nil {
			return nil, fmt.Errorf("%s of task %s: encode state: %w", op, sig.UUID, err)
		}
		if err := s.loadScripts(ctx); err != nil {
			return nil, fmt.Errorf("%s of task %s: %w", op, sig.UUID, err)
		}
		groupKeys = s.keys.group(sig.GroupUUID).all()
		groupArgs = []interface{}{sig.UUID, doneJSON, sig.GroupTaskCount, formatTime(state.CreatedAt),
			s.opts.ResultsExpireIn.Milliseconds(), s.groupTTL().Milliseconds()}
	}
	return func(pipe goredis.Pipeliner) []goredis.Cmder {
		cmds := s.queueState(ctx, pipe, w, sig.RoutingKey)
		if groupKeys != nil {
			cmds = append(cmds, groupDoneScript.EvalSha(ctx, pipe, groupKeys, groupArgs...))
		}
		return cmds
	}, nil
}

// GetState returns the task's state, or an error wrapping ErrStateNotFound
// when there is none. It goes through the task's lane of the batcher, after
// the store's queued writes of the task, so a read follows them. On a
// single server a task published with its PENDING state implicit (Publish)
// has no state hash until its worker writes one: a queue holds it, and it
// reads as PENDING (get_state.lua looks for it in every queue, O(queues);
// GetStateIn names the queue to look in first).
// Result values come back as JSON decodes them with UseNumber.
func (s *Store) GetState(ctx context.Context, taskUUID string) (*tasks.TaskState, error) {
	return s.GetStateIn(ctx, "", taskUUID)
}

// GetStateIn is GetState for a task sent to queue ("" when not known): a
// task with no state hash is looked for in queue first.
func (s *Store) GetStateIn(ctx context.Context, queue, taskUUID string) (*tasks.TaskState, error) {
	fields, err := s.stateFields(ctx, queue, taskUUID)
	if err != nil {
		return nil, fmt.Errorf("get state of task %s: %w", taskUUID, err)
	}
	if fields == nil {
		return nil, fmt.Errorf("task %s: %w", taskUUID, store.ErrStateNotFound)
	}
	st := &tasks.TaskState{
		TaskUUID:  taskUUID,
		TaskName:  fields["name"],
		State:     fields["state"],
		Error:     fields["error"],
		Aggregate: fields["aggregate"],
		Workflow:  fields["workflow"],
		Trace:     fields["trace"],
	}
	if raw := fields["results"]; raw != "" {
		if err := decodeJSON(raw, &st.Results); err != nil {
			return nil, fmt.Errorf("task %s: decode results: %w", taskUUID, err)
		}
	}
	if raw := fields["progress"]; raw != "" {
		st.Progress = new(tasks.Progress)
		if err := json.Unmarshal([]byte(raw), st.Progress); err != nil {
			return nil, fmt.Errorf("task %s: decode progress: %w", taskUUID, err)
		}
	}
	if raw := fields["created_at"]; raw != "" {
		if st.CreatedAt, err = parseCreated(raw); err != nil {
			return nil, fmt.Errorf("task %s: decode created_at: %w", taskUUID, err)
		}
	}
	return st, nil
}

// stateFields reads the fields of the task's state hash or, for a task
// with its PENDING state implicit, those its task hash implies (looked for
// in queue first, when not ""); nil for neither.
func (s *Store) stateFields(ctx context.Context, queue, taskUUID string) (map[string]string, error) {
	key := s.keys.state(taskUUID)
	if !s.oneNode {
		cmds, err := s.batch.Submit(ctx, taskUUID, func(p goredis.Pipeliner) []goredis.Cmder {
			return []goredis.Cmder{p.HGetAll(ctx, key)}
		}).Wait(ctx)
		if err != nil {
			return nil, err
		}
		fields, err := cmds[0].(*goredis.MapStringStringCmd).Result()
		if len(fields) == 0 {
			return nil, err
		}
		if err == nil && queue != "" && fields["progress"] == "" && fields["state"] != tasks.StateSuccess && fields["state"] != tasks.StateFailure {
			// A running task's progress is in its hash, in its queue's slot.
			p, perr := s.client.HGet(ctx, s.keys.queue(queue).task+taskUUID, dataPrefix+store.ProgressKey).Result()
			if perr == nil {
				fields["progress"] = p
			}
		}
		return fields, err
	}
	cmd := s.batch.RunScript(ctx, taskUUID, getStateScript, []string{key, s.keys.queues()}, s.keys.prefix+":{", taskUUID, queue)
	if err := cmd.Err(); err != nil {
		return nil, err
	}
	return parseGetStateReply(cmd.Val())
}

// parseGetStateReply reads get_state.lua's reply: the state hash's
// fields, or those of the state a task hash implies (PENDING, or FAILURE
// for a task archived or cancelled) from its message and send time, or nil
// for none.
func parseGetStateReply(v interface{}) (map[string]string, error) {
	items, ok := v.([]interface{})
	if !ok || len(items) == 0 {
		return nil, fmt.Errorf("get_state: unexpected reply %v", v)
	}
	code, ok := items[0].(int64)
	if !ok {
		return nil, fmt.Errorf("get_state: unexpected reply %v", v)
	}
	switch {
	case code == 0:
		return nil, nil
	case code == 1 && len(items)%2 == 1:
		fields := make(map[string]string, len(items)/2)
		for i := 1; i < len(items); i += 2 {
			k, kok := items[i].(string)
			val, vok := items[i+1].(string)
			if !kok || !vok {
				return nil, fmt.Errorf("get_state: unexpected reply %v", v)
			}
			fields[k] = val
		}
		return fields, nil
	case code == 2 && len(items) == 5:
		var f [4]string
		for i := range f {
			s, ok := items[i+1].(string)
			if !ok {
				return nil, fmt.Errorf("get_state: unexpected reply %v", v)
			}
			f[i] = s
		}
		msg, at, state, reason := f[0], f[1], f[2], f[3]
		fields := map[string]string{"state": state, "error": reason, "created_at": at}
		if msg != "" {
			sig, err := tasks.DecodeSignature([]byte(msg))
			if err != nil {
				return nil, fmt.Errorf("decode the message of the task: %w", err)
			}
			fields["name"], fields["workflow"] = sig.Name, sig.WorkflowUUID
		}
		return fields, nil
	}
	return nil, fmt.Errorf("get_state: unexpected reply %v", v)
}

// PurgeState deletes the task's state, so that GetState then fails with
// ErrStateNotFound; a missing state is not an error. On a single server a
// task its queue holds implies a state (GetState): purge_state.lua marks
// its hash so that it implies none while the task waits as it did. The
// task itself still runs, and the states its worker writes read as usual.
// Like GetState, it goes through the task's lane of the batcher, after
// the store's queued writes of the task.
func (s *Store) PurgeState(ctx context.Context, taskUUID string) error {
	key := s.keys.state(taskUUID)
	var err error
	if s.oneNode {
		err = s.batch.RunScript(ctx, taskUUID, purgeStateScript, []string{key, s.keys.queues()}, s.keys.prefix+":{", taskUUID).Err()
	} else {
		err = transport.Again(ctx, func() error {
			cmds, err := s.batch.Submit(ctx, taskUUID, func(p goredis.Pipeliner) []goredis.Cmder {
				return []goredis.Cmder{p.Del(ctx, key)}
			}).Wait(ctx)
			if err != nil {
				return err
			}
			return cmds[0].Err()
		}, transport.Retry{})
	}
	if err != nil {
		return fmt.Errorf("purge state of task %s: %w", taskUUID, err)
	}
	return nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// formatCreated formats a state's created_at: ms since the epoch, as the
// scripts write it from a task hash's at.
func formatCreated(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// parseCreated reads a state's created_at: ms since the epoch, or RFC 3339
// as earlier versions wrote it.
func parseCreated(raw string) (time.Time, error) {
	if ms, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	return time.Parse(time.RFC3339Nano, raw)
}

// decodeJSON decodes raw into v, numbers as json.Number.
func decodeJSON(raw string, v interface{}) error {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}
