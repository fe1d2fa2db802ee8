package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	machinist "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/tasks"
)

// ---- fair -------------------------------------------------------------
//
// What priorities and fair keys cost, and what fairness buys (machinist
// only): a backlog sent in bulk, then run by one worker (c=10), with no
// priority or key, with priorities 0 to 9, and with 1,000 fair keys; and
// how long a small tenant's one task waits behind a large tenant's
// backlog, on a plain queue and with fair keys.

const (
	fairTasks   = 20000
	fairKeys    = 1000
	fairBacklog = 20000
)

func (b *bench) fair(ctx context.Context, lib string, rep int) {
	if lib != "machinist" {
		return
	}
	for _, v := range []struct {
		name string
		mark func(i int, sig *tasks.Signature)
	}{
		{"no priority or fair key", func(int, *tasks.Signature) {}},
		{"priorities 0 to 9", func(i int, sig *tasks.Signature) { sig.Priority = uint8(i % 10) }},
		{fmt.Sprintf("%d fair keys", fairKeys), func(i int, sig *tasks.Signature) { sig.FairKey = "tenant-" + strconv.Itoa(i%fairKeys) }},
	} {
		variant := fmt.Sprintf("%d tasks, c=10, %s", fairTasks, v.name)
		if err := b.fairCost(ctx, rep, variant, v.mark); err != nil {
			b.addErr(lib, "fair", variant+": tasks/s", "tasks/s", rep, err)
		}
	}
	for _, keyed := range []bool{false, true} {
		variant := fmt.Sprintf("one task of tenant B sent behind %d of tenant A, plain queue", fairBacklog)
		if keyed {
			variant = fmt.Sprintf("one task of tenant B sent behind %d of tenant A, fair keys", fairBacklog)
		}
		if err := b.fairWait(ctx, rep, variant, keyed); err != nil {
			b.addErr(lib, "fair", variant+": until it starts", "ms", rep, err)
		}
	}
}

// fairSend sends n tasks marked by mark, in batches of 1,000.
func fairSend(ctx context.Context, s *machinist.Server, n int, mark func(i int, sig *tasks.Signature)) error {
	for start := 0; start < n; start += 1000 {
		sigs := make([]*tasks.Signature, min(1000, n-start))
		for i := range sigs {
			sigs[i] = &tasks.Signature{Name: "long", Args: []tasks.Arg{{Type: "string", Value: "a"}}}
			mark(start+i, sigs[i])
		}
		if _, err := s.SendTasks(ctx, sigs); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) fairCost(ctx context.Context, rep int, variant string, mark func(int, *tasks.Signature)) error {
	var done atomic.Int64
	finished := make(chan struct{})
	s, err := b.taskServer(ctx, func(string) error {
		if done.Add(1) == fairTasks {
			close(finished)
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer s.Close()
	in0, err := b.redis.info(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := fairSend(ctx, s, fairTasks, mark); err != nil {
		return err
	}
	sent := time.Since(t0)
	in1, err := b.redis.info(ctx)
	if err != nil {
		return err
	}
	w := s.NewWorker("bench", 10)
	errs := make(chan error, 1)
	t1 := time.Now()
	w.LaunchAsync(errs)
	ok := wait(ctx, finished, 2*time.Minute)
	ran := time.Since(t1)
	w.Quit()
	<-errs
	if !ok {
		return fmt.Errorf("%d of %d tasks ran in 2 minutes", done.Load(), fairTasks)
	}
	in2, err := b.redis.info(ctx)
	if err != nil {
		return err
	}
	n := float64(fairTasks)
	b.add("machinist", "fair", variant+": sent", "tasks/s", rep, n/sent.Seconds())
	b.add("machinist", "fair", variant+": run", "tasks/s", rep, n/ran.Seconds())
	b.add("machinist", "fair", variant+": Redis CPU to send", "µs/task", rep, (in1.cpuSeconds-in0.cpuSeconds)*1e6/n)
	b.add("machinist", "fair", variant+": Redis CPU to run", "µs/task", rep, (in2.cpuSeconds-in1.cpuSeconds)*1e6/n)
	b.add("machinist", "fair", variant+": Redis commands to run", "per task", rep, float64(in2.calls-in1.calls)/n)
	return nil
}

func (b *bench) fairWait(ctx context.Context, rep int, variant string, keyed bool) error {
	startedB := make(chan time.Time, 1)
	s, err := b.taskServer(ctx, func(who string) error {
		if who == "b" {
			startedB <- time.Now()
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := fairSend(ctx, s, fairBacklog, func(_ int, sig *tasks.Signature) {
		if keyed {
			sig.FairKey = "tenant-a"
		}
	}); err != nil {
		return err
	}
	w := s.NewWorker("bench", 10)
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	defer func() { w.Quit(); <-errs }()
	sig := &tasks.Signature{Name: "long", Args: []tasks.Arg{{Type: "string", Value: "b"}}}
	if keyed {
		sig.FairKey = "tenant-b"
	}
	t0 := time.Now()
	if _, err := s.SendTaskWithContext(ctx, sig); err != nil {
		return err
	}
	select {
	case at := <-startedB:
		b.add("machinist", "fair", variant+": until it starts", "ms", rep, float64(at.Sub(t0).Microseconds())/1000)
		return nil
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("tenant B's task did not start in 2 minutes")
	case <-ctx.Done():
		return ctx.Err()
	}
}
