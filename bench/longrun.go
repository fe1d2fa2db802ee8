package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	machinist "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// ---- longrun ----------------------------------------------------------
//
// What long-running tasks cost (machinist only): the Redis commands and
// CPU per task of a task that reports its progress 100 times and
// checkpoints 10 times, against the same task without them; and what a
// reader watching 1,000 running tasks costs Redis per second.

const (
	longrunTasks       = 1000
	longrunProgress    = 100
	longrunCheckpoints = 10
	longrunWatched     = 1000
	longrunWatchFor    = 5 * time.Second
)

func (b *bench) longrun(ctx context.Context, lib string, rep int) {
	if lib != "machinist" {
		return
	}
	for _, withData := range []bool{false, true} {
		variant := fmt.Sprintf("%d tasks, c=10, no progress or checkpoint", longrunTasks)
		if withData {
			variant = fmt.Sprintf("%d tasks, c=10, each with %d progress reports and %d checkpoints", longrunTasks, longrunProgress, longrunCheckpoints)
		}
		if err := b.longrunCost(ctx, rep, variant, withData); err != nil {
			b.addErr(lib, "longrun", variant+": Redis commands", "per task", rep, err)
		}
	}
	variant := fmt.Sprintf("%d running tasks, each followed by a Watch", longrunWatched)
	if err := b.longrunWatch(ctx, rep, variant); err != nil {
		b.addErr(lib, "longrun", variant+": Redis commands", "commands/s", rep, err)
	}
}

// taskServer opens a machinist server on the bench's Redis, reset, with
// task registered as "long".
func (b *bench) taskServer(ctx context.Context, task interface{}) (*machinist.Server, error) {
	if err := b.redis.reset(ctx); err != nil {
		return nil, err
	}
	s, err := machinist.NewServer(&config.Config{
		Broker: "redis://" + b.redis.addr, NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	if err := s.RegisterTask("long", task); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (b *bench) longrunCost(ctx context.Context, rep int, variant string, withData bool) error {
	var done atomic.Int64
	finished := make(chan struct{})
	s, err := b.taskServer(ctx, func(ctx context.Context) error {
		if withData {
			for i := range int64(longrunProgress) {
				if err := tasks.SetProgress(ctx, tasks.Progress{Done: i + 1, Total: longrunProgress}); err != nil {
					return err
				}
				if (i+1)%(longrunProgress/longrunCheckpoints) == 0 {
					if err := tasks.Checkpoint(ctx, i+1); err != nil {
						return err
					}
				}
			}
		}
		if done.Add(1) == longrunTasks {
			close(finished)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer s.Close()
	for range longrunTasks {
		if _, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "long"}); err != nil {
			return err
		}
	}
	in0, err := b.redis.info(ctx)
	if err != nil {
		return err
	}
	w := s.NewWorker("bench", 10)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	ok := wait(ctx, finished, 2*time.Minute)
	w.Quit()
	<-errs
	if !ok {
		return fmt.Errorf("%d of %d tasks ran in 2 minutes", done.Load(), longrunTasks)
	}
	in1, err := b.redis.info(ctx)
	if err != nil {
		return err
	}
	n := float64(longrunTasks)
	b.add("machinist", "longrun", variant+": Redis commands", "per task", rep, float64(in1.calls-in0.calls)/n)
	b.add("machinist", "longrun", variant+": Redis CPU", "µs/task", rep, (in1.cpuSeconds-in0.cpuSeconds)*1e6/n)
	return nil
}

func (b *bench) longrunWatch(ctx context.Context, rep int, variant string) error {
	release := make(chan struct{})
	var started atomic.Int64
	allStarted := make(chan struct{})
	s, err := b.taskServer(ctx, func(ctx context.Context) error {
		if err := tasks.Emit(ctx, "started"); err != nil {
			return err
		}
		if started.Add(1) == longrunWatched {
			close(allStarted)
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer s.Close()
	w := s.NewWorker("bench", longrunWatched)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	defer func() { w.Quit(); <-errs }()
	defer close(release)
	results := make([]*result.AsyncResult, longrunWatched)
	for i := range results {
		if results[i], err = s.SendTaskWithContext(ctx, &tasks.Signature{Name: "long"}); err != nil {
			return err
		}
	}
	if !wait(ctx, allStarted, time.Minute) {
		return fmt.Errorf("%d of %d tasks started in a minute", started.Load(), longrunWatched)
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var seen atomic.Int64
	for _, r := range results {
		wg.Go(func() {
			for _, err := range r.Watch(wctx, "") {
				if err != nil {
					return
				}
				seen.Add(1)
			}
		})
	}
	// The first reads (each reader's events so far) are not counted.
	time.Sleep(time.Second)
	in0, err := b.redis.info(ctx)
	if err != nil {
		cancel()
		wg.Wait()
		return err
	}
	t0 := time.Now()
	time.Sleep(longrunWatchFor)
	in1, err := b.redis.info(ctx)
	elapsed := time.Since(t0)
	cancel()
	wg.Wait()
	if err != nil {
		return err
	}
	if seen.Load() < longrunWatched {
		return fmt.Errorf("the readers saw %d events, want at least one each (%d)", seen.Load(), longrunWatched)
	}
	b.add("machinist", "longrun", variant+": Redis commands", "commands/s", rep, float64(in1.calls-in0.calls)/elapsed.Seconds())
	b.add("machinist", "longrun", variant+": Redis CPU", "% of a core", rep, (in1.cpuSeconds-in0.cpuSeconds)*100/elapsed.Seconds())
	return nil
}
