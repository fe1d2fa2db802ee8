package store

import (
	"context"

	"github.com/b6192125/machinist/v1/tasks"
)

// Workflows is a backend that records chains, groups and chords, so that
// one can be found, and cancelled as a whole, from its own UUID or that of
// any of its tasks (machinery's Server.CancelWorkflow). Both of
// machinist's backends implement it; the Server sends workflows without a
// record through a backend that does not.
type Workflows interface {
	// InitWorkflowContext records wf, for as long as the backend keeps a
	// state past the last ETA of its tasks (wf.Lifetime), and writes the PENDING states of pending
	// as SetStatePendingContext does (a chain's steps, a chord's
	// callback), in one step where it can. The PENDING state of a task
	// whose signature names a workflow (Signature.WorkflowUUID) names it
	// too (TaskState.Workflow), however it is written.
	InitWorkflowContext(ctx context.Context, wf *tasks.WorkflowMeta, pending ...*tasks.Signature) error
	// GetWorkflowContext returns the record of the workflow id names: its
	// WorkflowUUID, or the UUID of a task whose state names the workflow.
	// None: an error wrapping ErrWorkflowNotFound.
	GetWorkflowContext(ctx context.Context, id string) (*tasks.WorkflowMeta, error)
}

// Graph is a built workflow of any shape (tasks.Workflow) as the store
// sends it, its signatures ready to travel (UUID, RoutingKey).
type Graph struct {
	ID, Name string
	// Nodes are the workflow's graph (tasks.Workflow.Nodes).
	Nodes []tasks.WorkflowNode
	// Outputs are the keys of the nodes whose results are the
	// workflow's (tasks.Workflow.Outputs).
	Outputs []string
	// CancelOnFailure is tasks.Workflow.CancelOnFailure.
	CancelOnFailure bool
}

// GraphFailure is what Graphs.FailGraph did.
type GraphFailure struct {
	// Allowed says the node was allowed to fail: the workflow goes on,
	// and Ready are the nodes it made ready, to be sent.
	Allowed bool
	Ready   []*tasks.Signature
	// Failed says this call, or an earlier one for the same node, failed
	// the workflow (false: it was final already otherwise). Open are the nodes sent and not finished (but the node
	// that failed), each a signature that names its task (UUID,
	// RoutingKey, WorkflowUUID): the caller takes those still waiting out
	// of their queues, and, with CancelRunning
	// (tasks.Workflow.CancelOnFailure), cancels those running. Unsent are
	// the nodes never sent (UUID, Name, WorkflowUUID, WorkflowNode; the
	// whole signature when it has OnError callbacks): the caller writes
	// their FAILURE.
	Failed        bool
	CancelRunning bool
	Open, Unsent  []*tasks.Signature
}

// Graphs is a broker that runs workflows of any shape (tasks.Workflow):
// it keeps a workflow's graph and releases each node once every node it
// depends on has succeeded. Both of machinist's brokers implement it.
type Graphs interface {
	// RecordGraph writes g's graph, before its first nodes are sent.
	RecordGraph(ctx context.Context, g *Graph) error
	// WithdrawGraph deletes the graph of workflow id, which RecordGraph
	// wrote for a send that then failed having published nothing; it may
	// return before it is done, as WithdrawWorkflowContext does.
	WithdrawGraph(id string) error
	// NodeSucceeded records that sig, a node (Signature.WorkflowNode),
	// succeeded with results, and returns the nodes that follow it and
	// are ready to be sent, each with its deps' results appended to its
	// args unless it is Immutable. Each node's success is counted once,
	// so that a node with several deps is released once; called again
	// (the task finished again after a recovery), it returns every
	// successor that is ready, sent or not: the caller sends those not
	// sent before. A workflow that failed releases nothing. A graph that
	// is gone (it expired): an error wrapping ErrWorkflowNotFound.
	NodeSucceeded(ctx context.Context, sig *tasks.Signature, results []*tasks.TaskResult) ([]*tasks.Signature, error)
	// FailGraph records that node of workflow id failed for good with
	// reason, or, with node "", that the workflow was cancelled. A node
	// allowed to fail (tasks.AllowFailure) counts as finished without
	// results, and the nodes it makes ready are returned (Allowed, Ready)
	// as NodeSucceeded returns them. Anything else fails the workflow, and
	// no node is released after it; the call that failed it returns what
	// the caller must stop (see GraphFailure). A workflow final already is
	// left as it is. A graph that is gone: an error wrapping
	// ErrWorkflowNotFound.
	FailGraph(ctx context.Context, id, node, reason string) (*GraphFailure, error)
	// GraphStatus returns where workflow id stands, with its results once
	// it succeeded. None: an error wrapping ErrWorkflowNotFound.
	GraphStatus(ctx context.Context, id string) (*tasks.WorkflowStatus, error)
	// WatchGraph starts watching workflow id: from when it returns, the
	// channel receives when the workflow may have become final. As with
	// Notifier.WatchFinished, a notice may be lost, so a waiter still
	// polls; a nil channel means the broker cannot watch (a Cluster).
	WatchGraph(ctx context.Context, id string) (notices <-chan struct{}, stop func())
}

// StateSetter is a backend that writes a whole state, with the fields
// beyond machinery's (TaskState.Trace, which a workflow node's SUCCESS
// carries so that the nodes after it link to its run, and
// TaskState.Progress). Both of machinist's backends implement it; without
// it such a state is written by SetStateSuccessContext or
// SetStateFailureContext, without them.
type StateSetter interface {
	SetStateContext(ctx context.Context, sig *tasks.Signature, state *tasks.TaskState) error
}

// Withdrawer is a backend that takes back the PENDING states a send wrote
// when the send failed having published nothing (brokers/iface.ErrNotSent),
// so that no state reads as a task waiting to run that never will. Both of
// machinist's backends implement it. A withdrawal may return before it is
// done: it comes after the writes it takes back, even when those were
// still under way as the send gave up at its deadline (where the backend
// orders its writes: the Redis backend's go in order per task, or per
// workflow), and it leaves a state that something wrote since.
type Withdrawer interface {
	// WithdrawPendingContext deletes the PENDING states of sigs that
	// SetStatePendingContext wrote.
	WithdrawPendingContext(ctx context.Context, sigs ...*tasks.Signature) error
	// WithdrawWorkflowContext deletes the record of workflow id and the
	// PENDING states of pending that InitWorkflowContext wrote.
	WithdrawWorkflowContext(ctx context.Context, id string, pending ...*tasks.Signature) error
}

// QueueStateReader is a backend that reads a task's state sooner knowing
// the queue it was sent to: the Redis backend on a single server, where a
// task's PENDING state is implicit (its hash in its queue says it) and a
// read of a task with no state hash otherwise looks in every queue. The
// results (backends/result) use it when the backend has it.
type QueueStateReader interface {
	// GetStateInContext is GetStateContext, for a task sent to queue.
	GetStateInContext(ctx context.Context, queue, taskUUID string) (*tasks.TaskState, error)
}

// Notifier is a backend that tells a result's wait when its task
// finishes, so that Get returns then rather than at its next poll. Both of
// machinist's backends implement it (Redis on a single server; on a
// Cluster its waits only poll).
type Notifier interface {
	// WatchFinished starts watching task taskUUID: from when it returns,
	// the channel receives when the task's state may have become final,
	// or come to name the aggregate it joined (TaskState.Aggregate). A
	// notice says "read the state now", nothing more: it may come when
	// the state is not final yet, and one may be lost (a dropped
	// connection), so a waiter still polls. stop ends the watch. A nil
	// channel means the backend cannot watch now; stop is then a no-op.
	WatchFinished(ctx context.Context, taskUUID string) (notices <-chan struct{}, stop func())
}

// StateReader is what a task's result reads: its state, sooner knowing
// its queue, and a watch of its end.
type StateReader interface {
	GetStateContext(ctx context.Context, taskUUID string) (*tasks.TaskState, error)
	QueueStateReader
	Notifier
}
