package machineryredis

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// Processor runs what Consume takes: machinist's worker, as the
// migration mode hands it over.
type Processor interface {
	// Process runs the task to the end; an error says its state or what
	// follows it could not be written.
	Process(sig *tasks.Signature) error
	// PreConsumeHandler reports whether the worker takes tasks now.
	PreConsumeHandler() bool
	// IsTaskRegistered reports whether the worker has the task name.
	IsTaskRegistered(name string) bool
}

// Consume takes the tasks of queue and hands each to p.Process,
// concurrency at a time, while p.PreConsumeHandler says so, until ctx
// ends; then it returns once the tasks it took have finished, or once
// abandon ends, leaving those still running (it logs how many). A task
// whose name p lacks goes back to the tail of its queue, as in machinery,
// for a worker that has it.
func (b *Broker) Consume(ctx, abandon context.Context, queue string, concurrency int, p Processor) {
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
	slots := make(chan struct{}, max(1, concurrency))
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		sig, msg := b.take(ctx, queue, p)
		if sig == nil {
			<-slots
			if ctx.Err() != nil && msg != nil {
				// Taken as the worker stopped: back to the head, not begun.
				b.putBack(ctx, queue, msg)
			}
			continue
		}
		if !p.IsTaskRegistered(sig.Name) {
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
func (b *Broker) take(ctx context.Context, queue string, p Processor) (sig *tasks.Signature, msg []byte) {
	if ctx.Err() != nil {
		return nil, nil
	}
	if !p.PreConsumeHandler() {
		b.pause(ctx, b.pollPeriod())
		return nil, nil
	}
	msg, err := b.redis.Pop(ctx, queue, b.pollPeriod())
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
	if err := b.redis.PushFront(context.WithoutCancel(ctx), queue, msg); err != nil {
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
	if err := b.redis.Push(context.WithoutCancel(ctx), queue, msg); err != nil {
		b.log.Error("machinery queue: could not requeue a task not registered here; it is lost",
			slog.String("task", sig.UUID), slog.String("name", sig.Name), slog.Any("error", err))
	}
	b.pause(ctx, b.pollPeriod())
}

// pollPeriod is the longest a take waits: the config's
// NormalTasksPollPeriod.
func (b *Broker) pollPeriod() time.Duration {
	return time.Duration(b.GetConfig().Redis.NormalTasksPollPeriod) * time.Millisecond
}

func (b *Broker) pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// MoveDelayed moves the due delayed tasks to their queues every period
// until ctx ends.
func (b *Broker) MoveDelayed(ctx context.Context, period time.Duration) {
	for {
		b.pause(ctx, period)
		if ctx.Err() != nil {
			return
		}
		if err := b.redis.MoveDue(ctx, b.delayedKey, time.Now(), b.GetConfig().DefaultQueue); err != nil && ctx.Err() == nil {
			b.log.Warn("machinery queue: moving due delayed tasks failed", slog.Any("error", err))
		}
	}
}
