package machineryredis

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/b6192125/machinist/internal/rdb"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// chordMutex is the key of the lock machinery's workers take, all of them,
// to elect a chord's sender (redsync's mutex of that name); this backend
// takes it too, so that a machinery worker and a machinist worker
// finishing members of one group elect one sender between them.
const chordMutex = "TriggerChordMutex"

// Backend is machinery's Redis result backend.
type Backend struct {
	cnf   *config.Config
	redis *rdb.Machinery
	log   *slog.Logger
}

var _ backends.Backend = (*Backend)(nil)

// NewBackend returns machinery's backend on m, its states expiring as
// cnf's ResultsExpireIn says; cnf has its defaults (config.WithDefaults)
// and a Logger.
func NewBackend(m *rdb.Machinery, cnf *config.Config) *Backend {
	return &Backend{cnf: cnf, redis: m, log: cnf.Logger}
}

func (b *Backend) expiration() time.Duration {
	return time.Duration(b.cnf.ResultsExpireIn) * time.Second
}

func (b *Backend) set(ctx context.Context, key string, v any) error {
	msg, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.redis.Set(ctx, key, msg, b.expiration())
}

// get reads the JSON value under key; an error wrapping
// backends.ErrStateNotFound when there is none.
func get[T any](ctx context.Context, m *rdb.Machinery, key string) (*T, error) {
	msg, err := m.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if msg == nil {
		return nil, fmt.Errorf("%s: %w", key, backends.ErrStateNotFound)
	}
	return decodeJSON[T](msg)
}

// IsAMQP reports false.
func (b *Backend) IsAMQP() bool { return false }

// InitGroup records the group's members, in group order.
func (b *Backend) InitGroup(groupUUID string, taskUUIDs []string) error {
	return b.set(context.Background(), groupUUID, &tasks.GroupMeta{
		GroupUUID: groupUUID, TaskUUIDs: taskUUIDs, CreatedAt: time.Now().UTC(),
	})
}

// GroupCompleted reports whether groupTaskCount members have finished.
func (b *Backend) GroupCompleted(groupUUID string, groupTaskCount int) (bool, error) {
	states, err := b.GroupTaskStates(groupUUID, groupTaskCount)
	if err != nil {
		return false, err
	}
	done := 0
	for _, st := range states {
		if st.IsCompleted() {
			done++
		}
	}
	return done == groupTaskCount, nil
}

// GroupTaskStates returns the members' states in group order; a member
// without one is an error, as in machinery.
func (b *Backend) GroupTaskStates(groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error) {
	ctx := context.Background()
	meta, err := get[tasks.GroupMeta](ctx, b.redis, groupUUID)
	if err != nil {
		return nil, err
	}
	msgs, err := b.redis.GetAll(ctx, meta.TaskUUIDs)
	if err != nil {
		return nil, err
	}
	states := make([]*tasks.TaskState, len(msgs))
	for i, msg := range msgs {
		if msg == nil {
			return nil, fmt.Errorf("state of group member %s: %w", meta.TaskUUIDs[i], backends.ErrStateNotFound)
		}
		if states[i], err = decodeJSON[tasks.TaskState](msg); err != nil {
			return nil, err
		}
	}
	return states, nil
}

// TriggerChord returns true to the first caller for the group, under
// machinery's lock, so that machinery's workers and this one agree.
func (b *Backend) TriggerChord(groupUUID string) (bool, error) {
	ctx := context.Background()
	unlock, err := b.redis.Lock(ctx, chordMutex)
	if err != nil {
		return false, fmt.Errorf("machinery backend: %w", err)
	}
	defer func() {
		if err := unlock(); err != nil {
			// Every chord election of the fleet waits until it expires.
			b.log.Warn("machinery backend: "+chordMutex+" not released; it expires in 8 s", slog.Any("error", err))
		}
	}()
	meta, err := get[tasks.GroupMeta](ctx, b.redis, groupUUID)
	if err != nil {
		return false, err
	}
	if meta.ChordTriggered {
		return false, nil
	}
	meta.ChordTriggered = true
	if err := b.set(ctx, groupUUID, meta); err != nil {
		return false, err
	}
	return true, nil
}

// setState writes st, keeping the CreatedAt and TaskName of the state it
// replaces, as machinery does (with merge false, for PENDING, it does not).
func (b *Backend) setState(st *tasks.TaskState, merge bool) error {
	ctx := context.Background()
	if merge {
		if old, err := get[tasks.TaskState](ctx, b.redis, st.TaskUUID); err == nil {
			st.CreatedAt, st.TaskName = old.CreatedAt, old.TaskName
		}
	}
	return b.set(ctx, st.TaskUUID, st)
}

func (b *Backend) SetStatePending(sig *tasks.Signature) error {
	return b.setState(tasks.NewPendingTaskState(sig), false)
}

func (b *Backend) SetStateReceived(sig *tasks.Signature) error {
	return b.setState(tasks.NewReceivedTaskState(sig), true)
}

func (b *Backend) SetStateStarted(sig *tasks.Signature) error {
	return b.setState(tasks.NewStartedTaskState(sig), true)
}

func (b *Backend) SetStateRetry(sig *tasks.Signature) error {
	return b.setState(tasks.NewRetryTaskState(sig), true)
}

func (b *Backend) SetStateSuccess(sig *tasks.Signature, results []*tasks.TaskResult) error {
	return b.setState(tasks.NewSuccessTaskState(sig, results), true)
}

func (b *Backend) SetStateFailure(sig *tasks.Signature, errMsg string) error {
	return b.setState(tasks.NewFailureTaskState(sig, errMsg), true)
}

// GetState returns the task's state; an error wrapping
// backends.ErrStateNotFound when there is none.
func (b *Backend) GetState(taskUUID string) (*tasks.TaskState, error) {
	return get[tasks.TaskState](context.Background(), b.redis, taskUUID)
}

func (b *Backend) PurgeState(taskUUID string) error {
	return b.redis.Del(context.Background(), taskUUID)
}

func (b *Backend) PurgeGroupMeta(groupUUID string) error {
	return b.redis.Del(context.Background(), groupUUID)
}
