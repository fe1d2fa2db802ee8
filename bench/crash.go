package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The crash workload: crashTasks two-second tasks; a worker process of
// concurrency crashConcurrency is killed with SIGKILL crashKillAfter after
// it is ready; a fresh worker process takes over.
const (
	crashTasks       = 200
	crashConcurrency = 20
	crashTaskTime    = 2 * time.Second
	crashKillAfter   = 3 * time.Second
	crashMaxWait     = 150 * time.Second // after the kill
	crashIdle        = 5 * time.Second   // nothing left in the broker and no progress for this long: give up
)

// The environment of a worker process (this program run again).
const (
	envWorkerLib   = "MACHINIST_BENCH_WORKER"
	envWorkerRedis = "MACHINIST_BENCH_REDIS"
	envWorkerConc  = "MACHINIST_BENCH_CONCURRENCY"
)

func crashStartKey(lib string) string { return "bench:crash:" + lib + ":start" }
func crashDoneKey(lib string) string  { return "bench:crash:" + lib + ":done" }

// workerMain is the worker process of the crash workload: it runs lib's
// worker with the two-second task until it is killed (or, on SIGTERM or
// SIGINT, stops it gracefully).
func workerMain(lib, addr string, concurrency int) error {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	rc := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rc.Close()
	record := func(key string, id int64) {
		// Background: the record must be written even while stopping.
		rc.RPush(context.Background(), key, fmt.Sprintf("%d:%d", id, time.Now().UnixNano()))
	}
	d, err := newDriver(lib)
	if err != nil {
		return err
	}
	err = d.Open(ctx, addr, Handlers{taskSleep: func(args []int64) (int64, error) {
		if len(args) != 1 {
			return 0, fmt.Errorf("sleep: want 1 argument, got %d", len(args))
		}
		record(crashStartKey(lib), args[0])
		time.Sleep(crashTaskTime)
		record(crashDoneKey(lib), args[0])
		return args[0], nil
	}})
	if err != nil {
		return err
	}
	defer d.Close()
	stop, err := d.StartWorker(concurrency)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	<-ctx.Done()
	stop()
	return nil
}

// children are the worker processes running, killed on the way out.
var children struct {
	sync.Mutex
	procs map[*os.Process]bool
}

// track adds cmd's process, started, to children until it exits, and
// returns a channel closed once it has exited (after cmd.Wait, which it
// calls).
func track(cmd *exec.Cmd) <-chan struct{} {
	exited := make(chan struct{})
	children.Lock()
	if children.procs == nil {
		children.procs = map[*os.Process]bool{}
	}
	children.procs[cmd.Process] = true
	children.Unlock()
	go func() {
		cmd.Wait()
		children.Lock()
		delete(children.procs, cmd.Process)
		children.Unlock()
		close(exited)
	}()
	return exited
}

func killChildren() {
	children.Lock()
	defer children.Unlock()
	for p := range children.procs {
		p.Kill()
	}
}

// child is a worker process.
type child struct {
	cmd    *exec.Cmd
	exited <-chan struct{}
}

// startWorkerProcess starts this program as lib's worker process and waits
// until it says it is ready.
func startWorkerProcess(ctx context.Context, lib, addr string) (*child, error) {
	return startChild(ctx, lib+" worker process",
		envWorkerLib+"="+lib, envWorkerRedis+"="+addr, envWorkerConc+"="+strconv.Itoa(crashConcurrency))
}

// startChild starts this program again with env added to its environment
// (the variables that make it a worker process) and waits until it prints
// "ready". The child is in children until it exits, and dies with this
// program; what names it in errors.
func startChild(ctx context.Context, what string, env ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	setChildAttrs(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "ready" && !ok {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
	}()
	c := &child{cmd: cmd, exited: track(cmd)}
	select {
	case ok := <-ready:
		if ok {
			return c, nil
		}
		c.kill()
		return nil, fmt.Errorf("%s exited before it was ready", what)
	case <-time.After(30 * time.Second):
		c.kill()
		return nil, fmt.Errorf("%s not ready in 30 s", what)
	case <-ctx.Done():
		c.kill()
		return nil, ctx.Err()
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *child) kill() {
	c.cmd.Process.Kill()
	<-c.exited
}

// event is one record of a task starting or finishing.
type event struct {
	id int64
	at time.Time
}

func readEvents(ctx context.Context, rc *goredis.Client, key string) ([]event, error) {
	vals, err := rc.LRange(ctx, key, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	evs := make([]event, 0, len(vals))
	for _, v := range vals {
		a, b, ok := strings.Cut(v, ":")
		id, err1 := strconv.ParseInt(a, 10, 64)
		ns, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad record %q in %s", v, key)
		}
		evs = append(evs, event{id: id, at: time.Unix(0, ns)})
	}
	return evs, nil
}

// crash runs one repetition of the crash workload for every library at
// once, on the flushed Redis: each library has its own keys and worker
// processes, and what is measured (seconds, counts) does not depend on CPU.
// Side by side, a repetition takes as long as the slowest library's
// recovery (asynq's, about 80-110 s) instead of the sum.
func (b *bench) crash(ctx context.Context, libs []string, rep int) {
	if err := b.redis.reset(ctx); err != nil {
		for _, lib := range libs {
			b.addErr(lib, "crash", "run", "", rep, err)
		}
		return
	}
	var wg sync.WaitGroup
	for _, lib := range libs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.crashOne(ctx, lib, rep)
		}()
	}
	wg.Wait()
}

func (b *bench) crashOne(ctx context.Context, lib string, rep int) {
	fail := func(err error) { b.addErr(lib, "crash", "run", "", rep, err) }
	d, err := newDriver(lib)
	if err != nil {
		fail(err)
		return
	}
	if err := d.Open(ctx, b.redis.addr, nil); err != nil {
		fail(err)
		return
	}
	defer d.Close()
	rc := goredis.NewClient(&goredis.Options{Addr: b.redis.addr, PoolSize: 2})
	defer rc.Close()

	if err := sendN(ctx, d, crashTasks, 4, func(i int) Task {
		return Task{Name: taskSleep, Args: []int64{int64(i)}}
	}); err != nil {
		fail(err)
		return
	}
	first, err := startWorkerProcess(ctx, lib, b.redis.addr)
	if err != nil {
		fail(err)
		return
	}
	select {
	case <-time.After(crashKillAfter):
	case <-ctx.Done():
		first.kill()
		return
	}
	first.kill()
	killedAt := time.Now()
	second, err := startWorkerProcess(ctx, lib, b.redis.addr)
	if err != nil {
		fail(err)
		return
	}
	defer second.kill()

	// Wait until every task has completed; or until the broker holds none
	// of them and nothing has started or finished for crashIdle (the rest
	// are lost); or crashMaxWait.
	lastCount, lastProgress := int64(-1), time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	giveUp := killedAt.Add(crashMaxWait)
	timedOut := false
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
		dones, err := readEvents(ctx, rc, crashDoneKey(lib))
		if err != nil {
			fail(err)
			return
		}
		distinct := map[int64]bool{}
		for _, e := range dones {
			distinct[e.id] = true
		}
		if len(distinct) == crashTasks {
			break
		}
		starts, err := rc.LLen(ctx, crashStartKey(lib)).Result()
		if err != nil {
			fail(err)
			return
		}
		if count := starts + int64(len(dones)); count != lastCount {
			lastCount, lastProgress = count, time.Now()
		}
		out, err := d.Outstanding(ctx)
		if err != nil {
			fail(err)
			return
		}
		if out == 0 && time.Since(lastProgress) > crashIdle {
			break
		}
		if time.Now().After(giveUp) {
			timedOut = true
			break
		}
	}
	waited := time.Since(killedAt)
	starts, err1 := readEvents(ctx, rc, crashStartKey(lib))
	dones, err2 := readEvents(ctx, rc, crashDoneKey(lib))
	if err := errors.Join(err1, err2); err != nil {
		fail(err)
		return
	}

	doneCount := map[int64]int{}
	doneBeforeKill := map[int64]bool{}
	var lastDone time.Time
	for _, e := range dones {
		doneCount[e.id]++
		if e.at.Before(killedAt) {
			doneBeforeKill[e.id] = true
		}
		if e.at.After(lastDone) {
			lastDone = e.at
		}
	}
	interrupted := map[int64]bool{}
	rerun := map[int64]time.Time{} // an interrupted task's first start after the kill
	for _, e := range starts {
		if e.at.Before(killedAt) {
			if !doneBeforeKill[e.id] {
				interrupted[e.id] = true
			}
			continue
		}
		if t, ok := rerun[e.id]; !ok || e.at.Before(t) {
			rerun[e.id] = e.at
		}
	}
	lost, dup := 0, 0
	for id := int64(0); id < crashTasks; id++ {
		switch c := doneCount[id]; {
		case c == 0:
			lost++
		case c > 1:
			dup++
		}
	}
	var firstRerun, lastRerun time.Duration
	reran, neverReran := 0, 0
	for id := range interrupted {
		t, ok := rerun[id]
		if !ok {
			neverReran++
			continue
		}
		reran++
		d := t.Sub(killedAt)
		if firstRerun == 0 || d < firstRerun {
			firstRerun = d
		}
		if d > lastRerun {
			lastRerun = d
		}
	}

	const w = "crash"
	note := ""
	if timedOut {
		note = fmt.Sprintf("stopped waiting %s after the kill", crashMaxWait)
	}
	b.rep.Add(Result{Lib: lib, Workload: w, Variant: "tasks lost (never completed)", Unit: fmt.Sprintf("of %d", crashTasks), Rep: rep, Value: float64(lost), Status: statusOK, Note: note})
	b.add(lib, w, "tasks completed more than once", "tasks", rep, float64(dup))
	b.add(lib, w, "tasks interrupted by the kill (started, not finished)", "tasks", rep, float64(len(interrupted)))
	b.add(lib, w, "interrupted tasks that ran again", "tasks", rep, float64(reran))
	for _, r := range []struct {
		variant string
		v       time.Duration
		last    bool
	}{{"kill to first re-run of an interrupted task", firstRerun, false}, {"kill to last re-run of an interrupted task", lastRerun, true}} {
		res := Result{Lib: lib, Workload: w, Variant: r.variant, Unit: "s", Rep: rep, Value: r.v.Seconds(), Status: statusOK}
		switch {
		case len(interrupted) == 0:
			res.Status, res.Note = statusError, "no task was interrupted"
		case reran == 0:
			res.Status, res.Note, res.Value = statusNever, "interrupted tasks never ran again", 0
		case neverReran > 0 && r.last:
			res.Value, res.Bound, res.Status = waited.Seconds(), ">=", statusTimeout
			res.Note = fmt.Sprintf("%d interrupted tasks never ran again", neverReran)
		}
		b.rep.Add(res)
	}
	res := Result{Lib: lib, Workload: w, Variant: "kill to all tasks completed", Unit: "s", Rep: rep, Value: lastDone.Sub(killedAt).Seconds(), Status: statusOK}
	if lost > 0 {
		res.Status, res.Value, res.Note = statusNever, 0, "some tasks never completed"
	}
	b.rep.Add(res)
}
