package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestCancelWorkflowsOfAnyShape: 100 diamonds whose middle nodes hold
// until they are stopped are cancelled from another process while they
// run, each by the workflow's ID, a middle node's UUID or the join's. The
// running nodes stop, no join runs, waiting on each workflow returns
// tasks.ErrTaskCancelled, and the first nodes keep their success.
func TestCancelWorkflowsOfAnyShape(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		// On the in-process engine, whose scripts run many times slower
		// under -race, fewer.
		workflows := 100
		if p.name == "memory" {
			workflows = 40
		}
		s := processes(t, p, 3, func(c *config.Config) {
			c.LeaseDuration = time.Minute
			c.LeaseRenewInterval = 30 * time.Second
		})
		sender, operator, workerSrv := s[0], s[1], s[2]
		var holding, joins atomic.Int32
		started := make(chan struct{}, 2*workflows)
		if err := workerSrv.RegisterTasks(map[string]interface{}{
			"first": func() (int64, error) { return 1, nil },
			"hold": func(ctx context.Context, _ int64) error {
				holding.Add(1)
				defer holding.Add(-1)
				started <- struct{}{}
				<-ctx.Done()
				return ctx.Err()
			},
			"join": func(...int64) error {
				joins.Add(1)
				return nil
			},
		}); err != nil {
			t.Fatal(err)
		}
		launch(t, workerSrv.NewWorker("w", 2*workflows))
		ctx := testCtx(t)

		wfs := make([]*tasks.Workflow, workflows)
		results := make([]*result.WorkflowAsyncResult, workflows)
		for i := range wfs {
			wf, err := tasks.NewDAG(fmt.Sprintf("diamond-%d", i)).
				Add("a", &tasks.Signature{Name: "first"}).
				Add("b", &tasks.Signature{Name: "hold"}, "a").
				Add("c", &tasks.Signature{Name: "hold"}, "a").
				Add("d", &tasks.Signature{Name: "join"}, "b", "c").
				Build()
			if err != nil {
				t.Fatal(err)
			}
			if results[i], err = sender.SendWorkflowWithContext(ctx, wf); err != nil {
				t.Fatalf("SendWorkflow %d: %v", i, err)
			}
			wfs[i] = wf
		}
		for range 2 * workflows {
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatalf("%d middle nodes running, want %d", holding.Load(), 2*workflows)
			}
		}

		var wg sync.WaitGroup
		for i, wf := range wfs {
			nodes := wf.Nodes()
			id := []string{wf.ID, nodes[1].Signature.UUID, nodes[3].Signature.UUID}[i%3]
			wg.Go(func() {
				if err := operator.CancelWorkflow(ctx, id); err != nil {
					t.Errorf("CancelWorkflow(%s): %v", id, err)
				}
			})
		}
		wg.Wait()
		for i, res := range results {
			_, err := res.GetWithContext(ctx, poll)
			var we *result.WorkflowError
			if !errors.As(err, &we) || !errors.Is(err, tasks.ErrTaskCancelled) || we.Node != "" {
				t.Fatalf("workflow %d: %v, want it cancelled", i, err)
			}
			first := result.NewAsyncResult(wfs[i].Nodes()[0].Signature, sender.GetBackend())
			if _, err := first.GetWithContext(ctx, poll); err != nil {
				t.Fatalf("workflow %d: its first node: %v, want its success kept", i, err)
			}
		}
		for holding.Load() > 0 {
			select {
			case <-ctx.Done():
				t.Fatalf("%d middle nodes still running after their workflows were cancelled", holding.Load())
			case <-time.After(poll):
			}
		}
		if n := joins.Load(); n != 0 {
			t.Fatalf("%d joins ran after their workflows were cancelled", n)
		}
	})
}
