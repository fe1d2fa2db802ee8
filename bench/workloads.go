package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// bench holds what every workload needs.
type bench struct {
	redis    *redisServer
	rep      *Reporter
	n        int
	log      io.Writer // progress
	wantCost bool      // the cost figures are taken from the e2e run at concurrency 100
	wantE2E  bool
	retries  int // times to repeat a measurement other processes disturbed

	idleProcs, idleQueues int // the idle workload's worker processes and queues each
}

// add records one repetition's result.
func (b *bench) add(lib, workload, variant, unit string, rep int, value float64) {
	b.rep.Add(Result{Lib: lib, Workload: workload, Variant: variant, Unit: unit, Rep: rep, Value: value, Status: statusOK})
}

func (b *bench) addStatus(lib, workload, variant, unit string, rep int, st Status, note string) {
	b.rep.Add(Result{Lib: lib, Workload: workload, Variant: variant, Unit: unit, Rep: rep, Status: st, Note: note})
}

func (b *bench) addErr(lib, workload, variant, unit string, rep int, err error) {
	if errors.Is(err, errNA) {
		note := strings.TrimPrefix(strings.TrimPrefix(err.Error(), errNA.Error()), ": ")
		b.addStatus(lib, workload, variant, unit, rep, statusNA, note)
		return
	}
	fmt.Fprintf(b.log, "  %s %s %s rep %d: %v\n", lib, workload, variant, rep, err)
	b.addStatus(lib, workload, variant, unit, rep, statusError, err.Error())
}

// open flushes Redis (FLUSHALL, CONFIG RESETSTAT) and opens lib's driver
// with h registered.
func (b *bench) open(ctx context.Context, lib string, h Handlers) (Driver, error) {
	if err := b.redis.reset(ctx); err != nil {
		return nil, err
	}
	d, err := newDriver(lib)
	if err != nil {
		return nil, err
	}
	if err := d.Open(ctx, b.redis.addr, h); err != nil {
		d.Close()
		return nil, fmt.Errorf("open %s: %w", lib, err)
	}
	return d, nil
}

// sendN sends n tasks from g goroutines; task(i) makes the i-th.
func sendN(ctx context.Context, d Driver, n, g int, task func(i int) Task) error {
	return fanOut(ctx, n, g, func(i int) error {
		if err := d.Send(ctx, task(i)); err != nil {
			return fmt.Errorf("send task %d: %w", i, err)
		}
		return nil
	})
}

// fanOut calls send(i) for i in [0, n) from g goroutines, each stopping at
// its first error or when ctx ends.
func fanOut(ctx context.Context, n, g int, send func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, g)
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := send(i); err != nil {
					errs[w] = err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// wait waits for done, ctx or the timeout; it reports whether done came.
func wait(ctx context.Context, done <-chan struct{}, timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// ---- enqueue ----------------------------------------------------------

func (b *bench) enqueue(ctx context.Context, lib string, rep int) {
	noop := func(int) Task { return Task{Name: taskNoop} }
	for _, g := range []int{1, 8} {
		variant := fmt.Sprintf("%d × 1 task, %d goroutine", b.n, g)
		if g > 1 {
			variant += "s"
		}
		func() {
			d, err := b.open(ctx, lib, nil)
			if err != nil {
				b.addErr(lib, "enqueue", variant, "tasks/s", rep, err)
				return
			}
			defer d.Close()
			// One untimed send per goroutine first, so that every library
			// starts with its connections open and its scripts loaded.
			if err := sendN(ctx, d, g, g, noop); err != nil {
				b.addErr(lib, "enqueue", variant, "tasks/s", rep, err)
				return
			}
			start := time.Now()
			if err := sendN(ctx, d, b.n, g, noop); err != nil {
				b.addErr(lib, "enqueue", variant, "tasks/s", rep, err)
				return
			}
			b.add(lib, "enqueue", variant, "tasks/s", rep, float64(b.n)/time.Since(start).Seconds())
		}()
	}
	size := min(10000, b.n)
	b.timeBulk(ctx, lib, rep, fmt.Sprintf("bulk: a group of %d", size), size, func(d Driver, ts []Task) error {
		return d.SendBulk(ctx, ts)
	})
	// A batch of independent tasks (machinist's SendTasks).
	for _, size := range []int{10000, 100000} {
		b.timeBulk(ctx, lib, rep, fmt.Sprintf("bulk: a batch of %d (SendTasks)", size), size, func(d Driver, ts []Task) error {
			bd, ok := d.(BatchDriver)
			if !ok {
				return errNA
			}
			return bd.SendBatch(ctx, ts)
		})
	}
}

// timeBulk times send of size no-op tasks with lib's driver on an empty
// Redis, after one untimed send that warms it, as variant.
func (b *bench) timeBulk(ctx context.Context, lib string, rep int, variant string, size int, send func(Driver, []Task) error) {
	d, err := b.open(ctx, lib, nil)
	if err != nil {
		b.addErr(lib, "enqueue", variant, "tasks/s", rep, err)
		return
	}
	defer d.Close()
	if err := d.Send(ctx, Task{Name: taskNoop}); err != nil {
		b.addErr(lib, "enqueue", variant, "tasks/s", rep, err)
		return
	}
	ts := make([]Task, size)
	for i := range ts {
		ts[i] = Task{Name: taskNoop}
	}
	start := time.Now()
	if err := send(d, ts); err != nil {
		b.addErr(lib, "enqueue", variant, "tasks/s", rep, err)
		return
	}
	b.add(lib, "enqueue", variant, "tasks/s", rep, float64(size)/time.Since(start).Seconds())
}

// ---- e2e and cost -----------------------------------------------------

func (b *bench) e2e(ctx context.Context, lib string, rep int) {
	for _, c := range []int{10, 100} {
		cost := c == 100 && b.wantCost
		if !b.wantE2E && !cost {
			continue
		}
		b.e2eOne(ctx, lib, rep, c, cost)
	}
}

func (b *bench) e2eOne(ctx context.Context, lib string, rep, concurrency int, cost bool) {
	variant := fmt.Sprintf("%d no-op tasks, concurrency %d", b.n, concurrency)
	fail := func(err error) {
		if b.wantE2E {
			b.addErr(lib, "e2e", variant, "tasks/s", rep, err)
		}
		if cost {
			b.addErr(lib, "cost", "e2e concurrency 100", "run", rep, err)
		}
	}
	var calls atomic.Int64
	done := make(chan struct{})
	n := int64(b.n)
	d, err := b.open(ctx, lib, Handlers{taskNoop: func([]int64) (int64, error) {
		if calls.Add(1) == n {
			close(done)
		}
		return 0, nil
	}})
	if err != nil {
		fail(err)
		return
	}
	defer d.Close()
	r := b.redis
	in0, err := r.info(ctx)
	if err != nil {
		fail(err)
		return
	}
	if err := sendN(ctx, d, b.n, 8, func(int) Task { return Task{Name: taskNoop} }); err != nil {
		fail(err)
		return
	}
	in1, err := r.info(ctx)
	if err != nil {
		fail(err)
		return
	}
	if err := r.resetStat(ctx); err != nil {
		fail(err)
		return
	}
	cpu0 := processCPU()
	start := time.Now()
	stop, err := d.StartWorker(concurrency)
	if err != nil {
		fail(err)
		return
	}
	ok := wait(ctx, done, time.Minute+time.Duration(b.n)*time.Millisecond)
	elapsed := time.Since(start)
	cpu1 := processCPU()
	in2, infoErr := r.info(ctx)
	stop()
	if !ok {
		if b.wantE2E {
			b.rep.Add(Result{Lib: lib, Workload: "e2e", Variant: variant, Unit: "tasks/s", Rep: rep,
				Value: float64(calls.Load()) / elapsed.Seconds(), Status: statusTimeout,
				Note: fmt.Sprintf("%d of %d ran in %s", calls.Load(), n, elapsed.Round(time.Second))})
		}
		return
	}
	if b.wantE2E {
		b.add(lib, "e2e", variant, "tasks/s", rep, float64(n)/elapsed.Seconds())
	}
	if !cost {
		return
	}
	if infoErr != nil {
		fail(infoErr)
		return
	}
	in3, err := r.info(ctx) // after the worker stopped: results kept
	if err != nil {
		fail(err)
		return
	}
	fn := float64(n)
	b.add(lib, "cost", "enqueue: Redis commands", "per task", rep, float64(in1.calls)/fn)
	b.add(lib, "cost", "enqueue: Redis CPU", "µs/task", rep, (in1.cpuSeconds-in0.cpuSeconds)*1e6/fn)
	b.add(lib, "cost", "run (c=100): Redis commands", "per task", rep, float64(in2.calls)/fn)
	b.add(lib, "cost", "run (c=100): Redis CPU", "µs/task", rep, (in2.cpuSeconds-in1.cpuSeconds)*1e6/fn)
	b.add(lib, "cost", "run (c=100): Redis busy", "% of a core", rep, (in2.cpuSeconds-in1.cpuSeconds)/elapsed.Seconds()*100)
	b.add(lib, "cost", "run (c=100): worker CPU", "µs/task", rep, float64(cpu1-cpu0)/1e3/fn)
	b.add(lib, "cost", "memory per pending task", "bytes", rep, float64(in1.usedMemory-in0.usedMemory)/fn)
	b.add(lib, "cost", "memory per finished task", "bytes", rep, float64(in3.usedMemory-in0.usedMemory)/fn)
}

// ---- latency ----------------------------------------------------------

const (
	latencyTasks = 2000
	latencyRate  = 500 // per second
)

func (b *bench) latency(ctx context.Context, lib string, rep int) {
	unit := "ms"
	var mu sync.Mutex
	lat := make([]float64, 0, latencyTasks)
	warm := make(chan struct{}, 1)
	done := make(chan struct{})
	d, err := b.open(ctx, lib, Handlers{taskStamp: func(args []int64) (int64, error) {
		now := time.Now().UnixNano()
		if len(args) != 1 {
			return 0, fmt.Errorf("stamp: want 1 argument, got %d", len(args))
		}
		if args[0] == 0 {
			select {
			case warm <- struct{}{}:
			default:
			}
			return 0, nil
		}
		mu.Lock()
		lat = append(lat, float64(now-args[0])/1e6)
		if len(lat) == latencyTasks {
			close(done)
		}
		mu.Unlock()
		return 0, nil
	}})
	if err != nil {
		b.addErr(lib, "latency", "p50", unit, rep, err)
		return
	}
	defer d.Close()
	stop, err := d.StartWorker(10)
	if err != nil {
		b.addErr(lib, "latency", "p50", unit, rep, err)
		return
	}
	defer stop()
	// One task first, so that the worker is polling when the clock starts.
	if err := d.Send(ctx, Task{Name: taskStamp, Args: []int64{0}}); err != nil {
		b.addErr(lib, "latency", "p50", unit, rep, err)
		return
	}
	select {
	case <-warm:
	case <-time.After(15 * time.Second):
		b.addErr(lib, "latency", "p50", unit, rep, errors.New("warm-up task did not run in 15 s"))
		return
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(time.Second / latencyRate)
	defer tick.Stop()
	start := time.Now()
	for i := 0; i < latencyTasks; i++ {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		if err := d.Send(ctx, Task{Name: taskStamp, Args: []int64{time.Now().UnixNano()}}); err != nil {
			b.addErr(lib, "latency", "p50", unit, rep, err)
			return
		}
	}
	rate := latencyTasks / time.Since(start).Seconds()
	if !wait(ctx, done, 30*time.Second) {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		b.addErr(lib, "latency", "p50", unit, rep, fmt.Errorf("%d of %d tasks ran within 30 s", got, latencyTasks))
		return
	}
	mu.Lock()
	vals := append([]float64(nil), lat...)
	mu.Unlock()
	sort.Float64s(vals)
	variant := fmt.Sprintf("%d tasks at %d/s: ", latencyTasks, latencyRate)
	b.add(lib, "latency", variant+"p50", unit, rep, percentile(vals, 0.50))
	b.add(lib, "latency", variant+"p95", unit, rep, percentile(vals, 0.95))
	b.add(lib, "latency", variant+"p99", unit, rep, percentile(vals, 0.99))
	b.add(lib, "latency", variant+"max", unit, rep, vals[len(vals)-1])
	if rate < 0.95*latencyRate {
		fmt.Fprintf(b.log, "  %s latency: sends reached only %.0f/s\n", lib, rate)
	}
}

// percentile returns the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ---- delay ------------------------------------------------------------

const (
	delayTasks    = 500
	delayFirst    = time.Second     // the first ETA, from the send
	delaySpread   = 2 * time.Second // ETAs spread evenly over this
	delayDeadline = 10 * time.Second
)

func (b *bench) delay(ctx context.Context, lib string, rep int) {
	variant := fmt.Sprintf("%d tasks, ETAs over %s: ", delayTasks, delaySpread)
	unit := "ms late"
	var mu sync.Mutex
	started := map[int64]int64{} // ETA (unix ns, unique) -> first start
	warm := make(chan struct{}, 1)
	done := make(chan struct{})
	d, err := b.open(ctx, lib, Handlers{
		taskNoop: func([]int64) (int64, error) {
			select {
			case warm <- struct{}{}:
			default:
			}
			return 0, nil
		},
		taskStamp: func(args []int64) (int64, error) {
			now := time.Now().UnixNano()
			if len(args) != 1 {
				return 0, fmt.Errorf("stamp: want 1 argument, got %d", len(args))
			}
			mu.Lock()
			defer mu.Unlock()
			if _, ok := started[args[0]]; !ok {
				started[args[0]] = now
				if len(started) == delayTasks {
					close(done)
				}
			}
			return 0, nil
		},
	})
	if err != nil {
		b.addErr(lib, "delay", variant+"p50", unit, rep, err)
		return
	}
	defer d.Close()
	stop, err := d.StartWorker(10)
	if err != nil {
		b.addErr(lib, "delay", variant+"p50", unit, rep, err)
		return
	}
	defer stop()
	if err := d.Send(ctx, Task{Name: taskNoop}); err != nil {
		b.addErr(lib, "delay", variant+"p50", unit, rep, err)
		return
	}
	if !wait(ctx, warm, 15*time.Second) {
		b.addErr(lib, "delay", variant+"p50", unit, rep, errors.New("warm-up task did not run in 15 s"))
		return
	}
	base := time.Now().Add(delayFirst)
	etas := make([]time.Time, delayTasks)
	for i := range etas {
		etas[i] = base.Add(delaySpread * time.Duration(i) / delayTasks)
	}
	order := rand.Perm(delayTasks) // sent in random order
	if err := sendN(ctx, d, delayTasks, 4, func(i int) Task {
		eta := etas[order[i]]
		return Task{Name: taskStamp, Args: []int64{eta.UnixNano()}, ETA: eta}
	}); err != nil {
		b.addErr(lib, "delay", variant+"p50", unit, rep, err)
		return
	}
	if time.Now().After(base) {
		fmt.Fprintf(b.log, "  %s delay: sending took past the first ETA\n", lib)
	}
	deadline := etas[delayTasks-1].Add(delayDeadline)
	wait(ctx, done, time.Until(deadline))
	if ctx.Err() != nil {
		return
	}
	cut := time.Now().UnixNano()
	mu.Lock()
	type late struct {
		ms        float64
		unstarted bool
	}
	var lates []late
	early, unstarted := 0, 0
	for _, eta := range etas {
		e := eta.UnixNano()
		if s, ok := started[e]; ok {
			lates = append(lates, late{ms: float64(s-e) / 1e6})
			if s < e {
				early++
			}
		} else {
			lates = append(lates, late{ms: float64(cut-e) / 1e6, unstarted: true})
			unstarted++
		}
	}
	mu.Unlock()
	sort.Slice(lates, func(i, j int) bool { return lates[i].ms < lates[j].ms })
	at := func(p float64) late {
		i := int(math.Ceil(p*float64(len(lates)))) - 1
		return lates[max(0, min(i, len(lates)-1))]
	}
	for _, q := range []struct {
		name string
		l    late
	}{{"p50", at(0.50)}, {"p99", at(0.99)}, {"max", lates[len(lates)-1]}} {
		res := Result{Lib: lib, Workload: "delay", Variant: variant + q.name, Unit: unit, Rep: rep, Value: q.l.ms, Status: statusOK}
		if q.l.unstarted {
			res.Bound = ">="
			res.Status = statusTimeout
		}
		b.rep.Add(res)
	}
	b.add(lib, "delay", variant+"started early", "tasks", rep, float64(early))
	res := Result{Lib: lib, Workload: "delay", Variant: variant + fmt.Sprintf("not started %s after the last ETA", delayDeadline), Unit: "tasks", Rep: rep, Value: float64(unstarted), Status: statusOK}
	b.rep.Add(res)
}

// ---- workflow ---------------------------------------------------------

func (b *bench) workflow(ctx context.Context, lib string, rep int) {
	big := min(10000, b.n)
	type flow struct {
		variant string
		chord   int // members; 0 for the chain
		chain   int
		timeout time.Duration
	}
	flows := []flow{
		{variant: "chord of 100 add + sum callback, send to result", chord: 100, timeout: 30 * time.Second},
		{variant: "chain of 10 add, send to result", chain: 10, timeout: 30 * time.Second},
		{variant: fmt.Sprintf("chord of %d add + sum callback, send to result", big), chord: big, timeout: 45 * time.Second},
	}
	for _, f := range flows {
		if b.rep.Failed(lib, "workflow", f.variant) {
			fmt.Fprintf(b.log, "  %s workflow %q: not repeated after a timeout\n", lib, f.variant)
			continue
		}
		b.workflowOne(ctx, lib, rep, f.variant, f.chord, f.chain, f.timeout)
	}
	if lib == "machinist" {
		// The floor the rows are compared with, once a repetition.
		b.stepFloor(ctx, rep, 10, 100)
	}
}

// workflowSmall is the largest chord timed as a latency (warm-up, then
// the median of workflowTimed runs); a chain always is.
const (
	workflowSmall = 100
	workflowTimed = 5
)

func (b *bench) workflowOne(ctx context.Context, lib string, rep int, variant string, chordSize, chainLen int, timeout time.Duration) {
	unit := "ms"
	var adds atomic.Int64
	sum := func(args []int64) (int64, error) {
		var s int64
		for _, a := range args {
			s += a
		}
		return s, nil
	}
	d, err := b.open(ctx, lib, Handlers{
		taskAdd: func(args []int64) (int64, error) { adds.Add(1); return sum(args) },
		taskSum: sum,
	})
	if err != nil {
		b.addErr(lib, "workflow", variant, unit, rep, err)
		return
	}
	defer d.Close()
	stop, err := d.StartWorker(10)
	if err != nil {
		b.addErr(lib, "workflow", variant, unit, rep, err)
		return
	}
	defer stop()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var want int64
	run := func() (int64, error) {
		if chordSize > 0 {
			members := make([][]int64, chordSize)
			want = 0
			for i := range members {
				members[i] = []int64{int64(i + 1), int64(i + 1)}
				want += 2 * int64(i+1)
			}
			return d.Chord(wctx, members)
		}
		steps := make([][]int64, chainLen)
		steps[0] = []int64{1, 1}
		for i := 1; i < chainLen; i++ {
			steps[i] = []int64{1} // plus the previous result
		}
		want = int64(chainLen + 1)
		return d.Chain(wctx, steps)
	}
	// A small workflow is a latency: it is sent once to warm the process
	// (connections, codecs), then workflowTimed times and the median
	// counts. The big chord is a throughput, timed once.
	timed := 1
	if chordSize <= workflowSmall {
		timed = workflowTimed
		if _, err := run(); err != nil && wctx.Err() == nil {
			b.addErr(lib, "workflow", variant, unit, rep, fmt.Errorf("warm-up: %w", err))
			return
		}
	}
	var (
		got     int64
		elapsed time.Duration
		times   []time.Duration
	)
	for i := 0; i < timed && err == nil; i++ {
		start := time.Now()
		got, err = run()
		times = append(times, time.Since(start))
		if err == nil && got != want {
			break
		}
	}
	slices.Sort(times)
	elapsed = times[len(times)/2]
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		b.rep.Add(Result{Lib: lib, Workload: "workflow", Variant: variant, Unit: unit, Rep: rep,
			Value: float64(timeout.Milliseconds()), Bound: ">=", Status: statusTimeout,
			Note: fmt.Sprintf("no result in %s (%d add tasks had run)", timeout, adds.Load())})
		if chordSize > 100 {
			b.rep.Add(Result{Lib: lib, Workload: "workflow", Variant: variant + ", per member", Unit: "µs", Rep: rep,
				Value: float64(timeout.Microseconds()) / float64(chordSize), Bound: ">=", Status: statusTimeout})
		}
		return
	}
	if err != nil {
		b.addErr(lib, "workflow", variant, unit, rep, err)
		if chordSize > 0 {
			b.addErr(lib, "workflow", variant+", per member", "µs", rep, err)
		}
		return
	}
	if got != want {
		b.addErr(lib, "workflow", variant, unit, rep, fmt.Errorf("result %d, want %d", got, want))
		return
	}
	b.add(lib, "workflow", variant, unit, rep, float64(elapsed.Microseconds())/1e3)
	if chordSize > 0 {
		b.add(lib, "workflow", variant+", per member", "µs", rep, float64(elapsed.Microseconds())/float64(chordSize))
	}
}

// ---- ceiling ----------------------------------------------------------

var rpsLine = regexp.MustCompile(`^\s*(.+?): ([0-9.]+) requests per second`)

// ceiling runs redis-benchmark against the same server: what this Redis
// does with plain commands and with a one-call Lua script; then the
// aggregation floor (floor.go).
func (b *bench) ceiling(ctx context.Context, rep int) {
	defer b.floor(ctx, rep) // without redis-benchmark too
	const lib = "redis"
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.addStatus(lib, "ceiling", "redis-benchmark", "ops/s", rep, statusError, "redis-benchmark not found in PATH: install it with redis-server (apt-get install redis-tools)")
		return
	}
	port := strconv.Itoa(b.redis.port)
	runs := [][]string{
		{"-h", "127.0.0.1", "-p", port, "-q", "-n", "200000", "-t", "set,get,lpush,lpop"},
		{"-h", "127.0.0.1", "-p", port, "-q", "-n", "100000", "EVAL", "return redis.call('incr', KEYS[1])", "1", "k"},
	}
	for _, args := range runs {
		if err := b.redis.reset(ctx); err != nil {
			b.addErr(lib, "ceiling", "redis-benchmark", "ops/s", rep, err)
			return
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		setChildAttrs(cmd)
		out, err := cmd.Output()
		if err != nil {
			b.addErr(lib, "ceiling", "redis-benchmark "+strings.Join(args[4:], " "), "ops/s", rep, err)
			continue
		}
		for _, line := range strings.FieldsFunc(string(out), func(r rune) bool { return r == '\r' || r == '\n' }) {
			m := rpsLine.FindStringSubmatch(line)
			if m == nil || strings.Contains(line, "rps=") {
				continue
			}
			v, _ := strconv.ParseFloat(m[2], 64)
			name := m[1]
			if strings.HasPrefix(name, "EVAL") {
				name = "EVAL of a one-call Lua script (incr)"
			}
			b.add(lib, "ceiling", name+", 50 clients", "ops/s", rep, v)
		}
	}
}
