// Package machineryredis is machinery v1's Redis broker and result
// backend, on machinery's keys and formats (internal/rdb's Machinery), for
// the migration mode (see config.Config.MachineryBroker): a machinist
// worker runs the tasks machinery programs send, and machinery's clients
// read the results.
//
// It keeps machinery's delivery semantics (a task taken is out of Redis
// until its worker sends what follows it) and fixes two of its defects: a
// due task moves from the sorted set to its queue in one script, and
// every due task moves on each poll, not one.
package machineryredis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/b6192125/machinist/internal/rdb"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Broker is machinery's Redis broker. Its tasks are taken with Consume;
// it has machinery's StartConsuming only to be a brokers.Broker.
type Broker struct {
	brokers.Compat // the config and the registered names
	redis          *rdb.Machinery
	delayedKey     string
	log            *slog.Logger
}

var _ brokers.Broker = (*Broker)(nil)

// NewBroker returns machinery's broker on m, with cnf's DefaultQueue,
// poll period and delayed tasks' key; cnf has its defaults
// (config.WithDefaults) and a Logger.
func NewBroker(m *rdb.Machinery, cnf *config.Config) *Broker {
	b := &Broker{redis: m, delayedKey: cnf.Redis.DelayedTasksKey, log: cnf.Logger}
	b.SetConfig(cnf)
	return b
}

// Publish sends sig to its queue, or, with an ETA in the future, to the
// delayed tasks, as machinery's Publish does.
func (b *Broker) Publish(ctx context.Context, sig *tasks.Signature) error {
	b.AdjustRoutingKey(sig)
	msg, err := json.Marshal(sig)
	if err != nil {
		return fmt.Errorf("JSON marshal error: %w", err)
	}
	if sig.ETA != nil && sig.ETA.After(time.Now()) {
		return b.redis.Delay(ctx, b.delayedKey, msg, *sig.ETA)
	}
	return b.redis.Push(ctx, sig.RoutingKey, msg)
}

// GetPendingTasks lists the tasks of queue (the default queue when
// empty).
func (b *Broker) GetPendingTasks(queue string) ([]*tasks.Signature, error) {
	if queue == "" {
		queue = b.GetConfig().DefaultQueue
	}
	return decodeAll(b.redis.List(context.Background(), queue))
}

// GetDelayedTasks lists the tasks waiting for their ETA.
func (b *Broker) GetDelayedTasks() ([]*tasks.Signature, error) {
	return decodeAll(b.redis.ListDelayed(context.Background(), b.delayedKey))
}

// errConsume is StartConsuming's: the migration mode's workers take
// machinery's tasks with Consume.
var errConsume = errors.New("machineryredis: the migration mode's workers take machinery's tasks with Consume, not StartConsuming")

// StartConsuming fails with errConsume.
func (b *Broker) StartConsuming(string, int, brokers.TaskProcessor) (bool, error) {
	return false, errConsume
}

// StopConsuming does nothing: Consume stops with its context.
func (b *Broker) StopConsuming() {}

func decodeAll(msgs []string, err error) ([]*tasks.Signature, error) {
	if err != nil {
		return nil, err
	}
	sigs := make([]*tasks.Signature, len(msgs))
	for i, msg := range msgs {
		if sigs[i], err = decode([]byte(msg)); err != nil {
			return nil, err
		}
	}
	return sigs, nil
}

// decode reads a message as machinery does, numbers as json.Number.
func decode(msg []byte) (*tasks.Signature, error) {
	sig, err := decodeJSON[tasks.Signature](msg)
	if err != nil {
		return nil, fmt.Errorf("could not unmarshal %q into a signature: %w", msg, err)
	}
	return sig, nil
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
