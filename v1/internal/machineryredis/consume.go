package machineryredis

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// StartConsuming runs Consume on p's queue (CustomQueue, else the default
// queue), with the delayed tasks moved, until StopConsuming, then returns
// once the tasks it took have finished.
func (b *Broker) StartConsuming(consumerTag string, concurrency int, p brokers.TaskProcessor) (bool, error) {
	b.mu.Lock()
	r := b.round
	stopped := r.stopped
	select {
	case <-stopped:
		b.mu.Unlock()
		return false, nil
	default:
	}
	r.calls.Add(1) // under mu: before the StopConsuming of its round waits
	b.mu.Unlock()
	defer r.calls.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	queue := p.CustomQueue()
	if queue == "" {
		queue = b.GetConfig().DefaultQueue
	}
	go b.MoveDelayed(ctx, b.delayedPollPeriod())
	b.Consume(ctx, context.Background(), queue, concurrency, p)
	return false, nil
}

// StopConsuming stops every StartConsuming and returns once they have
// returned, their running tasks finished. Safe to call more than once.
func (b *Broker) StopConsuming() {
	b.mu.Lock()
	r := b.round
	select {
	case <-r.stopped:
	default:
		close(r.stopped)
	}
	b.mu.Unlock()
	r.calls.Wait()
}

// RearmConsuming readies the broker, if StopConsuming stopped it, to
// consume again.
func (b *Broker) RearmConsuming() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.round.stopped:
		b.round = newRound()
	default:
	}
}

// Consume takes the tasks of queue and hands each to p.Process,
// concurrency at a time, while p.PreConsumeHandler says so, until ctx
// ends; then it returns once the tasks it took have finished, or once
// abandon ends, leaving those still running (it logs how many). A task
// whose name p lacks (p.IsTaskRegistered where p has that method, else
// the names SetRegisteredTaskNames recorded) goes back to the tail of its
// queue, as in machinery, for a worker that has it.
func (b *Broker) Consume(ctx, abandon context.Context, queue string, concurrency int, p brokers.TaskProcessor) {
	if concurrency < 1 {
		concurrency = 1
	}
	registered := b.IsTaskRegistered
	if r, ok := p.(interface{ IsTaskRegistered(string) bool }); ok {
		registered = r.IsTaskRegistered
	}
	var (
		running sync.WaitGroup
		active  atomic.Int64
	)
	defer func() {
		idle := make(chan struct{})
		go func() {
			defer close(idle)
			running.Wait()
		}()
		select {
		case <-idle:
		case <-abandon.Done():
			b.log.Warn("machinery queue: tasks still running when the worker stopped were left to finish",
				slog.String("queue", queue), slog.Int64("tasks", active.Load()))
		}
	}()
	slots := make(chan struct{}, concurrency)
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if ctx.Err() != nil {
			return
		}
		sig, msg := b.take(ctx, queue, p)
		if sig == nil {
			<-slots
			if ctx.Err() != nil {
				if msg != nil {
					b.putBack(ctx, queue, msg)
				}
				return
			}
			continue
		}
		if !registered(sig.Name) {
			<-slots
			b.requeueUnknown(ctx, queue, msg, sig)
			continue
		}
		running.Add(1)
		active.Add(1)
		go func() {
			defer func() { <-slots; active.Add(-1); running.Done() }()
			if err := p.Process(sig); err != nil {
				b.log.Error("machinery queue: task's state or what follows it not written",
					slog.String("task", sig.UUID), slog.Any("error", err))
			}
		}()
	}
}

// take returns the next task of queue and its message, once p takes
// tasks; nil when none came within the poll period, or when ctx ended
// (msg is then a message taken, to put back).
func (b *Broker) take(ctx context.Context, queue string, p brokers.TaskProcessor) (sig *tasks.Signature, msg []byte) {
	if !p.PreConsumeHandler() {
		b.pause(ctx, b.pollPeriod())
		return nil, nil
	}
	msg, err := b.next(ctx, queue)
	switch {
	case ctx.Err() != nil:
		return nil, msg
	case err != nil:
		b.log.Warn("machinery queue: BLPOP failed", slog.String("queue", queue), slog.Any("error", err))
		b.pause(ctx, b.pollPeriod())
		return nil, nil
	case msg == nil:
		return nil, nil
	}
	sig, err = decode(msg)
	if err != nil {
		b.log.Error("machinery queue: dropped a message that is not a signature", slog.String("queue", queue), slog.Any("error", err))
		return nil, nil
	}
	return sig, msg
}

// putBack returns msg, taken as the worker stopped and not begun, to the
// head of queue.
func (b *Broker) putBack(ctx context.Context, queue string, msg []byte) {
	if err := b.client.LPush(context.WithoutCancel(ctx), queue, msg).Err(); err != nil {
		b.log.Error("machinery queue: could not put back a task taken as the worker stopped; it is lost",
			slog.String("queue", queue), slog.Any("error", err))
	}
}

// requeueUnknown puts a task whose name this worker lacks back at the
// tail of its queue, for a worker that has it, unless it asks to be
// ignored; the pause keeps a queue of only such tasks from being turned
// over in a loop.
func (b *Broker) requeueUnknown(ctx context.Context, queue string, msg []byte, sig *tasks.Signature) {
	if sig.IgnoreWhenTaskNotRegistered {
		return
	}
	if err := b.client.RPush(context.WithoutCancel(ctx), queue, msg).Err(); err != nil {
		b.log.Error("machinery queue: could not requeue a task not registered here; it is lost",
			slog.String("task", sig.UUID), slog.String("name", sig.Name), slog.Any("error", err))
	}
	b.pause(ctx, b.pollPeriod())
}

// next takes the next message of queue, waiting up to the poll period
// rounded up to whole seconds (BLPOP's unit, as machinery rounds it);
// nil when there is none. The pop is not cut short when ctx ends: a
// message Redis popped for a reply that was abandoned would be lost.
func (b *Broker) next(ctx context.Context, queue string) ([]byte, error) {
	wait := max(time.Second, b.pollPeriod().Round(time.Second))
	if wait < b.pollPeriod() {
		wait += time.Second
	}
	items, err := b.client.BLPop(context.WithoutCancel(ctx), wait, queue).Result()
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

// MoveDelayed moves the due delayed tasks to their queues every period
// until ctx ends.
func (b *Broker) MoveDelayed(ctx context.Context, period time.Duration) {
	for {
		b.pause(ctx, period)
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
