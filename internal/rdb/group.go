package rdb

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// groupTTL is how long the bookkeeping of a group with unfinished members
// lives after its last write.
func (s *Store) groupTTL() time.Duration { return max(s.opts.ResultsExpireIn, GroupSafetyTTL) }

// InitGroup records the group's members in group order (duplicates
// dropped) and expects len(taskUUIDs) of them to finish. Members that
// finished before InitGroup stay recorded.
func (s *Store) InitGroup(ctx context.Context, groupUUID string, taskUUIDs []string) error {
	if groupUUID == "" {
		return fmt.Errorf("init group: %w", tasks.ErrEmptyGroupUUID)
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
		return fmt.Errorf("init group %s: %w", groupUUID, err)
	}
	err = s.batch.EvalDetached(ctx, false, initGroupScript, s.keys.group(groupUUID).all(), []interface{}{
		uuids, len(taskUUIDs), formatTime(time.Now()), s.opts.ResultsExpireIn.Milliseconds(), s.groupTTL().Milliseconds()}).Err()
	if err != nil {
		return fmt.Errorf("init group %s: %w", groupUUID, err)
	}
	return nil
}

// GroupCompleted reports whether groupTaskCount members of the group have
// finished: HLEN of the group's done hash, one O(1) read however large the
// group. A group with no bookkeeping is not completed (false, no error).
func (s *Store) GroupCompleted(ctx context.Context, groupUUID string, groupTaskCount int) (bool, error) {
	if groupUUID == "" {
		return false, nil
	}
	if err := validGroup(groupUUID); err != nil {
		return false, err
	}
	gk := s.keys.group(groupUUID)
	pipe := s.client.Pipeline()
	exists := pipe.Exists(ctx, gk.meta)
	done := pipe.HLen(ctx, gk.done)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("group completed of group %s: %w", groupUUID, err)
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
func (s *Store) GroupTaskStates(ctx context.Context, groupUUID string) ([]*tasks.TaskState, error) {
	if groupUUID == "" {
		return nil, fmt.Errorf("group %q: %w", groupUUID, store.ErrGroupNotFound)
	}
	if err := validGroup(groupUUID); err != nil {
		return nil, err
	}
	gk := s.keys.group(groupUUID)
	var (
		meta  *goredis.SliceCmd
		order *goredis.StringSliceCmd
		done  *goredis.MapStringStringCmd
	)
	_, err := s.client.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		meta = pipe.HMGet(ctx, gk.meta, "uuids", "count")
		order = pipe.LRange(ctx, gk.order, 0, -1)
		done = pipe.HGetAll(ctx, gk.done)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("group task states of group %s: %w", groupUUID, err)
	}
	members, found, err := parseGroupMeta(meta.Val())
	if err != nil {
		return nil, fmt.Errorf("group %s: %w", groupUUID, err)
	}
	if !found { // every group hash has a count
		return nil, fmt.Errorf("group %s: %w", groupUUID, store.ErrGroupNotFound)
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
			return nil, fmt.Errorf("group %s: decode state of task %s: %w", groupUUID, id, err)
		}
		out[i] = st
	}
	return out, nil
}

// TriggerChord elects the member that sends the group's chord callback:
// true to the first member that asks and again to that member, false to
// every other. One O(1) script, no lock. A group with no bookkeeping is an
// error wrapping ErrGroupNotFound.
func (s *Store) TriggerChord(ctx context.Context, groupUUID, memberUUID string) (bool, error) {
	if memberUUID == "" {
		return false, fmt.Errorf("trigger chord of group %s: no member UUID", groupUUID)
	}
	if groupUUID == "" {
		return false, fmt.Errorf("trigger chord: group %q: %w", groupUUID, store.ErrGroupNotFound)
	}
	if err := validGroup(groupUUID); err != nil {
		return false, err
	}
	cmd := s.repl.Eval(ctx, s.client, false, triggerChordScript, s.keys.group(groupUUID).all(), []interface{}{
		memberUUID, s.opts.ResultsExpireIn.Milliseconds(), s.groupTTL().Milliseconds()})
	err := cmd.Err()
	var code int64
	if err == nil {
		code, err = parseStatusReply("trigger_chord", cmd.Val(), chordLost, chordElected, chordNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("trigger chord of group %s by task %s: %w", groupUUID, memberUUID, err)
	}
	return chordResult(code, groupUUID, memberUUID)
}

// PurgeGroup deletes the group's bookkeeping; a missing group is not an
// error. The members' own states stay.
func (s *Store) PurgeGroup(ctx context.Context, groupUUID string) error {
	if groupUUID == "" {
		return nil
	}
	if err := validGroup(groupUUID); err != nil {
		return err
	}
	if err := s.client.Del(ctx, s.keys.group(groupUUID).all()...).Err(); err != nil {
		return fmt.Errorf("purge group meta of group %s: %w", groupUUID, err)
	}
	return nil
}
