package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	machinist "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// ---- scale ------------------------------------------------------------

const (
	// scaleMaxTasks caps the tasks of a scale run: min(n, scaleMaxTasks).
	scaleMaxTasks = 20000
	// scaleConcurrency is the worker's concurrency, as e2e's second row.
	scaleConcurrency = 100
	// scaleSenders are the goroutines that send, as in e2e.
	scaleSenders = 8
)

// scaleMasters are the cluster sizes measured, one cluster each.
var scaleMasters = []int{1, 2, 3}

// scaleQueues are the queues of the spread variant. Their slots (CRC16 of
// the name, machinist's hash tag {<queue>}) are 3387, 7450 and 11641: one
// on each master of three (slotRange), q0 and q1 on the first of two.
var scaleQueues = []string{"q0", "q1", "q2"}

// scaleShards is the shards of the sharded variant's queue: one per
// master of the largest cluster.
const scaleShards = 3

// scaleLayout is one way of sending the tasks: to the default queue, as
// it is or in scaleShards shards (RedisConfig.QueueShards), or
// round-robin over scaleQueues with a worker consuming all of them.
type scaleLayout struct {
	name   string // "one queue", "one queue in 3 shards", "3 queues"
	queues []string
	shards int // of queues[0], when more than 1
}

var scaleLayouts = []scaleLayout{
	{name: "one queue", queues: []string{config.DefaultQueueName}},
	{name: fmt.Sprintf("one queue in %d shards", scaleShards), queues: []string{config.DefaultQueueName}, shards: scaleShards},
	{name: fmt.Sprintf("%d queues", len(scaleQueues)), queues: scaleQueues},
}

func scaleVariant(l scaleLayout, masters int) string {
	if masters == 1 {
		return l.name + ", 1 master"
	}
	return fmt.Sprintf("%s, %d masters", l.name, masters)
}

// scale runs one repetition of the scale workload: for each cluster size
// it starts a Redis Cluster of that many masters, measures machinist's
// e2e throughput on it with one queue, with that queue in three shards,
// and with the tasks spread over three queues, and stops it. Only machinist is run: the other drivers have no
// cluster mode (n/a).
func (b *bench) scale(ctx context.Context, libs []string, rep int) {
	for _, lib := range libs {
		if lib == "machinist" {
			continue
		}
		for _, m := range scaleMasters {
			for _, l := range scaleLayouts {
				b.addErr(lib, "scale", scaleVariant(l, m), "tasks/s", rep,
					fmt.Errorf("%w: measured for machinist only (the bench's other drivers do not connect to a Redis Cluster)", errNA))
			}
		}
	}
	if !slices.Contains(libs, "machinist") {
		return
	}
	worst, measured := 0.0, false
	for _, m := range scaleMasters {
		if ctx.Err() != nil {
			return
		}
		pct, ok := b.scaleOn(ctx, m, rep)
		if ok {
			measured = true
			worst = max(worst, pct)
		}
	}
	if measured {
		b.rep.Interference("machinist", "scale", rep, worst)
	}
}

// scaleOn starts a cluster of masters masters and measures every layout on
// it. Like runQuietly, it repeats the measurements (not the cluster's
// start) up to b.retries times while other processes — neither this one,
// the bench's redis-server nor the cluster's — took interferenceWarn % or
// more of the CPUs, and returns the share they took in the kept attempt.
func (b *bench) scaleOn(ctx context.Context, masters, rep int) (otherPct float64, ok bool) {
	fmt.Fprintf(b.log, "  scale: %d master(s)\n", masters)
	failAll := func(err error) {
		if ctx.Err() != nil {
			return
		}
		for _, l := range scaleLayouts {
			b.addErr("machinist", "scale", scaleVariant(l, masters), "tasks/s", rep, err)
		}
	}
	t0 := time.Now()
	c, err := startCluster(ctx, masters)
	if err != nil {
		failAll(fmt.Errorf("start a cluster of %d masters: %w", masters, err))
		return 0, false
	}
	defer c.stop()
	fmt.Fprintf(b.log, "  scale: cluster %s ready in %s\n", c.url(), time.Since(t0).Round(time.Millisecond))
	for _, l := range scaleLayouts {
		for _, q := range l.queues {
			if err := c.checkSlot(ctx, "{"+q+"}"); err != nil {
				failAll(err)
				return 0, false
			}
		}
	}
	if masters == len(scaleQueues) {
		seen := map[int]bool{}
		for _, q := range scaleQueues {
			seen[c.masterOf(keySlot(q))] = true
		}
		if len(seen) != masters {
			failAll(fmt.Errorf("queues %v do not land on %d different masters", scaleQueues, masters))
			return 0, false
		}
	}
	for attempt := 0; ; attempt++ {
		b.rep.Hold()
		before := b.scaleCPU(c)
		for _, l := range scaleLayouts {
			if ctx.Err() != nil {
				break
			}
			b.scaleRun(ctx, c, l, rep)
		}
		pct, ok := otherCPUWithout(before, b.scaleCPU(c))
		if ok && pct >= interferenceWarn && attempt < b.retries && ctx.Err() == nil {
			b.rep.Discard()
			fmt.Fprintf(b.log, "  other processes took %.0f%% of the CPUs during this run: running it again\n", pct)
			continue
		}
		b.rep.Commit()
		if ok && pct >= interferenceWarn {
			fmt.Fprintf(b.log, "  warning: other processes took %.0f%% of the CPUs during this run; kept\n", pct)
		}
		return pct, ok
	}
}

// scaleSnapshot is readCPUSnapshot plus the cluster's nodes.
type scaleSnapshot struct {
	cpu     cpuSnapshot
	cluster int64
	ok      bool
}

func (b *bench) scaleCPU(c *redisCluster) scaleSnapshot {
	t, ok := c.ticks()
	return scaleSnapshot{cpu: readCPUSnapshot(b.redis.cmd.Process.Pid), cluster: t, ok: ok}
}

// otherCPUWithout is otherCPU with the cluster's nodes left out as well.
func otherCPUWithout(a, b scaleSnapshot) (float64, bool) {
	if !a.ok || !b.ok || !a.cpu.ok || !b.cpu.ok || b.cpu.total <= a.cpu.total {
		return 0, false
	}
	other := (b.cpu.busy - a.cpu.busy) - (b.cpu.self - a.cpu.self) - (b.cpu.redis - a.cpu.redis) - (b.cluster - a.cluster)
	if other < 0 {
		other = 0
	}
	return float64(other) / float64(b.cpu.total-a.cpu.total) * 100, true
}

// scaleRun measures one layout on c, e2e's way: min(n, 20000) no-op tasks
// are sent from 8 goroutines, then a worker of concurrency 100 is started
// in-process and timed until the last handler call. Rows: the run's
// tasks/s, the sending's tasks/s, each master's Redis CPU during the run
// (INFO cpu) in % of a core, and this process's CPU per task during the
// run (the worker and its go-redis cluster client).
func (b *bench) scaleRun(ctx context.Context, c *redisCluster, l scaleLayout, rep int) {
	const lib = "machinist"
	masters := len(c.nodes)
	variant := scaleVariant(l, masters)
	fail := func(err error) {
		if ctx.Err() == nil { // not an error when interrupted
			b.addErr(lib, "scale", variant, "tasks/s", rep, err)
		}
	}
	n := min(b.n, scaleMaxTasks)

	if err := c.reset(ctx); err != nil {
		fail(err)
		return
	}
	var calls atomic.Int64
	done := make(chan struct{})
	s, err := newScaleServer(c.url(), l, func() {
		if calls.Add(1) == int64(n) {
			close(done)
		}
	})
	if err != nil {
		fail(err)
		return
	}
	defer s.Close()

	sendStart := time.Now()
	if err := scaleSend(ctx, s, n, l.queues); err != nil {
		fail(err)
		return
	}
	sendElapsed := time.Since(sendStart)
	held := l.queues
	if l.shards > 1 {
		if held, err = c.shards(ctx, l.queues[0]); err != nil {
			fail(err)
			return
		}
	}

	cpu0, err := c.cpuSeconds(ctx)
	if err != nil {
		fail(err)
		return
	}
	self0 := processCPU()
	start := time.Now()
	var w *machinist.Worker
	if len(l.queues) == 1 && l.queues[0] == config.DefaultQueueName {
		w = s.NewWorker("bench-scale", scaleConcurrency)
	} else {
		weights := make(map[string]int, len(l.queues))
		for _, q := range l.queues {
			weights[q] = 1
		}
		w = s.NewQueuesWorker("bench-scale", scaleConcurrency, weights, false)
	}
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	ok := wait(ctx, done, time.Minute+time.Duration(n)*time.Millisecond)
	elapsed := time.Since(start)
	self1 := processCPU()
	cpu1, infoErr := c.cpuSeconds(ctx)
	w.Quit()
	<-errs
	if ctx.Err() != nil {
		return
	}
	if !ok {
		b.rep.Add(Result{Lib: lib, Workload: "scale", Variant: variant, Unit: "tasks/s", Rep: rep,
			Value: float64(calls.Load()) / elapsed.Seconds(), Status: statusTimeout,
			Note: fmt.Sprintf("%d of %d ran in %s", calls.Load(), n, elapsed.Round(time.Second))})
		return
	}
	b.add(lib, "scale", variant, "tasks/s", rep, float64(n)/elapsed.Seconds())
	b.add(lib, "scale", variant+": sending, 8 goroutines", "tasks/s", rep, float64(n)/sendElapsed.Seconds())
	if infoErr != nil {
		b.addErr(lib, "scale", variant+": Redis busy, "+masterLabel(c, 0, held), "% of a core", rep, infoErr)
		return
	}
	for i := range c.nodes {
		b.add(lib, "scale", variant+": Redis busy, "+masterLabel(c, i, held), "% of a core", rep,
			(cpu1[i]-cpu0[i])/elapsed.Seconds()*100)
	}
	b.add(lib, "scale", variant+": worker CPU", "µs/task", rep, float64(self1-self0)/1e3/float64(n))
}

// masterLabel names master i of c and which of queues (the layout's
// queues, or its queue's shards) it serves: "master 2 (q1)", "master 1
// (the queue)", "master 3 (no queue)", "master 2 (machinery_tasks{3)".
func masterLabel(c *redisCluster, i int, queues []string) string {
	var held []string
	for _, q := range queues {
		if c.masterOf(keySlot(q)) == i {
			held = append(held, q)
		}
	}
	what := "no queue"
	switch {
	case len(held) > 0 && len(queues) == 1:
		what = "the queue"
	case len(held) > 0:
		what = strings.Join(held, ", ")
	}
	return fmt.Sprintf("master %d (%s)", i+1, what)
}

// newScaleServer makes a machinist Server on the cluster at url as the
// machinist driver does (Redis broker and result backend on the same URL,
// everything else the defaults), with Redis.ClusterMode so that a cluster
// of one master, whose URL has one address, is still spoken to as a
// cluster, and with the layout's shards. onNoop is the body of taskNoop.
func newScaleServer(url string, l scaleLayout, onNoop func()) (*machinist.Server, error) {
	rc := &config.RedisConfig{ClusterMode: true}
	if l.shards > 1 {
		rc.QueueShards = map[string]int{l.queues[0]: l.shards}
	}
	s, err := machinist.NewServer(&config.Config{
		Broker:        url,
		NoUnixSignals: true,
		Logger:        slog.New(slog.DiscardHandler),
		Redis:         rc,
	})
	if err != nil {
		return nil, fmt.Errorf("machinist server on %s: %w", url, err)
	}
	if err := s.RegisterTask(taskNoop, func() error { onNoop(); return nil }); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// scaleSend sends n no-op tasks from scaleSenders goroutines, task i to
// queues[i mod len(queues)].
func scaleSend(ctx context.Context, s *machinist.Server, n int, queues []string) error {
	return fanOut(ctx, n, scaleSenders, func(i int) error {
		sig := &tasks.Signature{Name: taskNoop, RoutingKey: queues[i%len(queues)]}
		if _, err := s.SendTaskWithContext(ctx, sig); err != nil {
			return fmt.Errorf("send task %d to %s: %w", i, sig.RoutingKey, err)
		}
		return nil
	})
}
