package integration_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestJoinsFireExactlyOnce sends workflows of three parallel nodes and a
// join at once to fifty workers in ten Servers, on one Redis and on a
// Cluster: the parents of each join finish at about the same time on
// different workers, and every join runs exactly once, with its parents'
// results in the order of its deps.
func TestJoinsFireExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		workflows int
		url       func(t *testing.T) (url, prefix string)
	}{
		{"redis", 1000, func(t *testing.T) (string, string) { srv := redistest.Shared(t); return srv.URL(), srv.Prefix(t) }},
		{"cluster", 300, func(t *testing.T) (string, string) {
			c := redistest.SharedCluster(t)
			return c.URL(), c.Prefix(t)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, prefix := tc.url(t)
			joinsFireExactlyOnce(t, url, prefix, tc.workflows)
		})
	}
}

func joinsFireExactlyOnce(t *testing.T, url, prefix string, workflows int) {
	const (
		senders     = 20
		servers     = 10
		concurrency = 5
	)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	var mu sync.Mutex
	fired := make(map[string]int) // join UUID → runs
	taskFuncs := map[string]interface{}{
		"add": func(args ...int64) (int64, error) {
			var sum int64
			for _, a := range args {
				sum += a
			}
			return sum, nil
		},
		"join": func(ctx context.Context, args ...int64) (string, error) {
			mu.Lock()
			fired[tasks.SignatureFromContext(ctx).UUID]++
			mu.Unlock()
			return fmt.Sprint(args), nil
		},
	}
	ss := make([]*machinery.Server, servers)
	for i := range ss {
		ss[i] = chaosServer(t, url, prefix)
		if err := ss[i].RegisterTasks(taskFuncs); err != nil {
			t.Fatal(err)
		}
		stop := launch(t, ss[i].NewWorker(fmt.Sprintf("joins-%d", i), concurrency))
		t.Cleanup(func() { _ = stop() })
	}

	start := time.Now()
	wfs := make([]*tasks.Workflow, workflows)
	results := make([]*result.WorkflowAsyncResult, workflows)
	errs := make(chan error, senders)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			s := ss[g%servers]
			for i := g; i < workflows; i += senders {
				n := int64(i)
				wf, err := tasks.NewDAG("join").
					Add("x", sig("add", int64Arg(n), int64Arg(1))).
					Add("y", sig("add", int64Arg(n), int64Arg(2))).
					Add("z", sig("add", int64Arg(n), int64Arg(3))).
					Add("j", sig("join"), "z", "x", "y").
					Build()
				if err != nil {
					errs <- err
					return
				}
				if results[i], err = s.SendWorkflowWithContext(ctx, wf); err != nil {
					errs <- fmt.Errorf("send workflow %d: %w", i, err)
					return
				}
				wfs[i] = wf
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, r := range results {
		out, err := r.GetWithContext(ctx, 10*time.Millisecond)
		if err != nil {
			t.Fatalf("workflow %d: %v", i, err)
		}
		want := fmt.Sprint([]int64{int64(i + 3), int64(i + 1), int64(i + 2)})
		if got := values(out); len(got) != 1 || got[0] != want {
			t.Fatalf("workflow %d: join returned %v, want [%s]", i, got, want)
		}
	}
	wall := time.Since(start)
	// A join sent twice would run soon after the first: watch for a
	// second, bounded.
	check := func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(fired) != workflows {
			return fmt.Errorf("%d joins ran, want %d", len(fired), workflows)
		}
		for _, wf := range wfs {
			if id := wf.Nodes()[3].Signature.UUID; fired[id] != 1 {
				return fmt.Errorf("join %s ran %d times, want once", id, fired[id])
			}
		}
		return nil
	}
	for watchUntil := time.Now().Add(time.Second); time.Now().Before(watchUntil); time.Sleep(50 * time.Millisecond) {
		if err := check(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d workflows of 3 nodes and a join on %d workers (%d Servers): all joins done in %v",
		workflows, servers*concurrency, servers, wall.Round(time.Millisecond))
}
