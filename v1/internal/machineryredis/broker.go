// Package machineryredis is machinery v1's Redis broker and result
// backend, on machinery's keys and formats, for the migration mode (see
// config.MigrationConfig): a machinist worker runs the tasks machinery
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
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/common"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// DefaultDelayedTasksKey is machinery's sorted set of tasks waiting for
// their ETA.
const DefaultDelayedTasksKey = "delayed_tasks"

// Broker is machinery's Redis broker.
type Broker struct {
	common.Broker
	client     goredis.UniversalClient
	delayedKey string
	log        *slog.Logger

	mu       sync.Mutex
	stop     context.CancelFunc // ends the current consumers' context
	ctx      context.Context
	consumer sync.WaitGroup
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
	return &Broker{Broker: common.NewBroker(cnf), client: client, delayedKey: delayedKey, log: log}
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

// context returns the context of the consumers running now, made by the
// first StartConsuming after a stop.
func (b *Broker) context() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil || b.ctx.Err() != nil {
		b.ctx, b.stop = context.WithCancel(context.Background())
	}
	return b.ctx
}

// StartConsuming runs Consume on p's queue (CustomQueue, else the default
// queue) until StopConsuming.
func (b *Broker) StartConsuming(consumerTag string, concurrency int, p brokers.TaskProcessor) (bool, error) {
	b.Broker.StartConsuming(consumerTag, concurrency, p)
	b.consumer.Add(1)
	defer b.consumer.Done()
	queue := p.CustomQueue()
	if queue == "" {
		queue = b.GetConfig().DefaultQueue
	}
	b.Consume(b.context(), queue, concurrency, p)
	return false, nil
}

// Consume takes the tasks of queue and hands each to p.Process,
// concurrency at a time, and moves due delayed tasks to their queues,
// until ctx ends; then it returns once the tasks it took have finished. A
// task whose name p's Server has not registered goes back to the tail of
// its queue, as in machinery, for a worker that has it.
func (b *Broker) Consume(ctx context.Context, queue string, concurrency int, p brokers.TaskProcessor) {
	if concurrency < 1 {
		concurrency = 1
	}
	var running sync.WaitGroup
	defer running.Wait()
	running.Add(1)
	go func() {
		defer running.Done()
		b.moveDelayed(ctx)
	}()
	slots := make(chan struct{}, concurrency)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if ctx.Err() != nil {
			return
		}
		msg, err := b.next(ctx, queue)
		if err != nil || msg == nil {
			<-slots
			if err != nil && ctx.Err() == nil {
				b.log.Warn("machinery queue: BLPOP failed", slog.String("queue", queue), slog.Any("error", err))
				b.pause(ctx, b.pollPeriod())
			}
			continue
		}
		running.Add(1)
		go func() {
			defer func() { <-slots; running.Done() }()
			b.consumeOne(ctx, queue, msg, p)
		}()
	}
}

// consumeOne runs one message through p, as machinery's consumeOne does.
func (b *Broker) consumeOne(ctx context.Context, queue string, msg []byte, p brokers.TaskProcessor) {
	sig, err := decode(msg)
	if err != nil {
		b.log.Error("machinery queue: dropped a message that is not a signature", slog.String("queue", queue), slog.Any("error", err))
		return
	}
	if !b.IsTaskRegistered(sig.Name) {
		if sig.IgnoreWhenTaskNotRegistered {
			return
		}
		// Back to the tail for a worker that has it; the pause keeps a
		// queue of only such tasks from being turned over in a loop.
		if err := b.client.RPush(context.WithoutCancel(ctx), queue, msg).Err(); err != nil {
			b.log.Error("machinery queue: could not requeue a task not registered here; it is lost",
				slog.String("task", sig.UUID), slog.String("name", sig.Name), slog.Any("error", err))
		}
		b.pause(ctx, b.pollPeriod())
		return
	}
	if err := p.Process(sig); err != nil {
		b.log.Error("machinery queue: task's state or what follows it not written", slog.String("task", sig.UUID), slog.Any("error", err))
	}
}

// next takes the next message of queue, waiting up to the poll period;
// nil when there is none. The pop is not cut short when ctx ends: a
// message Redis popped for a reply that was abandoned would be lost.
func (b *Broker) next(ctx context.Context, queue string) ([]byte, error) {
	items, err := b.client.BLPop(context.WithoutCancel(ctx), b.pollPeriod(), queue).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []byte(items[1]), nil
}

func (b *Broker) pollPeriod() time.Duration {
	if r := b.GetConfig().Redis; r != nil && r.NormalTasksPollPeriod > 0 {
		return time.Duration(r.NormalTasksPollPeriod) * time.Millisecond
	}
	return time.Second
}

func (b *Broker) delayedPollPeriod() time.Duration {
	if r := b.GetConfig().Redis; r != nil && r.DelayedTasksPollPeriod > 0 {
		return time.Duration(r.DelayedTasksPollPeriod) * time.Millisecond
	}
	return 500 * time.Millisecond
}

func (b *Broker) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// moveOne moves a due task from the delayed set to its queue only if it
// is still in the set, so that two processes polling at once move it
// once, and a crash between the two writes cannot lose it.
var moveOne = goredis.NewScript(`
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
	redis.call('RPUSH', KEYS[2], ARGV[1])
	return 1
end
return 0
`)

// moveDelayed moves the due delayed tasks to their queues every delayed
// poll period until ctx ends.
func (b *Broker) moveDelayed(ctx context.Context) {
	for {
		b.pause(ctx, b.delayedPollPeriod())
		if ctx.Err() != nil {
			return
		}
		if err := b.MoveDue(ctx, time.Now()); err != nil && ctx.Err() == nil {
			b.log.Warn("machinery queue: moving due delayed tasks failed", slog.Any("error", err))
		}
	}
}

// MoveDue moves every delayed task due at now to its queue.
func (b *Broker) MoveDue(ctx context.Context, now time.Time) error {
	for {
		due, err := b.client.ZRangeArgs(ctx, goredis.ZRangeArgs{
			Key: b.delayedKey, Start: "0", Stop: strconv.FormatInt(now.UnixNano(), 10),
			ByScore: true, Count: 100,
		}).Result()
		if err != nil {
			return err
		}
		for _, msg := range due {
			queue := b.GetConfig().DefaultQueue
			if sig, err := decode([]byte(msg)); err == nil && sig.RoutingKey != "" {
				queue = sig.RoutingKey
			}
			if err := moveOne.Run(ctx, b.client, []string{b.delayedKey, queue}, msg).Err(); err != nil {
				return err
			}
		}
		if len(due) < 100 {
			return nil
		}
	}
}

// StopConsuming stops every StartConsuming and returns once they have
// returned, their running tasks finished.
func (b *Broker) StopConsuming() {
	b.Broker.StopConsuming()
	b.mu.Lock()
	if b.stop != nil {
		b.stop()
	}
	b.mu.Unlock()
	b.consumer.Wait()
}
