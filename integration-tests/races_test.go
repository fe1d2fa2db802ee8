package integration_test

// Races and a slow start: a thousand chords raced by fifty workers, and a
// worker started before its Redis. Faults (processes paused and killed,
// Redis hung, killed and failed over, connections cut) are the chaos
// suite's, in ./chaos.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/syncbuf"
	"github.com/b6192125/machinist/internal/waitfor"
	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// chaosPrefix is the key prefix on the servers these tests start for
// themselves (a server of their own needs no per-test prefix).
const chaosPrefix = "chaos"

// chaosServer returns a Server on the Redis at url with the default lease
// settings, closed when the test ends.
func chaosServer(t *testing.T, url, keyPrefix string, mutate ...func(*config.Config)) *machinery.Server {
	t.Helper()
	cnf := redisConfig(url, keyPrefix)
	cnf.NoUnixSignals = true
	cnf.Logger = slog.New(slog.DiscardHandler)
	for _, m := range mutate {
		m(cnf)
	}
	s, err := machinery.NewServer(cnf)
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
	ss := make([]*machinery.Server, servers)
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

	var logs syncbuf.Buffer
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
	waitfor.True(t, 15*time.Second, "the worker to report that Redis is unreachable", func() bool { return count() > 0 })
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
	waitfor.True(t, 10*time.Second, "a send to succeed once Redis lets the worker in", func() bool {
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
		if !strings.Contains(e, "fetch") && !strings.Contains(e, "announce the task names") {
			t.Errorf("reported error %q does not say what failed", e)
		}
	}
	if l := logs.String(); strings.Contains(l, password) {
		i := strings.Index(l, password)
		t.Errorf("the logs show the password: ...%s...", l[max(0, i-200):min(len(l), i+50)])
	}
}

// A worker with a pre-consume handler still reports a Redis that stopped
// answering: the gate is watched while a fetch waits, and the fetch's own
// errors are not taken for the gate closing.
func TestHungRedisIsReportedWithAPreConsumeHandler(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	server := chaosServer(t, srv.URL(), chaosPrefix, func(c *config.Config) {
		c.Redis.ReadTimeout = 1
		c.Redis.NormalTasksPollPeriod = 50
	})
	reported := make(chan error, 16)
	w := server.NewWorker("gated", 1)
	w.SetErrorHandler(func(err error) {
		select {
		case reported <- err:
		default:
		}
	})
	asked := make(chan struct{}, 1)
	w.SetPreConsumeHandler(func(*machinery.Worker) bool {
		select {
		case asked <- struct{}{}:
		default:
		}
		return true
	})
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	<-asked // fetching
	srv.Pause(t)
	// Other loops (the heartbeat) may report the hung Redis first.
	timeout := time.After(30 * time.Second)
	for fetchReported := false; !fetchReported; {
		select {
		case err := <-reported:
			fetchReported = strings.Contains(err.Error(), "fetch")
		case <-timeout:
			t.Fatal("a hung Redis was not reported by the fetch in 30s by a worker with a pre-consume handler")
		}
	}
	srv.Resume(t)
	w.Quit()
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
