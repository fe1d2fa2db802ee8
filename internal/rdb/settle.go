package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// settled finishes a settling call: the lease is released on success and
// marked lost when Redis refused it.
func settled(d *store.Delivery, err error) error {
	switch {
	case err == nil:
		d.Lease.Release()
	case errors.Is(err, store.ErrLeaseLost):
		d.Lease.Lose()
	}
	return err
}

// Ack forgets a task that is done, or keeps it for CompletedRetention, if
// the caller holds its lease. With take, it then takes the next task of
// d's queue for the caller in the same script, and returns it (nil when
// none is pending).
func (s *Store) Ack(ctx context.Context, d *store.Delivery, take *store.Take) (*store.Delivery, error) {
	qk := s.keys.queue(d.Queue)
	id := d.Signature.UUID
	keys := []string{qk.task + id, qk.lease, qk.completed}
	args := []interface{}{id, d.Lease.Token(), s.opts.CompletedRetention.Milliseconds()}
	t := s.newTaking(d.Queue, take)
	if t != nil {
		keys = append(keys, t.keys()...)
		args = append(args, t.args()...)
	}
	cmd, again := s.batch.RunSettle(ctx, id, ackScript, d.Lease.Valid, keys, args...)
	return t.settled(ctx, d, "ack", cmd, again)
}

// chordFlag is ack_success.lua's ARGV[13] for sig: "1" for a group
// member whose group has a chord callback.
func chordFlag(sig *tasks.Signature) string {
	if sig.GroupUUID != "" && sig.ChordCallback != nil {
		return "1"
	}
	return "0"
}

// settledUnlessDue is settled for a settle script's status code, but a
// chord member left unsettled (statusChordDue) keeps its lease: its
// caller settles it later.
func settledUnlessDue(d *store.Delivery, code int64) error {
	err := statusError(code, d.Signature.UUID)
	if code == statusChordDue {
		return err
	}
	return settled(d, err)
}

// taking is the take of a settle script (lib/queue.lua's take_tasks): the
// next task of the settled task's queue, for the slot it frees. A nil
// *taking takes nothing.
type taking struct {
	s     *Store
	q     string
	names *store.TaskNames
	token string    // the task's fencing token, its own base for release_fetch.lua
	start time.Time // when the settle began: the local lease counts from it
}

func (s *Store) newTaking(q string, take *store.Take) *taking {
	if take == nil {
		return nil
	}
	return &taking{s: s, q: q, names: take.Names, token: randomHex(12), start: time.Now()}
}

// keys are the take's keys: the queue's pending list, paused flag and
// notify list, then, with names, its rerouted set and the names' set.
func (t *taking) keys() []string {
	qk := t.s.keys.queue(t.q)
	keys := []string{qk.pending, qk.paused, qk.notify}
	if t.names != nil {
		keys = append(keys, qk.rerouted, qk.names+t.names.Key())
	}
	return keys
}

// args are the take's arguments: the task hash key prefix, the lease
// duration (ms) and the fencing token.
func (t *taking) args() []interface{} {
	return []interface{}{t.s.keys.queue(t.q).task, t.s.opts.LeaseDuration.Milliseconds(), t.token}
}

// settled reads cmd's reply, script's (ack or ack_success) run for d with
// t (sent again when again), settles d's lease as settled does and returns
// the task taken, if any. A task a run may have taken whose reply never
// reached the caller is put back (release_fetch.lua) rather than left to
// its lease's end.
func (t *taking) settled(ctx context.Context, d *store.Delivery, script string, cmd *goredis.Cmd, again bool) (*store.Delivery, error) {
	var (
		code  int64
		taken []dequeued
		took  bool
	)
	err := cmd.Err()
	if err == nil {
		code, taken, took, err = parseSettleTakeReply(script, cmd.Val())
		if err == nil && took && t == nil {
			err = malformed(script, nil, "a take's reply to a call that asked for none")
		}
	}
	if t != nil && !took && code != statusChordDue && (again || err != nil) {
		// A run whose reply never came back as a take (lost, cut off by
		// ctx, malformed, or answered by the run again) may have taken a
		// task nobody runs. A first run's own refusal took nothing.
		t.s.releaseFetch(ctx, t.q, t.token, t.start)
	}
	if err != nil {
		return nil, fmt.Errorf("acknowledge task %s: %w", d.Signature.UUID, err)
	}
	if err := settledUnlessDue(d, code); err != nil {
		return nil, err
	}
	if len(taken) == 0 {
		return nil, nil
	}
	return t.s.deliveries(t.q, taken, t.start)[0], nil
}

// AckSuccess writes state, the SUCCESS state of d's task (a group
// member's also in its group), publishes next, the tasks that follow it,
// with their PENDING states, and acknowledges the task: one script, only
// if the caller holds the lease, so a worker that lost its lease writes
// and sends nothing. A next task that its queue still holds counts as sent
// and is left alone, and after a recovery (d.Recovered > 0) so is one
// whose state shows it started or finished. A node of a workflow's graph
// (Signature.WorkflowNode) records its success in the graph, and the
// nodes it makes ready are sent in the same script. A chord member whose success
// completes its group is written and committed but not acknowledged: the
// error wraps ErrChordDue, and the lease is kept. With take, it then
// takes the next task of d's queue for the caller and returns it. Only on
// a single server (OneNode), where one script may touch the state, group
// and other queues' keys.
func (s *Store) AckSuccess(ctx context.Context, d *store.Delivery, state *tasks.TaskState, next []*tasks.Signature, take *store.Take) (*store.Delivery, error) {
	sig := d.Signature
	id := sig.UUID
	if !s.oneNode {
		return nil, fmt.Errorf("acknowledge task %s with its result: the state key is on another node", id)
	}
	w, err := encodeState(state)
	if err != nil {
		return nil, fmt.Errorf("set state success of task %s: %w", id, err)
	}
	qk := s.keys.queue(d.Queue)
	keys := []string{qk.task + id, qk.lease, qk.completed, s.keys.state(id)}
	var member string
	if sig.GroupUUID != "" {
		if err := validGroup(sig.GroupUUID); err != nil {
			return nil, fmt.Errorf("set state success of task %s: %w", id, err)
		}
		raw, err := json.Marshal(state)
		if err != nil {
			return nil, fmt.Errorf("set state success of task %s: %w", id, err)
		}
		member = string(raw)
		keys = append(keys, s.keys.group(sig.GroupUUID).all()...)
	}
	recovered := "0"
	if d.Recovered > 0 {
		recovered = "1"
	}
	fields := w.fields()
	args := make([]interface{}, 0, 15+len(fields)+len(next)*4)
	args = append(args, id, d.Lease.Token(), s.opts.CompletedRetention.Milliseconds(), s.opts.ResultsExpireIn.Milliseconds(),
		member, formatTime(state.CreatedAt), sig.GroupTaskCount, s.opts.ResultsExpireIn.Milliseconds(), s.groupTTL().Milliseconds(),
		recovered, 0, chordFlag(sig), len(fields))
	args = append(args, fields...)
	if sig.WorkflowNode != "" {
		results := state.Results
		if results == nil {
			results = []*tasks.TaskResult{}
		}
		raw, err := json.Marshal(results)
		if err != nil {
			return nil, fmt.Errorf("set state success of task %s: %w", id, err)
		}
		keys = append(keys, s.keys.graph(sig.WorkflowUUID).all()...)
		args = append(args, sig.WorkflowNode, raw, s.graphTTL(0).Milliseconds())
	} else {
		args = append(args, "", "", 0)
	}
	for _, n := range next {
		if err := checkSig(n); err != nil {
			return nil, fmt.Errorf("send the tasks after task %s: %w", id, err)
		}
		msg, err := s.message(n)
		if err != nil {
			return nil, fmt.Errorf("send the tasks after task %s: %w", id, err)
		}
		queue, err := s.route(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("send task %s after task %s: %w", n.UUID, id, err)
		}
		n.RoutingKey = queue
		if err := s.registerQueue(ctx, n.RoutingKey); err != nil {
			return nil, err
		}
		q := &enqueueArgs{queue: s.keys.queue(n.RoutingKey), keyed: true}
		if err := s.addEncoded(q, n, msg); err != nil {
			return nil, fmt.Errorf("send task %s after task %s: %w", n.UUID, id, err)
		}
		nk := q.queue
		keys = append(keys, nk.pending, nk.scheduled, nk.archived, nk.notify, nk.task+n.UUID, q.stateKeys[0])
		args = append(args, q.tasks...)
	}
	t := s.newTaking(d.Queue, take)
	if t != nil {
		tk := t.keys()
		args[10] = len(tk) // ARGV[12]: RunSettle puts ARGV[1] before args
		keys = append(keys, tk...)
		args = append(args, t.args()...)
	}
	cmd, again := s.batch.RunSettle(ctx, id, ackSuccessScript, d.Lease.Valid, keys, args...)
	return t.settled(ctx, d, "ack_success", cmd, again)
}

// Commit records outcome, the final state of d's task, in the task, only
// while the caller holds d's lease (else an error wrapping ErrLeaseLost,
// and nothing is written). A worker that takes the task after this finds
// the outcome in its delivery and finishes it instead of running it.
func (s *Store) Commit(ctx context.Context, d *store.Delivery, outcome *tasks.TaskState) error {
	_, err := s.commit(ctx, d, outcome, true, false)
	return err
}

// WriteState writes state, a state of d's task, only while the caller holds
// d's lease; with record, it is also recorded as the task's outcome (see
// Commit). A final state of a group member is recorded in its group, and
// how many members have finished is returned. On a single server only
// (OneNode), where the state and group keys may be touched by the queue's
// script.
func (s *Store) WriteState(ctx context.Context, d *store.Delivery, state *tasks.TaskState, record bool) (int64, error) {
	if !s.oneNode {
		return 0, fmt.Errorf("set state %s of task %s under its lease: the state key is on another node", strings.ToLower(state.State), d.Signature.UUID)
	}
	return s.commit(ctx, d, state, record, true)
}

// commit runs commit.lua for d: the outcome recorded (with record), and the
// state written (with write), a group member's final state recorded in its
// group.
func (s *Store) commit(ctx context.Context, d *store.Delivery, state *tasks.TaskState, record, write bool) (int64, error) {
	sig := d.Signature
	id := sig.UUID
	op := "commit " + strings.ToLower(state.State)
	w, err := encodeState(state)
	if err != nil {
		return 0, fmt.Errorf("%s of task %s: %w", op, id, err)
	}
	member := write && sig.GroupUUID != "" && state.IsCompleted()
	var outcome string
	if record || member {
		raw, err := json.Marshal(state)
		if err != nil {
			return 0, fmt.Errorf("%s of task %s: encode state: %w", op, id, err)
		}
		outcome = string(raw)
	}
	qk := s.keys.queue(d.Queue)
	keys := []string{qk.task + id}
	args := []interface{}{id, d.Lease.Token(), outcome, s.opts.ResultsExpireIn.Milliseconds(), formatTime(state.CreatedAt),
		sig.GroupTaskCount, s.opts.ResultsExpireIn.Milliseconds(), s.groupTTL().Milliseconds()}
	if write {
		keys = append(keys, s.keys.state(id))
		args = append(args, w.fields()...)
	}
	if member {
		if err := validGroup(sig.GroupUUID); err != nil {
			return 0, fmt.Errorf("%s of task %s: %w", op, id, err)
		}
		keys = append(keys, s.keys.group(sig.GroupUUID).all()...)
	}
	cmd := s.batch.RunScript(ctx, id, commitScript, keys, args...)
	err = cmd.Err()
	var code, finished int64
	if err == nil {
		code, finished, err = parseCommitReply(cmd.Val())
	}
	if err != nil {
		return 0, fmt.Errorf("%s of task %s: %w", op, id, err)
	}
	if err := statusError(code, id); err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			d.Lease.Lose()
		}
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return finished, nil
}

// Retry schedules d's task to run again at at, storing its signature as it
// is now and errMsg as its last error, if the caller holds its lease.
func (s *Store) Retry(ctx context.Context, d *store.Delivery, at time.Time, errMsg string) error {
	qk := s.keys.queue(d.Queue)
	id := d.Signature.UUID
	msg, err := storedMessage(d.Signature)
	if err != nil {
		return fmt.Errorf("retry task %s: %w", id, err)
	}
	err = s.runSettle(ctx, retryScript, id, d.Lease.Valid, []string{qk.task + id, qk.lease, qk.retry, qk.pending, qk.notify},
		id, d.Lease.Token(), msg, msOf(at), errMsg)
	return settled(d, err)
}

// Archive keeps d's task as a dead letter with reason, if the caller holds
// its lease.
func (s *Store) Archive(ctx context.Context, d *store.Delivery, reason string) error {
	qk := s.keys.queue(d.Queue)
	id := d.Signature.UUID
	err := s.runSettle(ctx, archiveScript, id, d.Lease.Valid, []string{qk.task + id, qk.lease, qk.archived},
		id, d.Lease.Token(), reason, s.opts.ArchiveMaxAge.Milliseconds(), s.opts.ArchiveMaxSize, qk.task)
	return settled(d, err)
}

// Requeue puts unfinished tasks back at the head of their queues, those
// whose lease the caller holds; the others are reported with ErrLeaseLost.
func (s *Store) Requeue(ctx context.Context, ds []*store.Delivery) error {
	byQueue := make(map[string][]*store.Delivery)
	var order []string
	for _, d := range ds {
		if _, ok := byQueue[d.Queue]; !ok {
			order = append(order, d.Queue)
		}
		byQueue[d.Queue] = append(byQueue[d.Queue], d)
	}
	var errs []error
	for _, q := range order {
		group := byQueue[q]
		qk := s.keys.queue(q)
		args := make([]interface{}, 0, 1+2*len(group))
		args = append(args, qk.task)
		for _, d := range group {
			args = append(args, d.Signature.UUID, d.Lease.Token())
		}
		holds := func() bool {
			return slices.ContainsFunc(group, func(d *store.Delivery) bool { return d.Lease.Valid() })
		}
		cmd, _ := s.batch.RunSettle(ctx, group[0].Signature.UUID, requeueScript, holds, []string{qk.pending, qk.lease, qk.notify}, args...)
		err := cmd.Err()
		var lostIDs []string
		if err == nil {
			lostIDs, err = parseRequeueReply(cmd.Val())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("requeue to queue %s: %w", q, err))
			continue
		}
		lost := make(map[string]bool, len(lostIDs))
		for _, id := range lostIDs {
			lost[id] = true
		}
		for _, d := range group {
			if lost[d.Signature.UUID] {
				d.Lease.Lose()
				errs = append(errs, fmt.Errorf("requeue task %s: %w", d.Signature.UUID, store.ErrLeaseLost))
			} else {
				d.Lease.Release()
			}
		}
	}
	return errors.Join(errs...)
}

// runSettle runs a settle script of task id directly, as
// Batcher.RunSettle does through the batcher, and maps its status code.
func (s *Store) runSettle(ctx context.Context, script *goredis.Script, id string, holds func() bool, keys []string, args ...interface{}) error {
	cmd, err := s.evalSettle(ctx, script, holds, keys, args)
	var code int64
	if err == nil {
		code, err = cmd.Int64()
	}
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	return statusError(code, id)
}

// evalSettle runs a settle script (its first argument the "again" flag
// lib/fence.lua's check_settle reads, prepended to args) as a command
// go-redis does not send a second time, and sends it again, flagged, for
// as long as holds says the caller holds its lease.
func (s *Store) evalSettle(ctx context.Context, script *goredis.Script, holds func() bool, keys []string, args []interface{}) (*goredis.Cmd, error) {
	args = append([]interface{}{"0"}, args...)
	var cmd *goredis.Cmd
	err := transport.Again(ctx, func() error {
		cmd = s.repl.Eval(ctx, s.client, true, script, keys, args)
		return cmd.Err()
	}, transport.Retry{While: holds, Before: func(bool) { args[0] = "1" }})
	return cmd, err
}
