package integration_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestWorkflowAllowFailure: a node allowed to fail fails, and the
// workflow goes on: the join runs without its results, learns of its
// failure from WorkflowParents, and the workflow succeeds, counting it.
func TestWorkflowAllowFailure(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		mayFail := sig("fail", strArg("b fails"))
		mayFail.Immutable = true
		got, res, err := e.runWorkflow(tasks.NewDAG("allow").
			Add("a", sig("record", strArg("a"))).
			Add("b", tasks.AllowFailure(mayFail), "a").
			Add("c", sig("suffix", strArg("-c")), "a").
			Add("d", sig("parents"), "b", "c").
			Build())
		if err != nil {
			t.Fatal(err)
		}
		if want := []interface{}{"-ca / b:FAILURE:b fails,c:SUCCESS:"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("join result %q, want %q", got, want)
		}
		st, err := res.Status(e.ctx())
		if err != nil || st.State != tasks.StateSuccess || st.Succeeded != 3 || st.Failed != 1 {
			t.Fatalf("status %+v, %v; want SUCCESS, 3 succeeded and 1 failed", st, err)
		}
		// Each node's state, a page at a time.
		nodes, total, err := res.Nodes(e.ctx(), 1, 2)
		if err != nil || total != 4 || len(nodes) != 2 {
			t.Fatalf("Nodes(1, 2): %d nodes of %d, %v; want 2 of 4", len(nodes), total, err)
		}
		b, c := nodes[0], nodes[1]
		if b.Key != "b" || b.State.State != tasks.StateFailure || b.State.Error != "b fails" || !reflect.DeepEqual(b.Deps, []string{"a"}) {
			t.Fatalf("node b: %+v, %+v", b, b.State)
		}
		if c.Key != "c" || c.State.State != tasks.StateSuccess || len(c.State.Results) != 1 || c.State.Results[0].Value != "-ca" {
			t.Fatalf("node c: %+v, %+v", c, c.State)
		}
		if nodes, total, err := res.Nodes(e.ctx(), 4, 10); len(nodes) != 0 || total != 4 || err != nil {
			t.Fatalf("Nodes(4, 10): %v, %d, %v; want none of 4", nodes, total, err)
		}
	})
}

// TestWorkflowParentsOutsideAWorkflow: WorkflowParents in a task sent by
// itself says it is no workflow node.
func TestWorkflowParentsOutsideAWorkflow(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		res, err := e.server.SendTaskWithContext(e.ctx(), sig("parents"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.GetWithContext(e.ctx(), poll); err == nil || !strings.Contains(err.Error(), tasks.ErrNotWorkflowNode.Error()) {
			t.Fatalf("parents outside a workflow: %v, want %v", err, tasks.ErrNotWorkflowNode)
		}
	})
}

// TestWorkflowFailureCancelsUnsentNodes: the nodes a failure keeps from
// ever being sent get state FAILURE as cancelled, naming the node that
// failed, so that nobody waiting on them waits forever, and their OnError
// callbacks are sent, as a chord's callback's are when a member fails.
func TestWorkflowFailureCancelsUnsentNodes(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		never := sig("record", strArg("never"))
		never.Immutable = true
		never.OnError = []*tasks.Signature{sig("on_error", strArg("never"))}
		wf, err := tasks.NewChainOf(sig("fail", strArg("boom")), tasks.GroupOf(never, sig("record", strArg("never too"))))
		_, _, err = e.runWorkflow(wf, err)
		var we *result.WorkflowError
		if !errors.As(err, &we) || we.Node != "0" {
			t.Fatalf("workflow error %v, want one at node 0", err)
		}
		reason := fmt.Sprintf("%s: its workflow failed at node %q", tasks.CancelledMessage, "0")
		for _, n := range wf.Nodes()[1:] {
			_, err := result.NewAsyncResult(n.Signature, e.server.GetBackend()).GetWithContext(e.ctx(), poll)
			if !errors.Is(err, tasks.ErrTaskCancelled) || !strings.Contains(err.Error(), reason) {
				t.Fatalf("node %s: %v, want it cancelled: %s", n.Key, err, reason)
			}
		}
		waitFor(t, "the OnError callback of the node never sent", func() bool {
			return len(e.calls.times("on_error:never:"+reason)) == 1
		})
		if n := len(e.calls.times("never")) + len(e.calls.times("never too")); n != 0 {
			t.Fatalf("nodes after the failure ran %d times", n)
		}
	})
}

// TestWorkflowCancelOnFailure: with CancelOnFailure, a node that fails
// for good stops the nodes running: one holding until its context ends
// is cancelled, and waiting on it says so.
func TestWorkflowCancelOnFailure(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		server := processes(t, p, 1, func(c *config.Config) { c.NoUnixSignals = true })[0]
		started := make(chan struct{})
		if err := server.RegisterTasks(map[string]interface{}{
			"hold": func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				return ctx.Err()
			},
			"fail_after_hold": func(ctx context.Context) error {
				select {
				case <-started:
				case <-ctx.Done():
				}
				return errors.New("boom")
			},
		}); err != nil {
			t.Fatal(err)
		}
		launch(t, server.NewWorker("w", 4))
		ctx := testCtx(t)
		wf, err := tasks.NewGroupOf(&tasks.Signature{Name: "hold"}, &tasks.Signature{Name: "fail_after_hold"})
		if err != nil {
			t.Fatal(err)
		}
		wf.CancelOnFailure = true
		res, err := server.SendWorkflowWithContext(ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		var we *result.WorkflowError
		if _, err := res.GetWithContext(ctx, poll); !errors.As(err, &we) || we.Node != "1" {
			t.Fatalf("workflow error %v, want one at node 1", err)
		}
		held := result.NewAsyncResult(wf.Nodes()[0].Signature, server.GetBackend())
		if _, err := held.GetWithContext(ctx, poll); !errors.Is(err, tasks.ErrTaskCancelled) {
			t.Fatalf("the running node: %v, want it cancelled", err)
		}
	})
}

// TestWorkflowDeadline: a workflow's deadline is every node's context's;
// a node that starts after it fails for good, at once, and fails the
// workflow.
func TestWorkflowDeadline(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		wf, err := tasks.NewChainOf(sig("record", strArg("first")), immutableSig("deadline_at"))
		if err != nil {
			t.Fatal(err)
		}
		wf.Deadline = time.Now().Add(time.Hour).Truncate(time.Millisecond)
		got, _, err := e.runWorkflow(wf, nil)
		if want := wf.Deadline.UTC().Format(time.RFC3339Nano); err != nil || !reflect.DeepEqual(got, []interface{}{want}) {
			t.Fatalf("the last node's context's deadline: %v, %v; want %s", got, err, want)
		}

		late := sig("flaky") // would succeed on its third run: it must not be retried
		late.RetryCount = 5
		wf, err = tasks.NewChainOf(late, sig("record", strArg("never")))
		if err != nil {
			t.Fatal(err)
		}
		wf.Deadline = time.Now().Add(-time.Second)
		_, _, err = e.runWorkflow(wf, nil)
		var we *result.WorkflowError
		if !errors.As(err, &we) || we.Node != "0" || !strings.Contains(we.Message, "deadline") {
			t.Fatalf("workflow error %v, want one at node 0 about its deadline", err)
		}
		if n := len(e.calls.times("flaky")); n != 0 {
			t.Fatalf("a node past its deadline ran %d times", n)
		}
	})
}

func immutableSig(name string, args ...tasks.Arg) *tasks.Signature {
	s := sig(name, args...)
	s.Immutable = true
	return s
}

// TestWorkflowGetWakesAtTheEnd: on one Redis server and the embedded
// engine, waiting for a workflow wakes when it ends, not at the next
// poll: with a poll of an hour, the wait still ends, for a success and
// for a failure.
func TestWorkflowGetWakesAtTheEnd(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		if p.name == "cluster" {
			t.Skip("a Cluster has no notices: waits poll")
		}
		e := newEnv(t, p)
		for _, wf := range []func() (*tasks.Workflow, error){
			func() (*tasks.Workflow, error) {
				return tasks.NewChainOf(sig("add", int64Arg(1)), sig("add", int64Arg(2)))
			},
			func() (*tasks.Workflow, error) {
				return tasks.NewChainOf(sig("add", int64Arg(1)), sig("fail", strArg("boom")))
			},
		} {
			w, err := wf()
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.server.SendWorkflowWithContext(e.ctx(), w)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := res.GetWithContext(e.ctx(), time.Hour); errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the wait for workflow %s did not wake when it ended", w.ID)
			}
		}
	})
}

// TestWorkflowRunNextAtOnce: a node allowed to fail with RunNextAtOnce
// runs the join after it as soon as it fails: here the join's other dep
// holds until the join has run, so waiting for it would never end. The
// join runs once, without results from either dep, and the workflow
// succeeds when the held dep finishes.
func TestWorkflowRunNextAtOnce(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		server := processes(t, p, 1, func(c *config.Config) { c.NoUnixSignals = true })[0]
		joined := make(chan struct{})
		var joins atomic.Int32
		var joinArgs []int64
		if err := server.RegisterTasks(map[string]interface{}{
			"first": func() (int64, error) { return 1, nil },
			"fails": func() error { return errors.New("enrichment down") },
			"hold": func(ctx context.Context) (int64, error) {
				select {
				case <-joined:
					return 5, nil
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			},
			"join": func(args ...int64) (int64, error) {
				if joins.Add(1) == 1 {
					joinArgs = args
					close(joined)
				}
				return int64(len(args)), nil
			},
		}); err != nil {
			t.Fatal(err)
		}
		launch(t, server.NewWorker("w", 4))
		ctx := testCtx(t)
		wf, err := tasks.NewDAG("at-once").
			Add("a", &tasks.Signature{Name: "first"}).
			Add("b", tasks.AllowFailure(&tasks.Signature{Name: "fails", Immutable: true}, tasks.RunNextAtOnce), "a").
			Add("c", &tasks.Signature{Name: "hold", Immutable: true}, "a").
			Add("d", &tasks.Signature{Name: "join"}, "b", "c").
			Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := server.SendWorkflowWithContext(ctx, wf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.GetWithContext(ctx, poll); err != nil {
			t.Fatalf("workflow: %v", err)
		}
		st, err := res.Status(ctx)
		if err != nil || st.State != tasks.StateSuccess || st.Succeeded != 3 || st.Failed != 1 {
			t.Fatalf("status %+v, %v; want SUCCESS, 3 succeeded, 1 failed", st, err)
		}
		if n := joins.Load(); n != 1 || len(joinArgs) != 0 {
			t.Fatalf("the join ran %d times, first with %v; want once, with no results", n, joinArgs)
		}
	})
}
