package integration_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/tasks"
)

// startLog records the order tasks start in, by their first argument.
type startLog struct {
	mu    sync.Mutex
	order []string
}

func (l *startLog) add(id string) {
	l.mu.Lock()
	l.order = append(l.order, id)
	l.mu.Unlock()
}

func (l *startLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.order)
}

// logServer returns a Server with no worker and the task "work", which
// records the order tasks start in by their argument.
func logServer(t *testing.T, p pair) (*machinery.Server, *startLog) {
	t.Helper()
	s := bareServer(t, p)
	log := &startLog{}
	if err := s.RegisterTask("work", func(ctx context.Context, id string) error {
		log.add(id)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s, log
}

// Tenant A sends 1,000 tasks, then tenant B sends 10; a worker started
// after both, 4 at once, starts all of B's before A's 100th. (The store's
// own test does it with 10,000; through Servers on every pair, beside
// other tests on a loaded machine, 1,000, and 500 on the in-process
// engine, whose scripts run many times slower under -race.)
func TestFairKeyAcrossTenants(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		backlog := 1000
		if p.name == "memory" {
			backlog = 500
		}
		s, log := logServer(t, p)
		ctx := testCtx(t)
		send := func(tenant string, n int) {
			sigs := make([]*tasks.Signature, n)
			for i := range sigs {
				sigs[i] = sig("work", tasks.Arg{Type: "string", Value: fmt.Sprintf("%s%05d", tenant, i)})
				sigs[i].FairKey = tenant
			}
			if _, err := s.SendTasks(ctx, sigs); err != nil {
				t.Fatal(err)
			}
		}
		send("a", backlog)
		send("b", 10)
		launch(t, s.NewWorker("w", 4))
		var started []string
		waitFor(t, "b's 10 tasks to start", func() bool {
			started = log.snapshot()
			n := 0
			for _, id := range started {
				if id[0] == 'b' {
					n++
				}
			}
			return n == 10
		})
		as := 0
		for _, id := range started {
			if id[0] == 'a' {
				as++
			}
			if id == "b00009" {
				break
			}
		}
		if as >= 100 {
			t.Fatalf("b's last task started after %d of a's, want before a's 100th", as)
		}
	})
}

// A worker that takes one task at a time runs a queue's tasks by
// priority, highest first, each level in the order sent.
func TestPriorityOrderOfRuns(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s, log := logServer(t, p)
		ctx := testCtx(t)
		var sigs []*tasks.Signature
		for i, prio := range []uint8{0, 5, 1, 9, 5, 0} {
			sg := sig("work", tasks.Arg{Type: "string", Value: fmt.Sprintf("p%d-%d", prio, i)})
			sg.Priority = prio
			sigs = append(sigs, sg)
			if _, err := s.SendTaskWithContext(ctx, sg); err != nil {
				t.Fatal(err)
			}
		}
		launch(t, s.NewWorker("w", 1))
		waitFor(t, "every task to start", func() bool { return len(log.snapshot()) == len(sigs) })
		want := []string{"p9-3", "p5-1", "p5-4", "p1-2", "p0-0", "p0-5"}
		if got := log.snapshot(); !slices.Equal(got, want) {
			t.Fatalf("ran in order %q, want %q", got, want)
		}
	})
}
