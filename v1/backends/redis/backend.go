package redisbackend

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redisbatch"

	"github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// GroupSafetyTTL is the least time a group's bookkeeping lives after its
// last write while members are unfinished: the TTL of a running group is
// the longer of this and ResultsExpireIn. Completed groups expire
// ResultsExpireIn after their last write.
const GroupSafetyTTL = 30 * 24 * time.Hour

// pendingChunk is how many signatures SetStatePending writes per pipeline.
const pendingChunk = 1000

var _ iface.Backend = (*Backend)(nil)

// Backend is the Redis result backend. Create it with New. Every method is
// safe for concurrent use.
type Backend struct {
	log      *slog.Logger
	client   goredis.UniversalClient
	owned    bool // Close closes the client
	batch    *redisbatch.Batcher
	ownBatch bool // Close closes batch
	keys     keys
	expireIn time.Duration // ResultsExpireIn: states, and completed groups
	groupTTL time.Duration // groups with unfinished members

	closed atomic.Bool

	scriptsMu     sync.Mutex
	scriptsLoaded bool // group_done is loaded for use in pipelines
}

// Params configures New.
type Params struct {
	// Client is the connection: a standalone, Sentinel or Cluster client.
	Client goredis.UniversalClient
	// OwnsClient makes Close close Client.
	OwnsClient bool
	// Batcher, when set, sends the state writes in pipelines shared with
	// other users of Client (the broker on the same Redis); otherwise the
	// backend makes one of its own.
	Batcher *redisbatch.Batcher
	// Config supplies ResultsExpireIn and Redis.KeyPrefix. It should have
	// been through WithDefaults; New applies the defaults again, so nil
	// works too.
	Config *config.Config
}

// New returns a backend on p.Client. It sends nothing to Redis; state
// writes of concurrent callers share round trips through p.Batcher (or a
// batcher of its own, one goroutine, stopped by Close).
func New(p Params) *Backend {
	cnf := p.Config.WithDefaults()
	expireIn := time.Duration(cnf.ResultsExpireIn) * time.Second
	batch, ownBatch := p.Batcher, false
	if batch == nil {
		batch, ownBatch = redisbatch.New(p.Client), true
	}
	log := cnf.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Backend{
		log:      log.With(slog.String("component", "redisbackend")),
		client:   p.Client,
		owned:    p.OwnsClient,
		batch:    batch,
		ownBatch: ownBatch,
		keys:     keys{prefix: cnf.Redis.KeyPrefix},
		expireIn: expireIn,
		groupTTL: max(expireIn, GroupSafetyTTL),
	}
}

// InitGroup records the group's members in group order (duplicates
// dropped) and expects len(taskUUIDs) of them to finish. Members that
// finished before InitGroup stay recorded.
func (b *Backend) InitGroup(ctx context.Context, groupUUID string, taskUUIDs []string) error {
	if err := b.checkOpen("init group"); err != nil {
		return err
	}
	if groupUUID == "" {
		return fmt.Errorf("redisbackend: init group: %w", tasks.ErrEmptyGroupUUID)
	}
	if err := validGroup(groupUUID); err != nil {
		return err
	}
	members := make([]string, 0, len(taskUUIDs))
	listed := make(map[string]bool, len(taskUUIDs))
	for _, id := range taskUUIDs {
		if !listed[id] {
			listed[id] = true
			members = append(members, id)
		}
	}
	uuids, err := json.Marshal(members)
	if err != nil {
		return fmt.Errorf("redisbackend: init group %s: %w", groupUUID, err)
	}
	err = initGroupScript.Run(ctx, b.client, b.keys.group(groupUUID).all(),
		uuids, len(taskUUIDs), formatTime(time.Now()), b.expireIn.Milliseconds(), b.groupTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("redisbackend: init group %s: %w", groupUUID, err)
	}
	return nil
}

// GroupCompleted reports whether groupTaskCount members of the group have
// finished: HLEN of the group's done hash, one O(1) read however large the
// group. A group with no bookkeeping is not completed (false, no error).
func (b *Backend) GroupCompleted(ctx context.Context, groupUUID string, groupTaskCount int) (bool, error) {
	if err := b.checkOpen("group completed"); err != nil {
		return false, err
	}
	if groupUUID == "" {
		return false, nil
	}
	if err := validGroup(groupUUID); err != nil {
		return false, err
	}
	gk := b.keys.group(groupUUID)
	pipe := b.client.Pipeline()
	exists := pipe.Exists(ctx, gk.meta)
	done := pipe.HLen(ctx, gk.done)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("redisbackend: group completed of group %s: %w", groupUUID, err)
	}
	if exists.Val() == 0 {
		return false, nil
	}
	return done.Val() >= int64(groupTaskCount), nil
}

// GroupTaskStates returns the final states of the group's members, as
// recorded when each finished, in group order: InitGroup's members, then
// members InitGroup did not list in the order they finished. A member not
// finished yet is reported with its UUID and state PENDING. The members'
// own states are not read. A group with no bookkeeping is an error
// wrapping ErrGroupNotFound. The reads are one MULTI, so they see one
// moment of the group.
func (b *Backend) GroupTaskStates(ctx context.Context, groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error) {
	if err := b.checkOpen("group task states"); err != nil {
		return nil, err
	}
	if groupUUID == "" {
		return nil, fmt.Errorf("redisbackend: group %q: %w", groupUUID, iface.ErrGroupNotFound)
	}
	if err := validGroup(groupUUID); err != nil {
		return nil, err
	}
	gk := b.keys.group(groupUUID)
	var (
		meta  *goredis.SliceCmd
		order *goredis.StringSliceCmd
		done  *goredis.MapStringStringCmd
	)
	_, err := b.client.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		meta = pipe.HMGet(ctx, gk.meta, "uuids", "count")
		order = pipe.LRange(ctx, gk.order, 0, -1)
		done = pipe.HGetAll(ctx, gk.done)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisbackend: group task states of group %s: %w", groupUUID, err)
	}
	fields := meta.Val()
	if len(fields) != 2 || fields[1] == nil { // every group hash has a count
		return nil, fmt.Errorf("redisbackend: group %s: %w", groupUUID, iface.ErrGroupNotFound)
	}
	var members []string
	if s, ok := fields[0].(string); ok {
		if err := json.Unmarshal([]byte(s), &members); err != nil {
			return nil, fmt.Errorf("redisbackend: group %s: decode member UUIDs: %w", groupUUID, err)
		}
	}
	listed := make(map[string]bool, len(members))
	for _, id := range members {
		listed[id] = true
	}
	for _, id := range order.Val() {
		if !listed[id] {
			listed[id] = true
			members = append(members, id)
		}
	}
	finished := done.Val()
	out := make([]*tasks.TaskState, len(members))
	for i, id := range members {
		raw, ok := finished[id]
		if !ok {
			out[i] = &tasks.TaskState{TaskUUID: id, State: tasks.StatePending}
			continue
		}
		st := new(tasks.TaskState)
		if err := decodeJSON(raw, st); err != nil {
			return nil, fmt.Errorf("redisbackend: group %s: decode state of task %s: %w", groupUUID, id, err)
		}
		out[i] = st
	}
	return out, nil
}

// TriggerChord elects the member that sends the group's chord callback:
// true to the first member that asks and again to that member, false to
// every other. One O(1) script, no lock. A group with no bookkeeping is an
// error wrapping ErrGroupNotFound.
func (b *Backend) TriggerChord(ctx context.Context, groupUUID, memberUUID string) (bool, error) {
	if err := b.checkOpen("trigger chord"); err != nil {
		return false, err
	}
	if memberUUID == "" {
		return false, fmt.Errorf("redisbackend: trigger chord of group %s: no member UUID", groupUUID)
	}
	if groupUUID == "" {
		return false, fmt.Errorf("redisbackend: trigger chord: group %q: %w", groupUUID, iface.ErrGroupNotFound)
	}
	if err := validGroup(groupUUID); err != nil {
		return false, err
	}
	code, err := triggerChordScript.Run(ctx, b.client, b.keys.group(groupUUID).all(),
		memberUUID, b.expireIn.Milliseconds(), b.groupTTL.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("redisbackend: trigger chord of group %s by task %s: %w", groupUUID, memberUUID, err)
	}
	return chordResult(code, groupUUID, memberUUID)
}

// SetStatePending writes the PENDING state of every signature: one
// pipeline per 1000 signatures.
func (b *Backend) SetStatePending(ctx context.Context, sigs ...*tasks.Signature) error {
	// Every signature is checked and encoded before anything is written.
	var queues []redisbatch.QueueFunc
	for start := 0; start < len(sigs); start += pendingChunk {
		queue, err := b.pendingQueue(ctx, start, sigs[start:min(start+pendingChunk, len(sigs))])
		if err != nil {
			return err
		}
		queues = append(queues, queue)
	}
	for i, queue := range queues {
		first := sigs[i*pendingChunk]
		if err := b.batch.Do(ctx, first.UUID, queue); err != nil {
			if len(sigs) == 1 {
				return fmt.Errorf("redisbackend: set state pending of task %s: %w", first.UUID, err)
			}
			n := min(pendingChunk, len(sigs)-i*pendingChunk)
			return fmt.Errorf("redisbackend: set state pending of %d tasks (from task %s): %w", n, first.UUID, err)
		}
	}
	return nil
}

// SetStateReceived writes the RECEIVED state of sig.
func (b *Backend) SetStateReceived(ctx context.Context, sig *tasks.Signature) error {
	return b.setState(ctx, "set state received", sig, tasks.NewReceivedTaskState)
}

// SetStateStarted queues the write of the STARTED state of sig and returns
// without waiting for it, so that the task starts a round trip sooner. The
// backend's writes land in the order they were made, so the task's final
// state cannot be overwritten by it; a failed write is logged.
func (b *Backend) SetStateStarted(ctx context.Context, sig *tasks.Signature) error {
	const op = "set state started"
	queue, err := b.prepareState(ctx, op, sig, tasks.NewStartedTaskState)
	if err != nil {
		return err
	}
	sent := b.batch.Go(sig.UUID, queue, func(cmds []goredis.Cmder) {
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				b.log.Warn("writing task state failed", slog.String("task_id", sig.UUID), slog.String("state", tasks.StateStarted), slog.Any("error", err))
				return
			}
		}
	})
	if !sent {
		return fmt.Errorf("redisbackend: %s of task %s: %w", op, sig.UUID, iface.ErrClosed)
	}
	return nil
}

// SuccessWrite returns the write of the SUCCESS state of sig, which must
// not be a group member, for the broker to make together with the task's
// acknowledgement (redisbroker.AckWithState): one script, one round trip,
// and no result written by a worker that lost its lease.
func (b *Backend) SuccessWrite(sig *tasks.Signature, results []*tasks.TaskResult) (*redisbatch.HashWrite, error) {
	const op = "set state success"
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	if err := checkSig(sig); err != nil {
		return nil, fmt.Errorf("redisbackend: %s: %w", op, err)
	}
	if sig.GroupUUID != "" {
		return nil, fmt.Errorf("redisbackend: %s of group member %s: use SetStateSuccess", op, sig.UUID)
	}
	w, err := b.newStateWrite(tasks.NewSuccessTaskState(sig, results))
	if err != nil {
		return nil, fmt.Errorf("redisbackend: %s of task %s: %w", op, sig.UUID, err)
	}
	return &redisbatch.HashWrite{
		Key:    b.keys.state(sig.UUID),
		Fields: []interface{}{"state", w.state.State, "name", w.state.TaskName, "results", w.results, "error", w.state.Error},
		TTL:    b.expireIn,
	}, nil
}

// SetStateRetry writes the RETRY state of sig.
func (b *Backend) SetStateRetry(ctx context.Context, sig *tasks.Signature) error {
	return b.setState(ctx, "set state retry", sig, tasks.NewRetryTaskState)
}

// SetStateSuccess writes the SUCCESS state of sig with results (as JSON;
// a value JSON cannot encode is an error and nothing is written) and, when
// sig belongs to a group, records it in the group in the same pipeline.
func (b *Backend) SetStateSuccess(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) error {
	return b.setState(ctx, "set state success", sig, func(sig *tasks.Signature) *tasks.TaskState {
		return tasks.NewSuccessTaskState(sig, results)
	})
}

// SetStateFailure writes the FAILURE state of sig with errMsg and, when sig
// belongs to a group, records it in the group in the same pipeline.
func (b *Backend) SetStateFailure(ctx context.Context, sig *tasks.Signature, errMsg string) error {
	return b.setState(ctx, "set state failure", sig, func(sig *tasks.Signature) *tasks.TaskState {
		return tasks.NewFailureTaskState(sig, errMsg)
	})
}

// GetState returns the task's state, or an error wrapping ErrStateNotFound
// when there is none. Result values come back as JSON decodes them with
// UseNumber: numbers as json.Number, arrays as []interface{}, []byte as its
// base64 string; tasks.ReflectTaskResults converts them to their types.
func (b *Backend) GetState(ctx context.Context, taskUUID string) (*tasks.TaskState, error) {
	if err := b.checkOpen("get state"); err != nil {
		return nil, err
	}
	// Through the task's lane of the batcher: it sends after this
	// backend's queued writes of the task, so a read follows them.
	cmds, err := b.batch.Submit(ctx, taskUUID, func(p goredis.Pipeliner) []goredis.Cmder {
		return []goredis.Cmder{p.HGetAll(ctx, b.keys.state(taskUUID))}
	}).Wait(ctx)
	var fields map[string]string
	if err == nil {
		fields, err = cmds[0].(*goredis.MapStringStringCmd).Result()
	}
	if err != nil {
		return nil, fmt.Errorf("redisbackend: get state of task %s: %w", taskUUID, err)
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("redisbackend: task %s: %w", taskUUID, iface.ErrStateNotFound)
	}
	st := &tasks.TaskState{
		TaskUUID: taskUUID,
		TaskName: fields["name"],
		State:    fields["state"],
		Error:    fields["error"],
	}
	if raw := fields["results"]; raw != "" {
		if err := decodeJSON(raw, &st.Results); err != nil {
			return nil, fmt.Errorf("redisbackend: task %s: decode results: %w", taskUUID, err)
		}
	}
	if raw := fields["created_at"]; raw != "" {
		if st.CreatedAt, err = time.Parse(time.RFC3339Nano, raw); err != nil {
			return nil, fmt.Errorf("redisbackend: task %s: decode created_at: %w", taskUUID, err)
		}
	}
	return st, nil
}

// PurgeState deletes the task's state; a missing state is not an error.
func (b *Backend) PurgeState(ctx context.Context, taskUUID string) error {
	if err := b.checkOpen("purge state"); err != nil {
		return err
	}
	if err := b.client.Del(ctx, b.keys.state(taskUUID)).Err(); err != nil {
		return fmt.Errorf("redisbackend: purge state of task %s: %w", taskUUID, err)
	}
	return nil
}

// PurgeGroupMeta deletes the group's bookkeeping; a missing group is not
// an error. The members' own states stay.
func (b *Backend) PurgeGroupMeta(ctx context.Context, groupUUID string) error {
	if err := b.checkOpen("purge group meta"); err != nil {
		return err
	}
	if groupUUID == "" {
		return nil
	}
	if err := validGroup(groupUUID); err != nil {
		return err
	}
	if err := b.client.Del(ctx, b.keys.group(groupUUID).all()...).Err(); err != nil {
		return fmt.Errorf("redisbackend: purge group meta of group %s: %w", groupUUID, err)
	}
	return nil
}

// Close makes later calls fail with ErrClosed and closes the client when
// the backend owns it. Safe to call more than once.
func (b *Backend) Close() error {
	if !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	if b.ownBatch {
		b.batch.Close()
	}
	if b.owned {
		if err := b.client.Close(); err != nil {
			return fmt.Errorf("redisbackend: close: %w", err)
		}
	}
	return nil
}

func (b *Backend) checkOpen(op string) error {
	if b.closed.Load() {
		return fmt.Errorf("redisbackend: %s: %w", op, iface.ErrClosed)
	}
	return nil
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

// stateWrite is a state encoded for Redis.
type stateWrite struct {
	state   *tasks.TaskState
	results string // JSON of state.Results; "null" for none
}

func (b *Backend) newStateWrite(state *tasks.TaskState) (*stateWrite, error) {
	results, err := json.Marshal(state.Results)
	if err != nil {
		return nil, fmt.Errorf("encode results: %w", err)
	}
	return &stateWrite{state: state, results: string(results)}, nil
}

// queueState adds the writes of one state to pipe: every field (so that a
// new state leaves nothing of an older one), created_at only if the hash
// has none, and the TTL.
func (b *Backend) queueState(ctx context.Context, pipe goredis.Pipeliner, w *stateWrite) []goredis.Cmder {
	key := b.keys.state(w.state.TaskUUID)
	if w.state.State == tasks.StatePending {
		// Sending the task: this write makes the state, created_at too.
		return []goredis.Cmder{
			pipe.HSet(ctx, key, "state", w.state.State, "name", w.state.TaskName, "results", w.results,
				"error", w.state.Error, "created_at", formatTime(w.state.CreatedAt)),
			pipe.PExpire(ctx, key, b.expireIn),
		}
	}
	return []goredis.Cmder{
		pipe.HSet(ctx, key, "state", w.state.State, "name", w.state.TaskName, "results", w.results, "error", w.state.Error),
		pipe.HSetNX(ctx, key, "created_at", formatTime(w.state.CreatedAt)),
		pipe.PExpire(ctx, key, b.expireIn),
	}
}

// QueuePending returns the commands that write the PENDING states of sigs,
// for a caller that sends them in one pipeline with its own (Server.SendTask
// with the broker on the same Redis: state and task in one round trip).
func (b *Backend) QueuePending(ctx context.Context, sigs ...*tasks.Signature) (redisbatch.QueueFunc, error) {
	return b.pendingQueue(ctx, 0, sigs)
}

// pendingQueue checks and encodes the PENDING states of sigs, the first of
// which is signature number offset of the caller's, and returns the commands
// that write them.
func (b *Backend) pendingQueue(ctx context.Context, offset int, sigs []*tasks.Signature) (redisbatch.QueueFunc, error) {
	if err := b.checkOpen("set state pending"); err != nil {
		return nil, err
	}
	writes := make([]*stateWrite, len(sigs))
	for i, sig := range sigs {
		if err := checkSig(sig); err != nil {
			return nil, fmt.Errorf("redisbackend: set state pending: signature %d: %w", offset+i, err)
		}
		w, err := b.newStateWrite(tasks.NewPendingTaskState(sig))
		if err != nil {
			return nil, fmt.Errorf("redisbackend: set state pending of task %s: %w", sig.UUID, err)
		}
		writes[i] = w
	}
	return func(pipe goredis.Pipeliner) []goredis.Cmder {
		var cmds []goredis.Cmder
		for _, w := range writes {
			cmds = append(cmds, b.queueState(ctx, pipe, w)...)
		}
		return cmds
	}, nil
}

// Batcher returns the batcher the backend sends state writes through.
func (b *Backend) Batcher() *redisbatch.Batcher { return b.batch }

// setState writes the state newState makes of sig in one pipeline, with a
// final state of a group member recorded in its group by group_done.
func (b *Backend) setState(ctx context.Context, op string, sig *tasks.Signature, newState func(*tasks.Signature) *tasks.TaskState) error {
	_, err := b.writeState(ctx, op, sig, newState)
	return err
}

// writeState writes the state newState makes of sig and returns the
// commands, their results in them.
func (b *Backend) writeState(ctx context.Context, op string, sig *tasks.Signature, newState func(*tasks.Signature) *tasks.TaskState) ([]goredis.Cmder, error) {
	queue, err := b.prepareState(ctx, op, sig, newState)
	if err != nil {
		return nil, err
	}
	run := func() ([]goredis.Cmder, error) {
		cmds, err := b.batch.Submit(ctx, sig.UUID, queue).Wait(ctx)
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
	cmds, err := run()
	if redisbatch.IsNoScript(err) {
		// Redis lost the script (SCRIPT FLUSH, a restart, a failover):
		// load it and write again; every write of the pipeline is
		// idempotent.
		if err = groupDoneScript.Load(ctx, b.client).Err(); err == nil {
			cmds, err = run()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("redisbackend: %s of task %s: %w", op, sig.UUID, err)
	}
	return cmds, nil
}

// CompleteGroupMember writes the SUCCESS state of sig, a group member, and
// reports whether its group is complete, from what the write itself
// returns: no second round trip.
func (b *Backend) CompleteGroupMember(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) (bool, error) {
	const op = "set state success"
	if sig == nil || sig.GroupUUID == "" {
		return false, fmt.Errorf("redisbackend: CompleteGroupMember of a task that is not a group member")
	}
	cmds, err := b.writeState(ctx, op, sig, func(sig *tasks.Signature) *tasks.TaskState {
		return tasks.NewSuccessTaskState(sig, results)
	})
	if err != nil {
		return false, err
	}
	done, err := cmds[len(cmds)-1].(*goredis.Cmd).Int64() // group_done: members finished
	if err != nil {
		return false, fmt.Errorf("redisbackend: %s of task %s: %w", op, sig.UUID, err)
	}
	return done >= int64(sig.GroupTaskCount), nil
}

// prepareState encodes the state newState makes of sig and returns the
// commands that write it.
func (b *Backend) prepareState(ctx context.Context, op string, sig *tasks.Signature, newState func(*tasks.Signature) *tasks.TaskState) (redisbatch.QueueFunc, error) {
	if err := b.checkOpen(op); err != nil {
		return nil, err
	}
	if err := checkSig(sig); err != nil {
		return nil, fmt.Errorf("redisbackend: %s: %w", op, err)
	}
	state := newState(sig)
	w, err := b.newStateWrite(state)
	if err != nil {
		return nil, fmt.Errorf("redisbackend: %s of task %s: %w", op, sig.UUID, err)
	}
	var (
		groupKeys []string
		groupArgs []interface{}
	)
	if sig.GroupUUID != "" && state.IsCompleted() {
		if err := validGroup(sig.GroupUUID); err != nil {
			return nil, fmt.Errorf("redisbackend: %s of task %s: %w", op, sig.UUID, err)
		}
		doneJSON, err := json.Marshal(state)
		if err != nil {
			return nil, fmt.Errorf("redisbackend: %s of task %s: encode state: %w", op, sig.UUID, err)
		}
		if err := b.loadScripts(ctx); err != nil {
			return nil, fmt.Errorf("redisbackend: %s of task %s: load scripts: %w", op, sig.UUID, err)
		}
		groupKeys = b.keys.group(sig.GroupUUID).all()
		groupArgs = []interface{}{sig.UUID, doneJSON, sig.GroupTaskCount, formatTime(state.CreatedAt),
			b.expireIn.Milliseconds(), b.groupTTL.Milliseconds()}
	}
	return func(pipe goredis.Pipeliner) []goredis.Cmder {
		cmds := b.queueState(ctx, pipe, w)
		if groupKeys != nil {
			cmds = append(cmds, groupDoneScript.EvalSha(ctx, pipe, groupKeys, groupArgs...))
		}
		return cmds
	}, nil
}

// loadScripts loads the scripts run inside pipelines (where EVALSHA cannot
// fall back to EVAL) once per backend; a Cluster client loads them on
// every master.
func (b *Backend) loadScripts(ctx context.Context) error {
	b.scriptsMu.Lock()
	defer b.scriptsMu.Unlock()
	if b.scriptsLoaded {
		return nil
	}
	if err := groupDoneScript.Load(ctx, b.client).Err(); err != nil {
		return err
	}
	b.scriptsLoaded = true
	return nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// decodeJSON decodes raw into v, numbers as json.Number.
func decodeJSON(raw string, v interface{}) error {
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}
