package integration_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/tasks"
)

// runWorkflow sends wf and waits for its result.
func (e *env) runWorkflow(wf *tasks.Workflow, err error) ([]interface{}, *result.WorkflowAsyncResult, error) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("build: %v", err)
	}
	ctx := e.ctx()
	res, err := e.server.SendWorkflowWithContext(ctx, wf)
	if err != nil {
		e.t.Fatalf("SendWorkflow: %v", err)
	}
	out, err := res.GetWithContext(ctx, poll)
	return values(out), res, err
}

// TestWorkflowNestedPassesResults: a chain whose second step is a group
// and whose third is a chord whose callback is a chain; each step gets
// the results of what it follows, in order.
func TestWorkflowNestedPassesResults(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		got, res, err := e.runWorkflow(tasks.NewChainOf(
			sig("add", int64Arg(1), int64Arg(1)),                                  // 2
			tasks.GroupOf(sig("add", int64Arg(10)), sig("multiply", int64Arg(3))), // 12, 6
			tasks.ChordOf(
				tasks.GroupOf(sig("add"), sig("multiply", int64Arg(2))),                 // 18, 144
				tasks.ChainOf(sig("add", int64Arg(1000)), sig("multiply", int64Arg(2))), // 1162, 2324
			),
		))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []interface{}{int64(2324)}) {
			t.Fatalf("workflow result %v, want [2324]", got)
		}
		st, err := res.Status(e.ctx())
		if err != nil || st.State != tasks.StateSuccess || st.Nodes != 7 || st.Succeeded != 7 {
			t.Fatalf("status %+v, %v; want SUCCESS with 7 of 7 nodes", st, err)
		}
	})
}

// TestWorkflowDAGJoinGetsDepsInOrder: a diamond; the join gets its deps'
// results in the order they were given, not the order they finished.
func TestWorkflowDAGJoinGetsDepsInOrder(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		join := sig("concat_all")
		got, _, err := e.runWorkflow(tasks.NewDAG("diamond").
			Add("a", sig("record", strArg("a"))).
			Add("b", sig("suffix", strArg("-b")), "a").
			Add("c", sig("suffix", strArg("-c")), "a").
			Add("d", join, "c", "b").
			Build())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []interface{}{"-ca|-ba"}) {
			t.Fatalf("join result %v, want [-ca|-ba]", got)
		}
	})
}

// TestWorkflowGroupResultsInOrder: a workflow that ends in a group has
// the members' results, in group order.
func TestWorkflowGroupResultsInOrder(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		got, _, err := e.runWorkflow(tasks.NewGroupOf(
			sig("add", int64Arg(1)), sig("add", int64Arg(2)), sig("add", int64Arg(3))))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, []interface{}{int64(1), int64(2), int64(3)}) {
			t.Fatalf("group result %v, want [1 2 3]", got)
		}
	})
}

// TestWorkflowFailureStopsWhatFollows: a node that fails for good fails
// the workflow, naming the node, and nothing after it runs.
func TestWorkflowFailureStopsWhatFollows(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		immutable := func(s *tasks.Signature) *tasks.Signature { s.Immutable = true; return s }
		wf, err := tasks.NewChainOf(
			sig("add", int64Arg(1)),
			tasks.GroupOf(immutable(sig("fail", strArg("member fails"))), immutable(sig("record", strArg("sibling")))),
			immutable(sig("record", strArg("never"))),
		)
		_, res, err := e.runWorkflow(wf, err)
		var we *result.WorkflowError
		if !errors.As(err, &we) || we.Node != "1.0" || we.Message != "member fails" || we.WorkflowUUID != res.WorkflowUUID {
			t.Fatalf("workflow error %v, want a *WorkflowError at node 1.0: member fails", err)
		}
		// The sibling ran, or, still waiting in its queue when its
		// member failed, was taken out: it ends either way.
		sibling := result.NewAsyncResult(wf.Nodes()[2].Signature, e.server.GetBackend())
		_, err = sibling.GetWithContext(e.ctx(), poll)
		switch ran := len(e.calls.times("sibling")); {
		case err == nil && ran == 1:
		case errors.Is(err, tasks.ErrTaskCancelled) && ran == 0:
		default:
			t.Fatalf("the sibling ran %d times and ended with %v; want once and success, or never and cancelled", ran, err)
		}
		if n := len(e.calls.times("never")); n != 0 {
			t.Fatalf("the step after the failed group ran %d times", n)
		}
	})
}

// TestWorkflowResultFromAnyID: the handle is rebuilt from the workflow's
// ID or any node's UUID.
func TestWorkflowResultFromAnyID(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		e := newEnv(t, p)
		wf, err := tasks.NewChainOf(sig("add", int64Arg(2)), sig("multiply", int64Arg(5)))
		got, _, err := e.runWorkflow(wf, err)
		if err != nil || !reflect.DeepEqual(got, []interface{}{int64(10)}) {
			t.Fatalf("workflow result %v, %v; want [10]", got, err)
		}
		for _, id := range []string{wf.ID, wf.Nodes()[0].Signature.UUID, wf.Nodes()[1].Signature.UUID} {
			res, err := e.server.GetWorkflowResult(e.ctx(), id)
			if err != nil {
				t.Fatalf("GetWorkflowResult(%s): %v", id, err)
			}
			out, err := res.GetWithContext(e.ctx(), poll)
			if err != nil || !reflect.DeepEqual(values(out), []interface{}{int64(10)}) {
				t.Fatalf("GetWorkflowResult(%s): %v, %v; want [10]", id, values(out), err)
			}
		}
	})
}

// TestWorkflowFailureTakesOutWaitingNodes: when a node fails for good, a
// node that was sent and still waits in its queue (here one no worker
// consumes) is taken out of it: archived, its state FAILURE as
// cancelled, naming the node that failed.
func TestWorkflowFailureTakesOutWaitingNodes(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		if p.eager {
			t.Skip("eager mode runs every node as it is sent")
		}
		e := newEnv(t, p)
		waiting := sig("record", strArg("never"))
		waiting.RoutingKey = "graph_nobody_consumes"
		wf, err := tasks.NewGroupOf(sig("fail", strArg("boom")), waiting)
		_, _, err = e.runWorkflow(wf, err)
		var we *result.WorkflowError
		if !errors.As(err, &we) || we.Node != "0" {
			t.Fatalf("workflow error %v, want one at node 0", err)
		}
		res := result.NewAsyncResult(wf.Nodes()[1].Signature, e.server.GetBackend())
		_, err = res.GetWithContext(e.ctx(), poll)
		if !errors.Is(err, tasks.ErrTaskCancelled) || !strings.Contains(err.Error(), `failed at node "0"`) {
			t.Fatalf("the waiting node's result: %v, want it cancelled, naming node 0", err)
		}
	})
}
