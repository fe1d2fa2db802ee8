package chaos_test

// Crashes: a worker process killed with SIGKILL while it runs tasks, and
// Redis killed with SIGKILL (its AOF fsynced on every write) and restarted
// while tasks are sent and run.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// TestKill9WorkerLosesNothing kills a worker process with SIGKILL while it
// runs tasks: another worker finishes every task, runs again exactly the
// tasks the dead one held, and none of the others.
func TestKill9WorkerLosesNothing(t *testing.T) {
	t.Parallel()
	repeat(t, func(round int) {
		const total, concurrency = 60, 20
		ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
		defer cancel()
		srv := redistest.Start(t)
		l := newLedger(t)
		l.WorkTime = time.Second
		a := l.startProcess(t, "A", concurrency, "BROKER="+srv.URL(), "RESULT_BACKEND="+srv.URL(), "LEASE_DURATION="+shortLease.String())
		s := l.newServer(t, srv.URL(), "B", withLease(shortLease))
		for range total {
			if err := l.send(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		// Kill A in its second round of tasks: some finished, others running.
		waitFor(t, 30*time.Second, "worker A to finish some tasks and start others", func() bool {
			started, finished := l.runsBy(t, ctx, "A")
			return finished >= concurrency/2 && started > finished
		})
		a.Kill(t)
		killedAt := time.Now()

		// What A held when it died, and what it had started: nothing
		// changes these until B's recovery runs.
		active, err := s.GetBroker().(brokers.Inspector).ListTasks(ctx, s.GetConfig().DefaultQueue, brokers.StatusActive, 0, total)
		if err != nil {
			t.Fatal(err)
		}
		held := map[string]bool{}
		for _, info := range active {
			held[info.Signature.UUID] = true
		}
		workAtKill, _, _ := l.witnessed(t, ctx)

		l.startWorker(t, s, concurrency) // B
		rep := l.verify(t, ctx, s)

		work, _, _ := l.witnessed(t, ctx)
		interrupted, first, last := 0, time.Duration(0), time.Duration(0)
		for id, runs := range work {
			wasRunning := held[id] && len(workAtKill[id]) > 0
			var byB []*run
			for _, r := range runs {
				if strings.HasPrefix(r.id, "B-") {
					byB = append(byB, r)
				}
			}
			switch {
			case wasRunning:
				interrupted++
				if len(runs) != 2 || len(byB) != 1 {
					t.Errorf("task %s, running in A when it died: runs %v, want one in A then one in B", id, runIDs(runs))
					continue
				}
				after := byB[0].started.Sub(killedAt)
				if first == 0 || after < first {
					first = after
				}
				last = max(last, after)
			case len(runs) != 1:
				t.Errorf("task %s, not running in A when it died: runs %v, want one", id, runIDs(runs))
			}
		}
		if interrupted == 0 {
			t.Fatal("no task was running in A when it died: the test tested nothing")
		}
		t.Logf("kill -9 of a worker process with %d tasks running (lease %v): they ran again %v to %v after the kill; %v",
			interrupted, shortLease, first.Round(10*time.Millisecond), last.Round(10*time.Millisecond), rep)
	})
}

// TestRedisKilledWithAOFLosesNothing kills Redis (AOF, fsync on every
// write) with SIGKILL while tasks are sent and run, and restarts it after
// a send has failed: every send that returned without error finishes, and
// the worker carries on.
func TestRedisKilledWithAOFLosesNothing(t *testing.T) {
	t.Parallel()
	repeat(t, func(round int) {
		ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
		defer cancel()
		srv := redistest.Start(t, redistest.WithAOF())
		l := newLedger(t)
		s := l.newServer(t, srv.URL(), "W")
		l.startWorker(t, s, 10)
		stopSending := l.sendEvery(ctx, s, 5*time.Millisecond)
		l.waitAccepted(t, 100, 30*time.Second, "before the fault")
		srv.Kill(t)
		killedAt := time.Now()
		waitFor(t, 30*time.Second, "a send to fail while Redis is down", func() bool { _, failed := l.counts(); return failed > 0 })
		srv.Restart(t)
		restartedAt := time.Now()
		l.waitAccepted(t, 100, 30*time.Second, "after the restart")
		stopSending()
		rep := l.verify(t, ctx, s)
		t.Logf("Redis SIGKILLed and restarted from its AOF %v later: %v; all done %v after the restart",
			restartedAt.Sub(killedAt).Round(10*time.Millisecond), rep, rep.since(restartedAt))
	})
}
