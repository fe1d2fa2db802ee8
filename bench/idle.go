package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The idle workload: -idle-procs worker processes, each one server with
// one worker (concurrency idleConcurrency) on -idle-queues queues, and no
// task sent; measured is what Redis does for them over idleWindow, from
// idleSettle after the last of them started fetching.
const (
	idleConcurrency = 10
	idleSettle      = 3 * time.Second
	idleWindow      = 10 * time.Second
	// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ,
	// 100 on Linux).
	clockTicks = 100
)

// The environment of an idle worker process (this program run again), with
// envWorkerRedis.
const (
	envIdleWorker = "MACHINIST_BENCH_IDLE_WORKER" // the library
	envIdleQueues = "MACHINIST_BENCH_IDLE_QUEUES" // how many queues
)

// idleStarter starts a library's idle server on queues; see
// machinistIdleWorker.
type idleStarter func(addr string, queues []string, fetching func()) (stop func(), failed <-chan error, err error)

// idleStarters are the libraries the idle workload runs. A machinery
// worker consumes one queue, so machinery is not among them.
var idleStarters = map[string]idleStarter{
	"machinist": machinistIdleWorker,
	"asynq":     asynqIdleWorker,
}

// idleQueueNames names n queues idle-0, idle-1, ….
func idleQueueNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "idle-" + strconv.Itoa(i)
	}
	return names
}

// idleWorkerMain is an idle worker process: it runs lib's server on
// queues queues, prints "ready" when it first fetches, and runs until it
// is killed (or, on SIGTERM or SIGINT, stops gracefully).
func idleWorkerMain(lib, addr string, queues int) error {
	start, ok := idleStarters[lib]
	if !ok {
		return fmt.Errorf("idle workload: unknown library %q", lib)
	}
	if queues < 1 {
		return fmt.Errorf("idle workload: %d queues", queues)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	var ready sync.Once
	stop, failed, err := start(addr, idleQueueNames(queues), func() {
		ready.Do(func() { fmt.Println("ready") })
	})
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		stop()
		return nil
	case err := <-failed:
		return fmt.Errorf("%s worker stopped: %w", lib, err)
	}
}

// idleVariants are the idle workload's rows.
type idleVariants struct {
	calls, processed, redisCPU, workerCPU string
}

func (b *bench) idleVariants() idleVariants {
	p := fmt.Sprintf("%d processes × %d queues, no tasks: ", b.idleProcs, b.idleQueues)
	return idleVariants{
		calls:     p + "Redis commands (commandstats)",
		processed: p + "Redis commands (total_commands_processed)",
		redisCPU:  p + "Redis CPU",
		workerCPU: p + "worker processes' CPU, together",
	}
}

// idle runs one repetition of the idle workload for lib: it flushes
// Redis, starts the worker processes, waits idleSettle, measures over
// idleWindow and kills the processes.
func (b *bench) idle(ctx context.Context, lib string, rep int) {
	v := b.idleVariants()
	fail := func(err error) {
		b.addErr(lib, "idle", v.calls, "commands/s", rep, err)
		b.addErr(lib, "idle", v.processed, "commands/s", rep, err)
		b.addErr(lib, "idle", v.redisCPU, "% of a core", rep, err)
		b.addErr(lib, "idle", v.workerCPU, "% of a core", rep, err)
	}
	if _, ok := idleStarters[lib]; !ok {
		fail(fmt.Errorf("%w: a machinery worker consumes one queue", errNA))
		return
	}
	if err := b.redis.reset(ctx); err != nil {
		fail(err)
		return
	}
	procs, err := b.startIdleProcesses(ctx, lib)
	defer func() {
		for _, c := range procs {
			c.kill()
		}
	}()
	if err != nil {
		fail(err)
		return
	}
	select {
	case <-time.After(idleSettle):
	case <-ctx.Done():
		return
	}
	s, err := b.idleMeasure(ctx, lib, rep, procs)
	if err != nil {
		if ctx.Err() == nil {
			fail(err)
		}
		return
	}
	b.rep.Add(Result{Lib: lib, Workload: "idle", Variant: v.calls, Unit: "commands/s", Rep: rep,
		Value: s.callsPerSecond(), Status: statusOK, Note: s.byCommand()})
	b.add(lib, "idle", v.processed, "commands/s", rep, s.processedPerSecond())
	b.add(lib, "idle", v.redisCPU, "% of a core", rep, s.redisCPU())
	if pct, ok := s.workerCPU(); ok {
		b.add(lib, "idle", v.workerCPU, "% of a core", rep, pct)
	}
}

// startIdleProcesses starts b.idleProcs idle worker processes of lib, one
// after the other, each waited for until it fetches. On an error it
// returns those started so far, for the caller to kill.
func (b *bench) startIdleProcesses(ctx context.Context, lib string) ([]*child, error) {
	procs := make([]*child, 0, b.idleProcs)
	for i := 0; i < b.idleProcs; i++ {
		c, err := startChild(ctx, fmt.Sprintf("%s idle worker process %d", lib, i+1),
			envIdleWorker+"="+lib, envWorkerRedis+"="+b.redis.addr, envIdleQueues+"="+strconv.Itoa(b.idleQueues))
		if err != nil {
			return procs, err
		}
		procs = append(procs, c)
	}
	return procs, nil
}

// idleSnapshot is what the idle workload reads at each end of its window.
type idleSnapshot struct {
	at        time.Time
	redis     counters
	cpu       cpuSnapshot
	workers   int64 // the worker processes' utime+stime, in clock ticks
	workersOK bool
}

func (b *bench) idleSnapshot(ctx context.Context, procs []*child) (idleSnapshot, error) {
	s := idleSnapshot{cpu: readCPUSnapshot(b.redis.cmd.Process.Pid), workersOK: true}
	for _, c := range procs {
		t, ok := procTicks(strconv.Itoa(c.cmd.Process.Pid), false)
		s.workers += t
		s.workersOK = s.workersOK && ok
	}
	var err error
	s.redis, err = b.redis.counters(ctx)
	s.at = time.Now()
	return s, err
}

// idleSample is the difference between two snapshots.
type idleSample struct{ a, b idleSnapshot }

func (s idleSample) seconds() float64 { return s.b.at.Sub(s.a.at).Seconds() }

// callsPerSecond is the sum of commandstats calls per second, commands run
// inside Lua scripts included, the benchmark's INFO left out.
func (s idleSample) callsPerSecond() float64 {
	var n int64
	for _, d := range s.deltas() {
		n += d
	}
	return float64(n) / s.seconds()
}

// processedPerSecond is total_commands_processed per second, the
// benchmark's INFO left out.
func (s idleSample) processedPerSecond() float64 {
	own := s.b.redis.own - s.a.redis.own
	return float64(s.b.redis.processed-s.a.redis.processed-own) / s.seconds()
}

// redisCPU is Redis's CPU time over the window, in % of a core.
func (s idleSample) redisCPU() float64 {
	return (s.b.redis.cpuSeconds - s.a.redis.cpuSeconds) / s.seconds() * 100
}

// workerCPU is the worker processes' CPU time over the window, together,
// in % of a core (ok is false where /proc is not available).
func (s idleSample) workerCPU() (float64, bool) {
	if !s.a.workersOK || !s.b.workersOK {
		return 0, false
	}
	return float64(s.b.workers-s.a.workers) / clockTicks / s.seconds() * 100, true
}

// otherCPU is the share of all CPUs' time (%) that went to processes other
// than this program, redis-server and the worker processes.
func (s idleSample) otherCPU() (float64, bool) {
	a, b := s.a.cpu, s.b.cpu
	if !a.ok || !b.ok || !s.a.workersOK || !s.b.workersOK || b.total <= a.total {
		return 0, false
	}
	other := (b.busy - a.busy) - (b.self - a.self) - (b.redis - a.redis) - (s.b.workers - s.a.workers)
	return float64(max(other, 0)) / float64(b.total-a.total) * 100, true
}

// deltas are the commandstats calls by command over the window.
func (s idleSample) deltas() map[string]int64 {
	d := map[string]int64{}
	for name, n := range s.b.redis.calls {
		if n -= s.a.redis.calls[name]; n != 0 {
			d[name] = n
		}
	}
	return d
}

// byCommand lists the calls per second by command, most first.
func (s idleSample) byCommand() string {
	d := s.deltas()
	names := make([]string, 0, len(d))
	for name := range d {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if d[names[i]] != d[names[j]] {
			return d[names[i]] > d[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + " " + formatValue(float64(d[name])/s.seconds())
	}
	return "per second by command: " + strings.Join(parts, ", ")
}

// idleMeasure takes the idle workload's window. When other processes took
// interferenceWarn or more of the CPUs during it, the window is measured
// again (the worker processes keep running), up to b.retries times; the
// kept window's figure is reported as the run's interference.
func (b *bench) idleMeasure(ctx context.Context, lib string, rep int, procs []*child) (idleSample, error) {
	for attempt := 0; ; attempt++ {
		var s idleSample
		var err error
		if s.a, err = b.idleSnapshot(ctx, procs); err != nil {
			return s, err
		}
		select {
		case <-time.After(idleWindow):
		case <-ctx.Done():
			return s, ctx.Err()
		}
		if s.b, err = b.idleSnapshot(ctx, procs); err != nil {
			return s, err
		}
		if err := idleAlive(procs); err != nil {
			return s, err
		}
		pct, ok := s.otherCPU()
		if ok && pct >= interferenceWarn && attempt < b.retries {
			fmt.Fprintf(b.log, "  other processes took %.0f%% of the CPUs during this window: measuring again\n", pct)
			continue
		}
		if ok {
			b.rep.Interference(lib, "idle", rep, pct)
			if pct >= interferenceWarn {
				fmt.Fprintf(b.log, "  warning: other processes took %.0f%% of the CPUs during this window; kept\n", pct)
			}
		}
		return s, nil
	}
}

// idleAlive fails when a worker process has exited: the window then did
// not measure what it says.
func idleAlive(procs []*child) error {
	var errs []error
	for _, c := range procs {
		select {
		case <-c.exited:
			errs = append(errs, fmt.Errorf("worker process %d exited during the measurement", c.cmd.Process.Pid))
		default:
		}
	}
	return errors.Join(errs...)
}
