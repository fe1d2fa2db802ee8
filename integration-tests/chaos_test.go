package integration_test

// Failure tests: a worker process killed with SIGKILL, Redis killed and
// restarted, a thousand chords raced by fifty workers, a worker started
// before its Redis. Each runs against real Redis; those that kill or stop
// Redis have a server of their own.

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinist "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	brokeriface "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// chaosWorkerEnv, when set to "<redis url>|<key prefix>|<concurrency>",
// turns the test binary into a worker process for
// TestKill9WorkerLosesNothing: TestMain calls runChaosWorker instead of
// running the tests.
const chaosWorkerEnv = "MACHINIST_CHAOS_WORKER"

// chaosPrefix is the key prefix on the servers these tests start for
// themselves (a server of their own needs no per-test prefix).
const chaosPrefix = "chaos"

// slowTaskDuration is how long a "slow" task runs.
const slowTaskDuration = 2 * time.Second

// startsKey is the list where "slow" tasks record their starts.
func startsKey(keyPrefix string) string { return keyPrefix + ":starts" }

// slowTask returns the "slow" task: it records its start as
// "<uuid>|<unix ms>|<who>" on key, sleeps slowTaskDuration unless its
// context ends first, and returns its argument.
func slowTask(rdb goredis.UniversalClient, key, who string) func(context.Context, int64) (int64, error) {
	return func(ctx context.Context, n int64) (int64, error) {
		sig := tasks.SignatureFromContext(ctx)
		entry := fmt.Sprintf("%s|%d|%s", sig.UUID, time.Now().UnixMilli(), who)
		if err := rdb.RPush(ctx, key, entry).Err(); err != nil {
			return 0, fmt.Errorf("record start: %w", err)
		}
		t := time.NewTimer(slowTaskDuration)
		defer t.Stop()
		select {
		case <-t.C:
			return n, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// runChaosWorker runs a machinist worker for the spec in chaosWorkerEnv,
// with the default lease settings, until the process is killed. It never
// returns: it exits if the worker stops or the parent process goes away.
func runChaosWorker(spec string) {
	fail := func(format string, args ...interface{}) {
		fmt.Fprintf(os.Stderr, "chaos worker: "+format+"\n", args...)
		os.Exit(2)
	}
	parts := strings.Split(spec, "|")
	if len(parts) != 3 {
		fail("%s=%q: want <redis url>|<key prefix>|<concurrency>", chaosWorkerEnv, spec)
	}
	url, keyPrefix := parts[0], parts[1]
	concurrency, err := strconv.Atoi(parts[2])
	if err != nil {
		fail("concurrency: %v", err)
	}
	cnf := redisConfig(url, keyPrefix)
	cnf.NoUnixSignals = true
	cnf.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	server, err := machinist.NewServer(cnf)
	if err != nil {
		fail("NewServer: %v", err)
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		fail("parse %s: %v", url, err)
	}
	rdb := goredis.NewClient(opts)
	if err := server.RegisterTask("slow", slowTask(rdb, startsKey(keyPrefix), "child")); err != nil {
		fail("RegisterTask: %v", err)
	}
	errs := make(chan error, 1)
	server.NewWorker("chaos-child", concurrency).LaunchAsync(errs)

	// Should the test binary die without killing us, do not outlive it.
	parent := os.Getppid()
	ticker := time.NewTicker(200 * time.Millisecond)
	for {
		select {
		case err := <-errs:
			fail("worker stopped: %v", err)
		case <-ticker.C:
			if os.Getppid() != parent {
				fail("parent process %d went away", parent)
			}
		}
	}
}

// chaosServer returns a Server on the Redis at url with the default lease
// settings, closed when the test ends.
func chaosServer(t *testing.T, url, keyPrefix string, mutate ...func(*config.Config)) *machinist.Server {
	t.Helper()
	cnf := redisConfig(url, keyPrefix)
	cnf.NoUnixSignals = true
	cnf.Logger = slog.New(slog.DiscardHandler)
	for _, m := range mutate {
		m(cnf)
	}
	s, err := machinist.NewServer(cnf)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// pollUntil calls cond every interval until it returns true, failing the
// test if it has not within timeout.
func pollUntil(t *testing.T, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(interval)
	}
}

// taskStart is one entry of the starts list.
type taskStart struct {
	at  time.Time
	who string
}

// readStarts returns the recorded starts of "slow" tasks by task id.
func readStarts(t *testing.T, ctx context.Context, rdb goredis.UniversalClient, key string) map[string][]taskStart {
	t.Helper()
	entries, err := rdb.LRange(ctx, key, 0, -1).Result()
	if err != nil {
		t.Fatalf("read starts: %v", err)
	}
	starts := make(map[string][]taskStart)
	for _, e := range entries {
		parts := strings.Split(e, "|")
		if len(parts) != 3 {
			t.Fatalf("malformed start entry %q", e)
		}
		ms, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			t.Fatalf("malformed start entry %q: %v", e, err)
		}
		starts[parts[0]] = append(starts[parts[0]], taskStart{at: time.UnixMilli(ms), who: parts[2]})
	}
	return starts
}

// tail returns the last n bytes of the file at path, for failure messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// TestKill9WorkerLosesNothing kills a worker process with SIGKILL while it
// runs tasks: a fresh worker with the default lease settings finishes every
// task, runs again exactly the tasks the dead one held, and no other.
func TestKill9WorkerLosesNothing(t *testing.T) {
	t.Parallel()
	const (
		total       = 200
		concurrency = 20
		// The child is killed once it has started this many tasks: with
		// total-killAfter left pending, the fresh worker drains the queue
		// (4 rounds of 2 s) before the dead worker's leases run out, so the
		// re-start times below measure lease recovery, not queueing.
		killAfter = 120
	)
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	t.Cleanup(cancel)
	server := chaosServer(t, srv.URL(), chaosPrefix)
	cnf := server.GetConfig()
	if err := server.RegisterTask("slow", slowTask(rdb, startsKey(chaosPrefix), "parent")); err != nil {
		t.Fatal(err)
	}

	results := make([]*result.AsyncResult, total)
	for i := range results {
		r, err := server.SendTaskWithContext(ctx, sig("slow", int64Arg(int64(i))))
		if err != nil {
			t.Fatalf("send task %d: %v", i, err)
		}
		results[i] = r
	}

	// The worker process: this test binary again, in chaos-worker mode.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "child.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|%d", chaosWorkerEnv, srv.URL(), chaosPrefix, concurrency))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	err = cmd.Start()
	logFile.Close()
	if err != nil {
		t.Fatalf("start worker process: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // fails harmlessly once it has exited
		<-exited
		if t.Failed() {
			t.Logf("worker process output:\n%s", tail(logPath, 4000))
		}
	})

	var started int64
	pollUntil(t, 60*time.Second, 20*time.Millisecond, fmt.Sprintf("the worker process to start %d tasks and complete some", killAfter), func() bool {
		select {
		case <-exited:
			t.Fatalf("worker process exited on its own (%v):\n%s", waitErr, tail(logPath, 4000))
		default:
		}
		n, err := rdb.LLen(ctx, startsKey(chaosPrefix)).Result()
		if err != nil {
			t.Fatalf("count starts: %v", err)
		}
		started = n
		if n < killAfter {
			return false
		}
		for _, r := range results {
			if r.GetState().IsSuccess() {
				return true
			}
		}
		return false
	})

	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill worker process: %v", err)
	}
	killedAt := time.Now()
	<-exited
	t.Logf("killed the worker process after it started %d tasks", started)

	// What the dead worker held: nothing changes that until the recoverer
	// of the fresh worker below runs.
	active, err := server.GetBroker().(brokeriface.Inspector).ListTasks(ctx, cnf.DefaultQueue, brokeriface.StatusActive, 0, total)
	if err != nil {
		t.Fatal(err)
	}
	held := make(map[string]bool, len(active))
	for _, info := range active {
		held[info.Signature.UUID] = true
	}
	startsAtKill := readStarts(t, ctx, rdb, startsKey(chaosPrefix))

	launch(t, server.NewWorker("chaos-fresh", concurrency))
	for i, r := range results {
		out, err := r.GetWithContext(ctx, 20*time.Millisecond)
		if err != nil {
			t.Fatalf("task %d (%s): %v", i, r.Signature.UUID, err)
		}
		if got := values(out); len(got) != 1 || got[0] != int64(i) {
			t.Fatalf("task %d (%s) returned %v, want [%d]", i, r.Signature.UUID, got, i)
		}
	}
	doneAt := time.Now()

	starts := readStarts(t, ctx, rdb, startsKey(chaosPrefix))
	var interrupted []string // held by the dead worker and started there
	for id := range held {
		if len(startsAtKill[id]) > 0 {
			interrupted = append(interrupted, id)
		}
	}
	if len(interrupted) == 0 {
		t.Fatalf("no task was running when the worker process was killed (%d held): the test did not test anything", len(held))
	}
	var restarts []time.Duration
	for _, r := range results {
		id := r.Signature.UUID
		ss := starts[id]
		switch {
		case slices.Contains(interrupted, id):
			if len(ss) != 2 || ss[0].who != "child" || ss[1].who != "parent" {
				t.Errorf("interrupted task %s: starts %v, want one in the killed worker, then one in the fresh one", id, ss)
				continue
			}
			restarts = append(restarts, ss[1].at.Sub(killedAt))
		case held[id]:
			// Taken by the dead worker but not yet started there.
			if len(ss) != 1 || ss[0].who != "parent" {
				t.Errorf("task %s, held but not started by the killed worker: starts %v, want one in the fresh worker", id, ss)
			}
		default:
			if len(ss) != 1 {
				t.Errorf("task %s, not running at the kill: started %d times %v, want once", id, len(ss), ss)
			}
		}
	}
	if t.Failed() {
		return
	}
	slices.Sort(restarts)
	first, last := restarts[0], restarts[len(restarts)-1]
	t.Logf("kill -9 with %d tasks running: re-started %v (first) to %v (last) after the kill (LeaseDuration %v, renewal every %v, recovery every %v); all %d tasks done %v after the kill",
		len(interrupted), first.Round(10*time.Millisecond), last.Round(10*time.Millisecond),
		cnf.LeaseDuration, cnf.LeaseRenewInterval, cnf.RecoverInterval, total, doneAt.Sub(killedAt).Round(10*time.Millisecond))
	// The dead worker renewed its leases at most LeaseRenewInterval before
	// the kill, so nothing may run again before LeaseDuration minus that
	// (half of it, to allow for a late renewal under -race), and everything
	// must have by LeaseDuration plus a recovery round, with slack for the
	// fresh worker's queue.
	if earliest := cnf.LeaseDuration / 2; first < earliest {
		t.Errorf("an interrupted task ran again %v after the kill, before the dead worker's lease (%v) could have run out", first, cnf.LeaseDuration)
	}
	if latest := cnf.LeaseDuration + cnf.RecoverInterval + 10*time.Second; last > latest {
		t.Errorf("the last interrupted task ran again %v after the kill, later than %v", last, latest)
	}
}

// TestRedisRestartWithAOFLosesNothing kills Redis (with an fsynced AOF)
// while tasks are being sent and run, and restarts it: every send that
// returned without error runs to SUCCESS, sends during the outage fail with
// an error, and the worker keeps going.
func TestRedisRestartWithAOFLosesNothing(t *testing.T) {
	t.Parallel()
	const total = 300
	srv := redistest.Start(t, redistest.WithAOF())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	server := chaosServer(t, srv.URL(), chaosPrefix, func(c *config.Config) { c.Redis.NormalTasksPollPeriod = 200 })

	var mu sync.Mutex
	var completions []time.Time
	if err := server.RegisterTask("echo", func(n int64) (int64, error) {
		mu.Lock()
		completions = append(completions, time.Now())
		mu.Unlock()
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	w := server.NewWorker("aof", 10)
	var reported atomic.Int32
	w.SetErrorHandler(func(error) { reported.Add(1) })
	workerErrs := make(chan error, 1)
	w.LaunchAsync(workerErrs)
	var quitOnce sync.Once
	quit := func() { quitOnce.Do(w.Quit) }
	t.Cleanup(quit)

	// The sender sends total tasks over about 3 s, retrying each failed
	// send with a fresh task until one is accepted: results holds exactly
	// the accepted ones.
	results := make([]*result.AsyncResult, total)
	var accepted, failedSends atomic.Int32
	var badErrMu sync.Mutex
	var badErrs []string
	senderDone := make(chan struct{})
	go func() {
		defer close(senderDone)
		for i := range total {
			for {
				r, err := server.SendTaskWithContext(ctx, sig("echo", int64Arg(int64(i))))
				if err == nil {
					results[i] = r
					accepted.Add(1)
					break
				}
				if ctx.Err() != nil {
					return
				}
				failedSends.Add(1)
				if !strings.Contains(err.Error(), "machinist:") {
					badErrMu.Lock()
					badErrs = append(badErrs, err.Error())
					badErrMu.Unlock()
				}
				time.Sleep(20 * time.Millisecond) // pace the retries
			}
			time.Sleep(10 * time.Millisecond) // spread the stream over ~3 s
		}
	}()

	pollUntil(t, 30*time.Second, 5*time.Millisecond, "half the tasks to be sent", func() bool { return accepted.Load() >= total/2 })
	srv.Kill(t)
	killedAt := time.Now()
	// The outage lasts about a second, and until a send has failed: the
	// Redis client retries dialling and commands for a while (about 1.5 s
	// with go-redis's defaults) before a send returns an error.
	time.Sleep(time.Second)
	pollUntil(t, 15*time.Second, 5*time.Millisecond, "a send to fail while Redis is down", func() bool { return failedSends.Load() > 0 })
	srv.Restart(t)
	restartedAt := time.Now()
	t.Logf("Redis killed after %d tasks were accepted, back %v later", accepted.Load(), restartedAt.Sub(killedAt).Round(time.Millisecond))

	select {
	case <-senderDone:
	case <-ctx.Done():
		t.Fatalf("the sender did not finish: %d of %d accepted", accepted.Load(), total)
	}
	if int(accepted.Load()) != total {
		t.Fatalf("the sender stopped with %d of %d tasks accepted", accepted.Load(), total)
	}
	if failedSends.Load() == 0 {
		t.Fatal("no send failed while Redis was down: the outage was not exercised")
	}
	badErrMu.Lock()
	if len(badErrs) > 0 {
		t.Errorf("%d send errors do not say they come from machinist, e.g. %q", len(badErrs), badErrs[0])
	}
	badErrMu.Unlock()

	for i, r := range results {
		out, err := r.GetWithContext(ctx, 10*time.Millisecond)
		if err != nil {
			t.Fatalf("accepted task %d (%s): %v", i, r.Signature.UUID, err)
		}
		if got := values(out); len(got) != 1 || got[0] != int64(i) {
			t.Fatalf("accepted task %d returned %v, want [%d]", i, got, i)
		}
	}
	doneAt := time.Now()

	select {
	case err := <-workerErrs:
		t.Fatalf("the worker stopped during the outage: %v", err)
	default:
	}
	mu.Lock()
	var firstAfter time.Time
	for _, c := range completions {
		if c.After(restartedAt) && (firstAfter.IsZero() || c.Before(firstAfter)) {
			firstAfter = c
		}
	}
	mu.Unlock()
	if firstAfter.IsZero() {
		t.Fatal("no task completed after the restart")
	}
	t.Logf("Redis restart: %d sends failed during the outage; first task completed %v after the restart, all %d done %v after it; %d errors reported to the handler",
		failedSends.Load(), firstAfter.Sub(restartedAt).Round(time.Millisecond), total,
		doneAt.Sub(restartedAt).Round(time.Millisecond), reported.Load())

	quit()
	if err := <-workerErrs; err != nil {
		t.Fatalf("worker stopped with %v", err)
	}
}

// TestThousandChordsFireExactlyOnce sends a thousand chords at once to fifty
// workers in ten processes' worth of Servers: every callback runs exactly
// once, with the sum of its members' results.
func TestThousandChordsFireExactlyOnce(t *testing.T) {
	t.Parallel()
	const (
		chords      = 1000
		senders     = 20
		servers     = 10
		concurrency = 5
	)
	srv := redistest.Shared(t)
	prefix := srv.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)

	var mu sync.Mutex
	fired := make(map[string]int) // callback UUID → runs
	taskFuncs := map[string]interface{}{
		"add": func(args ...int64) (int64, error) {
			var sum int64
			for _, a := range args {
				sum += a
			}
			return sum, nil
		},
		"count": func(ctx context.Context, args ...int64) (int64, error) {
			id := tasks.SignatureFromContext(ctx).UUID
			mu.Lock()
			fired[id]++
			mu.Unlock()
			var sum int64
			for _, a := range args {
				sum += a
			}
			return sum, nil
		},
	}
	ss := make([]*machinist.Server, servers)
	stops := make([]func() error, servers)
	for i := range ss {
		ss[i] = chaosServer(t, srv.URL(), prefix)
		if err := ss[i].RegisterTasks(taskFuncs); err != nil {
			t.Fatal(err)
		}
		stops[i] = launch(t, ss[i].NewWorker(fmt.Sprintf("chords-%d", i), concurrency))
	}

	start := time.Now()
	results := make([]*result.ChordAsyncResult, chords)
	errs := make(chan error, senders)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ss[g%servers]
			for i := g; i < chords; i += senders {
				n := int64(i)
				group, err := tasks.NewGroup(sig("add", int64Arg(n), int64Arg(1)), sig("add", int64Arg(n), int64Arg(2)), sig("add", int64Arg(n), int64Arg(3)))
				if err != nil {
					errs <- err
					return
				}
				chord, err := tasks.NewChord(group, sig("count"))
				if err != nil {
					errs <- err
					return
				}
				r, err := s.SendChordWithContext(ctx, chord, 0)
				if err != nil {
					errs <- fmt.Errorf("send chord %d: %w", i, err)
					return
				}
				results[i] = r
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sent := time.Since(start)

	for i, r := range results {
		out, err := r.GetWithContext(ctx, 10*time.Millisecond)
		if err != nil {
			t.Fatalf("chord %d: %v", i, err)
		}
		if got, want := values(out), int64(3*i+6); len(got) != 1 || got[0] != want {
			t.Fatalf("chord %d callback returned %v, want [%d]", i, got, want)
		}
	}
	wall := time.Since(start)

	// A callback sent twice would run soon after the first: watch for a
	// second, bounded.
	check := func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(fired) != chords {
			return fmt.Errorf("%d callbacks ran, want %d", len(fired), chords)
		}
		for _, r := range results {
			id := r.CallbackResult().Signature.UUID
			if n := fired[id]; n != 1 {
				return fmt.Errorf("callback %s ran %d times, want once", id, n)
			}
		}
		return nil
	}
	for watchUntil := time.Now().Add(time.Second); time.Now().Before(watchUntil); time.Sleep(50 * time.Millisecond) {
		if err := check(); err != nil {
			t.Fatal(err)
		}
	}
	for i, stop := range stops {
		if err := stop(); err != nil {
			t.Errorf("worker %d stopped with %v", i, err)
		}
	}
	t.Logf("%d chords of 3 on %d workers (%d Servers): sent in %v, all callbacks done in %v",
		chords, servers*concurrency, servers, sent.Round(time.Millisecond), wall.Round(time.Millisecond))
}

// syncBuffer is a bytes.Buffer safe for concurrent writes, for logs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWorkerRetriesConnectionWithBackoff starts a worker while its Redis is
// down: it reports the failures, backs off instead of spinning, never shows
// the password of its URL, and runs tasks once Redis lets it in.
func TestWorkerRetriesConnectionWithBackoff(t *testing.T) {
	t.Parallel()
	const (
		password      = "s3cret"
		adminPassword = "admin-pw"
	)
	// requirepass would also lock out redistest's readiness probes, which
	// do not authenticate, so the default user may only PING, INFO and
	// SHUTDOWN; the worker logs in as "machinist", with a password, and
	// that user starts disabled (see the second phase below).
	srv := redistest.Start(t, redistest.WithArgs(
		"--user", "default", "on", "nopass", "-@all", "+ping", "+info", "+shutdown",
		"--user", "admin", "on", ">"+adminPassword, "~*", "&*", "+@all",
		"--user", "machinist", "off", ">"+password, "~*", "&*", "+@all",
	))
	admin := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Username: "admin", Password: adminPassword})
	t.Cleanup(func() { admin.Close() })
	srv.Stop(t)
	url := "redis://machinist:" + password + "@" + srv.Addr()

	var logs syncBuffer
	server := chaosServer(t, url, chaosPrefix, func(c *config.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	if err := server.RegisterTask("echo", func(s string) (string, error) { return s, nil }); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []string
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(reported)
	}
	w := server.NewWorker("backoff", 2)
	w.SetErrorHandler(func(err error) {
		mu.Lock()
		reported = append(reported, err.Error())
		mu.Unlock()
	})
	workerErrs := make(chan error, 1)
	launchedAt := time.Now()
	w.LaunchAsync(workerErrs)
	var quitOnce sync.Once
	quit := func() { quitOnce.Do(w.Quit) }
	t.Cleanup(quit)

	// First phase, Redis down. The Redis client retries dialling and
	// commands before a fetch fails (about 1.7 s with go-redis's
	// defaults), so the worker notices after more than a second: wait for
	// its first error, then for a second more of outage.
	pollUntil(t, 15*time.Second, 5*time.Millisecond, "the worker to report that Redis is unreachable", func() bool { return count() > 0 })
	noticedAfter := time.Since(launchedAt)
	before := count()
	time.Sleep(time.Second)
	whileDown := count() - before

	// Second phase, Redis up but refusing the worker's user: every fetch
	// now fails at once, without the client's retries to slow it down,
	// so the pace of the errors is the worker's own. A worker without
	// backoff would report hundreds in a second.
	srv.Restart(t)
	before = count()
	time.Sleep(time.Second)
	whileRefused := count() - before

	// Third phase: the worker's user is let in; a task sent now runs.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if err := admin.Do(ctx, "ACL", "SETUSER", "machinist", "on").Err(); err != nil {
		t.Fatalf("enable user: %v", err)
	}
	openedAt := time.Now()
	// The Server's connection pool may refuse for a moment more (go-redis
	// re-dials only once a second after repeated dial failures): retry.
	var r *result.AsyncResult
	var sendFailures int
	pollUntil(t, 10*time.Second, 20*time.Millisecond, "a send to succeed once Redis lets the worker in", func() bool {
		var err error
		r, err = server.SendTaskWithContext(ctx, sig("echo", strArg("back")))
		if err != nil {
			sendFailures++
		}
		return err == nil
	})
	out, err := r.GetWithContext(ctx, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("task sent once Redis let the worker in: %v", err)
	}
	if got := values(out); len(got) != 1 || got[0] != "back" {
		t.Fatalf("task returned %v, want [back]", got)
	}
	t.Logf("worker started with Redis down: first error after %v, %d more in the next second; Redis up refusing the worker: %d errors in one second; let in: %d sends refused, task done %v later",
		noticedAfter.Round(time.Millisecond), whileDown, whileRefused, sendFailures, time.Since(openedAt).Round(time.Millisecond))

	select {
	case err := <-workerErrs:
		t.Fatalf("the worker stopped: %v", err)
	default:
	}
	quit()
	if err := <-workerErrs; err != nil {
		t.Fatalf("worker stopped with %v", err)
	}

	if whileDown >= 50 {
		t.Errorf("the error handler was called %d times in one second with Redis down: the worker retries in a hot loop", whileDown)
	}
	if whileRefused == 0 {
		t.Error("the error handler was not called while Redis refused the worker")
	}
	if whileRefused >= 50 {
		t.Errorf("the error handler was called %d times in one second while Redis refused the worker: the worker retries in a hot loop", whileRefused)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("errors reported: first %q, last %q", reported[0], reported[len(reported)-1])
	for _, e := range reported {
		if strings.Contains(e, password) {
			t.Errorf("a reported error shows the password: %q", e)
		}
		if !strings.Contains(e, "fetch") {
			t.Errorf("reported error %q does not say what failed", e)
		}
	}
	if l := logs.String(); strings.Contains(l, password) {
		i := strings.Index(l, password)
		t.Errorf("the logs show the password: ...%s...", l[max(0, i-200):min(len(l), i+50)])
	}
}
