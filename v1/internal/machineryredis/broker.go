// Package machineryredis is machinery v1's Redis broker and result
// backend, on machinery's keys and formats, for the migration mode (see
// config.Config.MachineryBroker): a machinist worker runs the tasks machinery
// programs send, and machinery's clients read the results.
//
// Keys, as machinery's: a queue is a list named by the queue, of JSON
// signatures (RPUSH to send, BLPOP to take); tasks waiting for their ETA
// are in one sorted set (delayed_tasks) scored by the ETA in Unix
// nanoseconds; a task's state is a JSON string under its UUID, a group's
// bookkeeping one under the group's UUID, both expiring ResultsExpireIn
// after each write. It keeps machinery's delivery semantics (a task
// taken is out of Redis until its worker sends what follows it) and fixes
// two of its defects: a due task moves from the sorted set to its queue
// in one script, and every due task moves on each poll, not one.
package machineryredis

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// DefaultDelayedTasksKey is machinery's sorted set of tasks waiting for
// their ETA.
const DefaultDelayedTasksKey = "delayed_tasks"

// Broker is machinery's Redis broker.
type Broker struct {
	brokers.Compat // the config and the registered names

	client     goredis.UniversalClient
	delayedKey string
	log        *slog.Logger

	mu    sync.Mutex
	round *round // the StartConsuming calls since the last RearmConsuming
}

var _ brokers.Broker = (*Broker)(nil)

// NewBroker returns machinery's broker on client, with cnf's DefaultQueue
// and poll periods, and its delayed tasks in delayedKey (empty:
// DefaultDelayedTasksKey).
func NewBroker(client goredis.UniversalClient, cnf *config.Config, delayedKey string) *Broker {
	if delayedKey == "" {
		delayedKey = DefaultDelayedTasksKey
	}
	log := cnf.Logger
	if log == nil {
		log = slog.Default()
	}
	b := &Broker{client: client, delayedKey: delayedKey, log: log, round: newRound()}
	b.SetConfig(cnf)
	return b
}

// round is a stretch of consuming between a RearmConsuming and the
// StopConsuming that ends it: the calls of StartConsuming it runs, and
// the channel that stops them.
type round struct {
	stopped chan struct{}
	calls   sync.WaitGroup
}

func newRound() *round { return &round{stopped: make(chan struct{})} }

// Publish sends sig to its queue, or, with an ETA in the future, to the
// delayed tasks, as machinery's Publish does.
func (b *Broker) Publish(ctx context.Context, sig *tasks.Signature) error {
	b.AdjustRoutingKey(sig)
	msg, err := json.Marshal(sig)
	if err != nil {
		return fmt.Errorf("JSON marshal error: %w", err)
	}
	if sig.ETA != nil && sig.ETA.After(time.Now()) {
		return b.client.ZAdd(ctx, b.delayedKey, goredis.Z{Score: float64(sig.ETA.UnixNano()), Member: msg}).Err()
	}
	return b.client.RPush(ctx, sig.RoutingKey, msg).Err()
}

// GetPendingTasks lists the tasks of queue (the default queue when
// empty).
func (b *Broker) GetPendingTasks(queue string) ([]*tasks.Signature, error) {
	if queue == "" {
		queue = b.GetConfig().DefaultQueue
	}
	msgs, err := b.client.LRange(context.Background(), queue, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	return decodeAll(msgs)
}

// GetDelayedTasks lists the tasks waiting for their ETA.
func (b *Broker) GetDelayedTasks() ([]*tasks.Signature, error) {
	msgs, err := b.client.ZRange(context.Background(), b.delayedKey, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	return decodeAll(msgs)
}

func decodeAll(msgs []string) ([]*tasks.Signature, error) {
	sigs := make([]*tasks.Signature, len(msgs))
	for i, msg := range msgs {
		sig, err := decode([]byte(msg))
		if err != nil {
			return nil, err
		}
		sigs[i] = sig
	}
	return sigs, nil
}

// decode reads a message as machinery does, numbers as json.Number.
func decode(msg []byte) (*tasks.Signature, error) {
	d := json.NewDecoder(bytes.NewReader(msg))
	d.UseNumber()
	sig := new(tasks.Signature)
	if err := d.Decode(sig); err != nil {
		return nil, fmt.Errorf("could not unmarshal %q into a signature: %w", msg, err)
	}
	return sig, nil
}
