package machineryredis

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"time"

	goredis "github.com/redis/go-redis/v9"

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
	cnf    *config.Config
	client goredis.UniversalClient
	log    *slog.Logger
}

var _ backends.Backend = (*Backend)(nil)

// NewBackend returns machinery's backend on client, its states expiring
// as cnf's ResultsExpireIn says.
func NewBackend(client goredis.UniversalClient, cnf *config.Config) *Backend {
	log := cnf.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Backend{cnf: cnf, client: client, log: log}
}

func (b *Backend) expiration() time.Duration {
	if s := b.cnf.ResultsExpireIn; s > 0 {
		return time.Duration(s) * time.Second
	}
	return config.DefaultResultsExpireIn * time.Second
}

func (b *Backend) set(ctx context.Context, key string, v any) error {
	msg, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.client.Set(ctx, key, msg, b.expiration()).Err()
}

func get[T any](ctx context.Context, c goredis.UniversalClient, key string) (*T, error) {
	msg, err := c.Get(ctx, key).Bytes()
	if err != nil {
		return nil, err
	}
	return decodeJSON[T](msg)
}

func decodeJSON[T any](msg []byte) (*T, error) {
	d := json.NewDecoder(bytes.NewReader(msg))
	d.UseNumber()
	v := new(T)
	if err := d.Decode(v); err != nil {
		return nil, err
	}
	return v, nil
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

// GroupTaskStates returns the members' states in group order.
func (b *Backend) GroupTaskStates(groupUUID string, groupTaskCount int) ([]*tasks.TaskState, error) {
	ctx := context.Background()
	meta, err := get[tasks.GroupMeta](ctx, b.client, groupUUID)
	if err != nil {
		return nil, err
	}
	// One GET each, pipelined, as machinery's go-redis backend reads them.
	cmds, err := b.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, id := range meta.TaskUUIDs {
			p.Get(ctx, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	states := make([]*tasks.TaskState, len(cmds))
	for i, cmd := range cmds {
		msg, err := cmd.(*goredis.StringCmd).Bytes()
		if err != nil {
			return nil, err
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
	unlock, err := b.lock(ctx)
	if err != nil {
		return false, err
	}
	defer unlock()
	meta, err := get[tasks.GroupMeta](ctx, b.client, groupUUID)
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

// unlockScript deletes the lock only while it is still the caller's.
var unlockScript = goredis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

// lock takes chordMutex as redsync does (SET NX with an 8 s expiry, up to
// 32 tries 50 to 250 ms apart) and returns its release.
func (b *Backend) lock(ctx context.Context) (unlock func(), err error) {
	var token [16]byte
	if _, err := rand.Read(token[:]); err != nil {
		return nil, err
	}
	value := base64.StdEncoding.EncodeToString(token[:])
	for try := 0; try < 32; try++ {
		if try > 0 {
			time.Sleep(50*time.Millisecond + mathrand.N(200*time.Millisecond))
		}
		ok, err := b.client.SetNX(ctx, chordMutex, value, 8*time.Second).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return func() {
				if err := unlockScript.Run(context.WithoutCancel(ctx), b.client, []string{chordMutex}, value).Err(); err != nil {
					// Every chord election of the fleet waits until it expires.
					b.log.Warn("machinery backend: "+chordMutex+" not released; it expires in 8 s", slog.Any("error", err))
				}
			}, nil
		}
	}
	return nil, errors.New("machinery backend: lock " + chordMutex + " not taken in 32 tries")
}

// setState writes st, keeping the CreatedAt and TaskName of the state it
// replaces, as machinery does (with merge false, for PENDING, it does not).
func (b *Backend) setState(st *tasks.TaskState, merge bool) error {
	ctx := context.Background()
	if merge {
		if old, err := get[tasks.TaskState](ctx, b.client, st.TaskUUID); err == nil {
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
	st, err := get[tasks.TaskState](context.Background(), b.client, taskUUID)
	if errors.Is(err, goredis.Nil) {
		return nil, fmt.Errorf("state of task %s: %w", taskUUID, backends.ErrStateNotFound)
	}
	return st, err
}

func (b *Backend) PurgeState(taskUUID string) error {
	return b.client.Del(context.Background(), taskUUID).Err()
}

func (b *Backend) PurgeGroupMeta(groupUUID string) error {
	return b.client.Del(context.Background(), groupUUID).Err()
}
