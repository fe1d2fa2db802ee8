package machinery

import (
	"context"
	"errors"
	"fmt"

	"github.com/b6192125/machinist/internal/pair"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/telemetry"
	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/tasks"
)

// errNotBuilt is the error of sending a workflow that was only described.
var errNotBuilt = errors.New("machinist: send workflow: not built: build it with NewChainOf, NewGroupOf, NewChordOf or DAG.Build (ChainOf, GroupOf and ChordOf only describe a workflow to nest)")

// SendWorkflow sends a workflow of any shape; see SendWorkflowWithContext.
func (s *Server) SendWorkflow(wf *tasks.Workflow) (*result.WorkflowAsyncResult, error) {
	return s.SendWorkflowWithContext(context.Background(), wf)
}

// SendWorkflowWithContext sends wf, a workflow built by tasks.NewChainOf,
// NewGroupOf, NewChordOf or DAG.Build. Its graph is stored once, and its
// first nodes are sent; the broker sends every other node once each node
// it depends on has succeeded, with their results appended to its args
// unless it is Immutable (see tasks.WorkflowNode). A node that fails for
// good fails the workflow, unless it is allowed to (tasks.AllowFailure):
// no node is sent after that, the nodes never sent get state FAILURE as
// cancelled, and the nodes running finish (or are cancelled, with
// wf.CancelOnFailure). wf.Deadline is every node's. Every node's state is PENDING from the start and names
// the workflow, so that the workflow can be cancelled (CancelWorkflow) and
// its result read (GetWorkflowResult) from its ID or any node's UUID.
//
// The signatures in wf are not changed: the nodes are wf.Nodes(), with
// their queue (the DefaultQueue when empty) filled in. It returns when ctx
// ends, and its error says what became of the workflow as
// SendTaskWithContext's does; when it says ErrNotSent, what the send
// recorded is deleted.
func (s *Server) SendWorkflowWithContext(ctx context.Context, wf *tasks.Workflow) (_ *result.WorkflowAsyncResult, err error) {
	if s.invalid != nil {
		return nil, store.NotSent(s.invalid)
	}
	nodes := wf.Nodes()
	if len(nodes) == 0 {
		return nil, store.NotSent(errNotBuilt)
	}
	all := make([]*tasks.Signature, len(nodes))
	var first, rest []*tasks.Signature
	for i, n := range nodes {
		s.prepare(n.Signature)
		if !wf.Deadline.IsZero() {
			n.Signature.SetDeadline(wf.Deadline)
		}
		all[i] = n.Signature
		if len(n.Deps) == 0 {
			first = append(first, n.Signature)
		} else {
			rest = append(rest, n.Signature)
		}
	}
	// Every node carries the send's trace context: the whole graph is one
	// trace.
	ctx, span := s.tracing.StartSend(ctx, commonQueue(first), all,
		telemetry.WorkflowKey.String(tasks.WorkflowGraph), telemetry.WorkflowIDKey.String(wf.ID))
	defer func() { telemetry.Ended(span, err); span.End() }()
	// The nodes sent later are stored now, as the pre-publish handler
	// leaves them; the first ones go through it as they are sent.
	s.runPrePublish(rest...)
	st := s.store()
	withdraw := func() {
		st.WithdrawWorkflow(ctx, wf.ID, rest...) // the writes may still land
		_ = st.WithdrawGraph(wf.ID)
	}
	// The graph and the states come before the first nodes: a node that
	// ran at once finds its graph, and no PENDING replaces a final state.
	if err := st.InitWorkflowContext(ctx, tasks.NewGraphMeta(wf.ID, nodes), rest...); err != nil {
		withdraw()
		return nil, store.NotSent(fmt.Errorf("machinist: send workflow %s: record the workflow and set state pending: %w", wf.ID, err))
	}
	if err := st.RecordGraph(ctx, &store.Graph{ID: wf.ID, Name: wf.Name, Nodes: nodes, Outputs: wf.Outputs(), CancelOnFailure: wf.CancelOnFailure}); err != nil {
		withdraw()
		return nil, store.NotSent(fmt.Errorf("machinist: send workflow %s: %w", wf.ID, err))
	}
	if s.eager != nil {
		err = s.publish(ctx, first...)
	} else {
		err = s.send(ctx, "", first...)
	}
	if err != nil {
		if pair.Withdrawable(err) {
			withdraw()
		}
		return nil, fmt.Errorf("machinist: send workflow %s: %w", wf.ID, err)
	}
	return result.NewWorkflowAsyncResult(wf.ID, st), nil
}

// GetWorkflowResult returns the handle of the workflow of any shape that
// id names: its ID, or the UUID of one of its nodes. A workflow of
// another kind (SendChain, SendGroup, SendChord), or none: an error
// wrapping ErrWorkflowNotFound.
func (s *Server) GetWorkflowResult(ctx context.Context, id string) (*result.WorkflowAsyncResult, error) {
	st := s.store()
	meta, err := st.GetWorkflowContext(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("machinist: workflow result of %s: %w", id, err)
	}
	if meta.Kind != tasks.WorkflowGraph {
		return nil, fmt.Errorf("machinist: workflow result of %s: %s %s is not a workflow of any shape (SendWorkflow): %w",
			id, meta.Kind, meta.WorkflowUUID, store.ErrWorkflowNotFound)
	}
	return result.NewWorkflowAsyncResult(meta.WorkflowUUID, st), nil
}
