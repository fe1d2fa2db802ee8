// Command bench runs the same workloads on machinist, hibiken/asynq and
// RichardKnop/machinery v2 against one redis-server it starts itself, and
// prints one JSON line per result and a Markdown table of medians. See
// README.md.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// allWorkloads in the order they run (redis-benchmark last, so that its
// 200,000 keys and 50 connections never precede a library's run).
var allWorkloads = []string{"enqueue", "e2e", "cost", "latency", "delay", "workflow", "flow", "longrun", "fair", "aggregate", "crash", "idle", "scale", "ceiling"}

func main() {
	if lib := os.Getenv(envIdleWorker); lib != "" {
		queues, _ := strconv.Atoi(os.Getenv(envIdleQueues))
		if err := idleWorkerMain(lib, os.Getenv(envWorkerRedis), queues); err != nil {
			fmt.Fprintln(os.Stderr, "idle worker:", err)
			os.Exit(1)
		}
		return
	}
	if lib := os.Getenv(envWorkerLib); lib != "" {
		conc, _ := strconv.Atoi(os.Getenv(envWorkerConc))
		if err := workerMain(lib, os.Getenv(envWorkerRedis), conc); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(run())
}

func run() int {
	reps := flag.Int("reps", 3, "repetitions of each workload")
	n := flag.Int("n", 20000, "tasks per enqueue and e2e run (bulk groups and the big chord use min(n, 10000); aggregate sends n rounded down to 100s, 100 per key)")
	only := flag.String("only", strings.Join(allWorkloads, ","), "workloads to run, comma-separated")
	libsFlag := flag.String("libs", strings.Join(defaultLibs, ","), "libraries to run, comma-separated (also machinist-otel: machinist with the OpenTelemetry SDK)")
	retries := flag.Int("retries", 2, "times to repeat a run during which other processes took 5% or more of the CPUs")
	jsonPath := flag.String("json", "", "also write the JSON lines to this file")
	mdPath := flag.String("md", "", "also write the Markdown report to this file")
	idleProcs := flag.Int("idle-procs", 10, "idle workload: worker processes")
	idleQueues := flag.Int("idle-queues", 10, "idle workload: queues each worker consumes")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (senders and workers; not redis-server) to this file (go tool pprof)")
	flag.Parse()

	workloads, err := pick("-only", *only, allWorkloads)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	libs, err := pick("-libs", *libsFlag, allLibs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *reps < 1 || *n < 1 {
		fmt.Fprintln(os.Stderr, "-reps and -n must be at least 1")
		return 2
	}
	if *idleProcs < 1 || *idleQueues < 1 {
		fmt.Fprintln(os.Stderr, "-idle-procs and -idle-queues must be at least 1")
		return 2
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "-cpuprofile:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rs *redisServer
	cleanup := func() {
		killChildren()
		rs.stop()
	}
	// Ctrl-C: stop the workloads; if they have not wound down in 10 s,
	// kill what this program started and exit anyway.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "interrupted: stopping")
		cancel()
		select {
		case <-sigs:
		case <-time.After(10 * time.Second):
		}
		cleanup()
		os.Exit(130)
	}()

	rs, err = startRedis(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()

	outs := []io.Writer{os.Stdout}
	if *jsonPath != "" {
		f, err := os.Create(*jsonPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		outs = append(outs, f)
	}
	rep := newReporter(outs...)
	b := &bench{
		redis: rs, rep: rep, n: *n, log: os.Stderr,
		wantE2E:   slices.Contains(workloads, "e2e"),
		wantCost:  slices.Contains(workloads, "cost"),
		retries:   *retries,
		idleProcs: *idleProcs, idleQueues: *idleQueues,
	}
	in, _ := rs.info(ctx)
	version := libraryVersion() // now, close to when go run built it
	started := time.Now()
	fmt.Fprintf(os.Stderr, "redis-server %s on %s; libraries %s; workloads %s; %d repetitions; n=%d\n",
		in.version, rs.addr, strings.Join(libs, ","), strings.Join(workloads, ","), *reps, *n)

	perLib := map[string]func(context.Context, string, int){
		"enqueue":   b.enqueue,
		"e2e":       b.e2e,
		"latency":   b.latency,
		"delay":     b.delay,
		"workflow":  b.workflow,
		"flow":      b.flow,
		"longrun":   b.longrun,
		"fair":      b.fair,
		"aggregate": b.aggregate,
	}
	// bullmq (a Node.js program, bullmq/flow.js) runs only the flow
	// workload.
	goLibs := slices.DeleteFunc(slices.Clone(libs), func(l string) bool { return l == "bullmq" })
	withFlows := slices.DeleteFunc(slices.Clone(libs), func(l string) bool { return !slices.Contains(flowLibs, l) })
	for _, w := range workloads {
		libs := goLibs
		if w == "flow" {
			libs = withFlows
		}
		if w == "cost" && b.wantE2E {
			continue // taken from the e2e runs
		}
		if w == "cost" {
			w = "e2e"
		}
		t0 := time.Now()
		for r := 1; r <= *reps && ctx.Err() == nil; r++ {
			switch w {
			case "ceiling":
				fmt.Fprintf(os.Stderr, "ceiling rep %d\n", r)
				b.ceiling(ctx, r)
			case "crash":
				fmt.Fprintf(os.Stderr, "crash rep %d (%s side by side)\n", r, strings.Join(libs, ", "))
				b.crash(ctx, libs, r)
			case "scale":
				// Not through runQuietly: it starts Redis Clusters of its
				// own and leaves them out of the count itself.
				fmt.Fprintf(os.Stderr, "scale rep %d (machinist on Redis Clusters of 1, 2 and 3 masters)\n", r)
				b.scale(ctx, libs, r)
			case "idle":
				// Not through runQuietly: the worker processes are this
				// program's own; idle measures what else ran in its window.
				for _, lib := range libs {
					if ctx.Err() != nil {
						break
					}
					fmt.Fprintf(os.Stderr, "idle %s rep %d (%d processes × %d queues)\n", lib, r, *idleProcs, *idleQueues)
					b.idle(ctx, lib, r)
				}
			default:
				for _, lib := range libs {
					if ctx.Err() != nil {
						break
					}
					runQuietly(ctx, rep, rs, *retries, lib, w, r, func() { perLib[w](ctx, lib, r) })
				}
			}
		}
		fmt.Fprintf(os.Stderr, "%s: %s\n", w, time.Since(t0).Round(time.Second))
	}
	if ctx.Err() != nil {
		return 130
	}
	total := time.Since(started)

	medians := rep.Medians()
	var md bytes.Buffer
	fmt.Fprintf(&md, "### Results (%s)\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&md, "Machine: %s. Redis %s (loopback, no persistence). %s. Each number is the median of %d repetitions; n = %d. Run took %s.\n\n",
		machine(), in.version, runtime.Version(), *reps, *n, total.Round(time.Second))
	fmt.Fprintf(&md, "machinist at %s. Command: `go run . %s` (in bench/).\n\n", version, strings.Join(os.Args[1:], " "))
	rep.Table(&md, medians, libs, "redis")
	os.Stdout.Write([]byte("\n"))
	os.Stdout.Write(md.Bytes())
	if *mdPath != "" {
		if err := os.WriteFile(*mdPath, md.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// runQuietly runs one library's repetition of a workload and measures how
// much CPU other processes took meanwhile; when they took
// interferenceWarn or more, the results are thrown away and the run
// repeated, up to retries times. The last attempt's results stay, and the
// report names it.
func runQuietly(ctx context.Context, rep *Reporter, rs *redisServer, retries int, lib, workload string, r int, run func()) {
	for attempt := 0; ; attempt++ {
		rep.Hold()
		before := readCPUSnapshot(rs.cmd.Process.Pid)
		run()
		pct, ok := otherCPU(before, readCPUSnapshot(rs.cmd.Process.Pid))
		if ok && pct >= interferenceWarn && attempt < retries && ctx.Err() == nil {
			rep.Discard()
			fmt.Fprintf(os.Stderr, "  other processes took %.0f%% of the CPUs during this run: running it again\n", pct)
			continue
		}
		rep.Commit()
		if ok {
			rep.Interference(lib, workload, r, pct)
			if pct >= interferenceWarn {
				fmt.Fprintf(os.Stderr, "  warning: other processes took %.0f%% of the CPUs during this run; kept\n", pct)
			}
		}
		return
	}
}

// pick parses a comma-separated selection out of all, keeping all's order.
func pick(flagName, list string, all []string) ([]string, error) {
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !slices.Contains(all, s) {
			return nil, fmt.Errorf("%s: unknown %q (want some of %s)", flagName, s, strings.Join(all, ","))
		}
		want[s] = true
	}
	var out []string
	for _, s := range all {
		if want[s] {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: nothing selected", flagName)
	}
	return out, nil
}

// machine describes the CPU, cores, memory and OS.
func machine() string {
	cpu := runtime.GOARCH
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "MemTotal:") {
				f := strings.Fields(line)
				if len(f) >= 2 {
					kb, _ := strconv.ParseFloat(f[1], 64)
					mem = fmt.Sprintf(", %.0f GiB RAM", kb/1024/1024)
				}
			}
		}
	}
	kernel := runtime.GOOS
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		kernel = strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%s, %d CPUs%s, %s", cpu, runtime.NumCPU(), mem, kernel)
}

// libraryVersion names the machinist commit the benchmark was built from
// (bench/ replaces the module with ../), and says when tracked files
// outside bench/ had uncommitted changes.
func libraryVersion() string {
	out, err := exec.Command("git", "-C", "..", "log", "-1", "--format=%h (%s)").Output()
	if err != nil {
		return "an unknown commit (git not available)"
	}
	v := strings.TrimSpace(string(out))
	st, err := exec.Command("git", "-C", "..", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench").Output()
	if err == nil && len(bytes.TrimSpace(st)) > 0 {
		v += " with uncommitted changes"
	}
	return v
}
