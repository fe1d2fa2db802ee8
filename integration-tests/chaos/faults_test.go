package chaos_test

// Faults of a worker process and of one Redis server: a worker paused past
// its lease, Redis hung past the client's read timeout, connections killed
// in a loop, and a proxy that delays, stalls and cuts the traffic.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/waitfor"
	"github.com/b6192125/machinist/v1/config"
)

// chaosTimeout bounds each test's waits.
const chaosTimeout = 90 * time.Second

// shortLease is the lease of the tests that pause or kill workers, so that
// recovery comes within seconds.
const shortLease = 2 * time.Second

func withLease(d time.Duration) func(*config.Config) {
	return func(c *config.Config) { c.LeaseDuration = d }
}

// waitFor polls cond every 10 ms until it holds, failing the test after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, timeout, what, cond)
}

// runsBy returns how many runs of work who has started and finished.
func (l *ledger) runsBy(t *testing.T, ctx context.Context, who string) (started, finished int) {
	t.Helper()
	work, _, _ := l.witnessed(t, ctx)
	for _, runs := range work {
		for _, r := range runs {
			if strings.HasPrefix(r.id, who+"-") {
				started++
				if !r.done.IsZero() {
					finished++
				}
			}
		}
	}
	return started, finished
}

// TestPausedWorkerSettlesNothing is defect 1 of issue 14 with processes: a
// worker process takes tasks and is paused (SIGSTOP) for 7 s with a 2 s
// lease; another worker recovers and runs them; the paused one resumes,
// finishes its runs (the task ignores cancellation) and tries to settle
// them. Nothing it does may count: no result of its runs kept, no callback
// of its sent. Then it stops on SIGTERM.
func TestPausedWorkerSettlesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		backend func(url string) string
	}{
		{"backend-on-broker-client", func(url string) string { return url }},
		{"backend-on-own-client", func(url string) string { return url + "/1" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repeat(t, func(round int) { pausedWorker(t, tc.backend) })
		})
	}
}

func pausedWorker(t *testing.T, backend func(url string) string) {
	const tasks, pause = 8, 7 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	srv := redistest.Start(t)
	l := newLedger(t)
	l.WorkTime = 1500 * time.Millisecond
	backendURL := backend(srv.URL())

	a := l.startProcess(t, "A", tasks, "BROKER="+srv.URL(), "RESULT_BACKEND="+backendURL, "LEASE_DURATION="+shortLease.String())
	s := l.newServer(t, srv.URL(), "B", withLease(shortLease), func(c *config.Config) { c.ResultBackend = backendURL })
	for range tasks {
		if err := l.send(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "worker A to start every task", func() bool {
		started, _ := l.runsBy(t, ctx, "A")
		return started == tasks
	})
	a.Pause(t)
	pausedAt := time.Now()
	l.startWorker(t, s, tasks) // B
	waitFor(t, 30*time.Second, "worker B to run every task again", func() bool {
		_, finished := l.runsBy(t, ctx, "B")
		return finished == tasks
	})
	time.Sleep(time.Until(pausedAt.Add(pause))) // the fault itself: 7 s of SIGSTOP
	a.Resume(t)
	waitFor(t, 30*time.Second, "worker A to finish its stale runs", func() bool {
		_, finished := l.runsBy(t, ctx, "A")
		return finished == tasks
	})
	// A's settles run after its runs finish; SIGTERM waits for them.
	a.Stop(t, 30*time.Second)

	rep := l.verify(t, ctx, s)
	if rep.Duplicated != tasks {
		t.Errorf("%d duplicated runs, want %d: every task ran in A, then again in B", rep.Duplicated, tasks)
	}
	t.Logf("worker paused %v past its %v lease: %v", pause, shortLease, rep)
}

// TestRedisHungPastReadTimeout is defect 2 of issue 14 at process level:
// Redis is paused (SIGSTOP) for longer than the client's 3 s read timeout
// while tasks are sent and run; the clients send again; on SIGCONT Redis
// runs every copy. Every send must report what happened, and every settle
// count once.
func TestRedisHungPastReadTimeout(t *testing.T) {
	t.Parallel()
	repeat(t, func(round int) {
		pause := []time.Duration{5 * time.Second, 8 * time.Second, 13 * time.Second}[round%3]
		ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
		defer cancel()
		srv := redistest.Start(t)
		l := newLedger(t)
		s := l.newServer(t, srv.URL(), "W")
		l.startWorker(t, s, 10)
		stopSending := l.sendEvery(ctx, s, 5*time.Millisecond)
		l.waitAccepted(t, 100, 30*time.Second, "before the fault")
		srv.Pause(t)
		time.Sleep(pause) // the fault itself
		srv.Resume(t)
		resumedAt := time.Now()
		l.waitAccepted(t, 100, 30*time.Second, "after the resume")
		stopSending()
		rep := l.verify(t, ctx, s)
		t.Logf("Redis paused %v (read timeout 3 s): %v; all done %v after the resume", pause, rep, rep.since(resumedAt))
	})
}

// TestRedisHungWithSendDeadlines: Redis is paused (SIGSTOP) for less than
// the client's read timeout while tasks are sent, each send with a 300 ms
// deadline, and run. Each send that gives up at its deadline says whether
// it may have happened, and one that says it did not never runs.
func TestRedisHungWithSendDeadlines(t *testing.T) {
	t.Parallel()
	repeat(t, func(round int) {
		pause := []time.Duration{1 * time.Second, 2 * time.Second}[round%2]
		ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
		defer cancel()
		srv := redistest.Start(t)
		l := newLedger(t)
		l.SendTimeout = 300 * time.Millisecond
		s := l.newServer(t, srv.URL(), "W")
		l.startWorker(t, s, 10)
		stopSending := l.sendEvery(ctx, s, 5*time.Millisecond)
		l.waitAccepted(t, 100, 30*time.Second, "before the fault")
		srv.Pause(t)
		time.Sleep(pause) // the fault itself
		srv.Resume(t)
		resumedAt := time.Now()
		l.waitAccepted(t, 100, 30*time.Second, "after the resume")
		stopSending()
		rep := l.verify(t, ctx, s)
		if rep.Failed == 0 {
			t.Fatal("no send gave up at its deadline: the test tested nothing")
		}
		t.Logf("Redis paused %v, sends with a 300 ms deadline: %v; all done %v after the resume", pause, rep, rep.since(resumedAt))
	})
}

// TestClientKillLoop kills every client connection of the server every
// 20 ms for 3 s (CLIENT KILL TYPE normal and TYPE pubsub) while tasks are
// sent and run.
func TestClientKillLoop(t *testing.T) {
	t.Parallel()
	repeat(t, func(round int) {
		ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
		defer cancel()
		srv := redistest.Start(t)
		admin := srv.Client(t)
		l := newLedger(t)
		s := l.newServer(t, srv.URL(), "W")
		l.startWorker(t, s, 10)
		stopSending := l.sendEvery(ctx, s, 2*time.Millisecond)
		l.waitAccepted(t, 100, 30*time.Second, "before the fault")

		var killed int64
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) { // the fault itself
			for _, kind := range []string{"normal", "pubsub"} {
				n, err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", kind, "SKIPME", "yes").Int64()
				if err != nil {
					t.Fatalf("CLIENT KILL: %v", err)
				}
				killed += n
			}
			time.Sleep(20 * time.Millisecond)
		}
		faultEnd := time.Now()
		l.waitAccepted(t, 100, 30*time.Second, "after the kills")
		stopSending()
		rep := l.verify(t, ctx, s)
		if killed == 0 {
			t.Fatal("no connection was killed: the test tested nothing")
		}
		t.Logf("%d connections killed in 3 s: %v; all done %v after the kills ended", killed, rep, rep.since(faultEnd))
	})
}

// TestProxyDelaysStallsAndCuts puts a proxy between Redis and everything
// else (sender and worker): 20 ms of delay each way for 2 s, then a 5 s
// stall (past the 3 s read timeout), then every connection cut 5 times,
// 200 ms apart.
func TestProxyDelaysStallsAndCuts(t *testing.T) {
	t.Parallel()
	repeat(t, func(round int) {
		ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
		defer cancel()
		srv := redistest.Start(t)
		proxy := redistest.StartProxy(t, srv.Addr())
		l := newLedger(t)
		s := l.newServer(t, proxy.URL(), "W")
		l.startWorker(t, s, 10)
		stopSending := l.sendEvery(ctx, s, 5*time.Millisecond)
		l.waitAccepted(t, 100, 30*time.Second, "before the fault")

		proxy.SetDelay(20 * time.Millisecond)
		time.Sleep(2 * time.Second)
		proxy.SetDelay(0)
		proxy.Stall()
		time.Sleep(5 * time.Second)
		proxy.Unstall()
		for range 5 {
			proxy.CutAll()
			time.Sleep(200 * time.Millisecond)
		}
		faultEnd := time.Now()
		l.waitAccepted(t, 100, 30*time.Second, "after the faults")
		stopSending()
		rep := l.verify(t, ctx, s)
		t.Logf("delay 20 ms for 2 s, stall 5 s, 5 cuts: %v; all done %v after the faults ended", rep, rep.since(faultEnd))
	})
}
