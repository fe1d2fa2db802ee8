package tasks

import "time"

// The states a task moves through. PENDING is written when it is sent,
// STARTED by the worker that runs it (machinist's worker skips RECEIVED,
// which STARTED would replace at once), RETRY when it will run
// again, and SUCCESS or FAILURE when it is done for good.
const (
	StatePending  = "PENDING"
	StateReceived = "RECEIVED"
	StateStarted  = "STARTED"
	StateRetry    = "RETRY"
	StateSuccess  = "SUCCESS"
	StateFailure  = "FAILURE"
)

// TaskResult is one return value of a task: its Go type name and its value.
type TaskResult struct {
	Type  string      `bson:"type"`
	Value interface{} `bson:"value"`
}

// TaskState is what a result backend stores for a task.
type TaskState struct {
	TaskUUID  string        `bson:"_id"`
	TaskName  string        `bson:"task_name"`
	State     string        `bson:"state"`
	Results   []*TaskResult `bson:"results"`
	Error     string        `bson:"error"`
	CreatedAt time.Time     `bson:"created_at"`
	TTL       int64         `bson:"ttl,omitempty"`
	// Aggregate, on the PENDING state of an aggregation member, is the
	// UUID of the task it was aggregated into: the member's outcome is
	// that task's (result.AsyncResult follows it). machinist extension.
	Aggregate string `bson:"aggregate,omitempty"`
	// Trace, on the SUCCESS state of a chord member or a workflow node
	// written by a worker, names the span that ran it, as a W3C
	// traceparent, so that the chord's callback, or the nodes after it,
	// link to it; empty when it was not traced. machinist extension.
	Trace string `json:",omitempty" bson:"trace,omitempty"`
	// Workflow is the WorkflowUUID of the task's signature: the chain,
	// group or chord it was sent in. machinist extension.
	Workflow string `json:",omitempty" bson:"workflow,omitempty"`
	// Progress is the last progress the task reported (SetProgress): on
	// its final state, and, read with the task's queue known (the state
	// of a sent task's AsyncResult), while it runs. machinist extension.
	Progress *Progress `json:",omitempty" bson:"progress,omitempty"`
}

// Workflow kinds, WorkflowMeta's Kind.
const (
	WorkflowChain = "chain"
	WorkflowGroup = "group"
	WorkflowChord = "chord"
	// WorkflowGraph is a workflow built by NewChainOf, NewGroupOf,
	// NewChordOf or DAG.Build: its tasks are the nodes of its graph.
	WorkflowGraph = "graph"
)

// WorkflowMeta is what a result backend stores for a chain, group or chord
// (machinist extension): every task that belongs to it (a group's members
// through the group's own bookkeeping), so that it can be cancelled as a
// whole.
type WorkflowMeta struct {
	WorkflowUUID string         `bson:"_id"`
	Kind         string         `bson:"kind"` // WorkflowChain, WorkflowGroup, WorkflowChord or WorkflowGraph
	Tasks        []WorkflowTask `bson:"tasks"`
	CreatedAt    time.Time      `bson:"created_at"`
	// Members, for a group or a chord whose members share a queue, is how
	// many members it has: they are not in Tasks, but in the backend's
	// bookkeeping of the group WorkflowUUID (InitGroup), in Queue.
	Members int    `json:",omitempty" bson:"members,omitempty"`
	Queue   string `json:",omitempty" bson:"queue,omitempty"`
	// LastETA is the latest ETA among its tasks (zero: none has one): a
	// backend keeps the record for as long as it keeps a state
	// (ResultsExpireIn) after that, or after CreatedAt.
	LastETA time.Time `json:",omitempty" bson:"last_eta,omitempty"`
}

// Lifetime is how long a backend that keeps states for resultsExpireIn
// keeps wf from now: resultsExpireIn past its LastETA or, without one,
// from now.
func (wf *WorkflowMeta) Lifetime(resultsExpireIn time.Duration) time.Duration {
	return resultsExpireIn + max(0, time.Until(wf.LastETA))
}

// WorkflowTask is one task of a workflow: in a chain's order, or a group's
// members in group order (unless they share a queue: see
// WorkflowMeta.Members), then the tasks that follow them (their OnSuccess
// callbacks and a chord's callback, depth first).
type WorkflowTask struct {
	UUID           string `bson:"uuid"`
	Name           string `bson:"name"`
	Queue          string `bson:"queue"`
	GroupUUID      string `json:",omitempty" bson:"group_uuid,omitempty"`
	GroupTaskCount int    `json:",omitempty" bson:"group_task_count,omitempty"`
	// Follows is what sends the task: the UUID of the task whose
	// OnSuccess it is (a chain's previous step), or the WorkflowUUID for
	// a chord's callback; empty for a chain's first step and a group's
	// members. It draws the workflow's graph.
	Follows string `json:",omitempty" bson:"follows,omitempty"`
	// Node and Deps, in a WorkflowGraph, are the task's node key and the
	// keys of the nodes it waits for (WorkflowNode).
	Node string   `json:",omitempty" bson:"node,omitempty"`
	Deps []string `json:",omitempty" bson:"deps,omitempty"`
}

// Signature returns a signature of t that names it (UUID, name, queue,
// group and workflow), for writing its state.
func (t WorkflowTask) Signature(workflowUUID string) *Signature {
	return &Signature{UUID: t.UUID, Name: t.Name, RoutingKey: t.Queue,
		GroupUUID: t.GroupUUID, GroupTaskCount: t.GroupTaskCount, WorkflowUUID: workflowUUID, WorkflowNode: t.Node}
}

// NewWorkflowMeta returns the record of the workflow id of kind, whose
// tasks are roots (a chain's, or a group's members) and every task that
// follows them (OnSuccess callbacks and a chord's callback, depth first,
// each once), and marks each of those signatures with WorkflowUUID id. The
// members of a group or a chord that share a queue are not listed: the
// backend's group bookkeeping lists them (Members, Queue).
func NewWorkflowMeta(id, kind string, roots ...*Signature) *WorkflowMeta {
	wf := &WorkflowMeta{WorkflowUUID: id, Kind: kind, CreatedAt: time.Now().UTC()}
	seen := make(map[*Signature]bool)
	note := func(sig *Signature) {
		seen[sig] = true
		sig.WorkflowUUID = id
		if sig.ETA != nil && sig.ETA.After(wf.LastETA) {
			wf.LastETA = *sig.ETA
		}
	}
	var walk func(sig *Signature, depth int, follows string)
	walk = func(sig *Signature, depth int, follows string) {
		if sig == nil || seen[sig] || depth > 1000 {
			return
		}
		note(sig)
		wf.Tasks = append(wf.Tasks, workflowTask(sig, follows))
		for _, next := range sig.OnSuccess {
			walk(next, depth+1, sig.UUID)
		}
	}
	if kind == WorkflowChain || !shareQueue(roots) {
		for _, sig := range roots {
			walk(sig, 0, "")
		}
	} else {
		wf.Members, wf.Queue = len(roots), roots[0].RoutingKey
		for _, sig := range roots {
			note(sig)
		}
		for _, sig := range roots {
			for _, next := range sig.OnSuccess {
				walk(next, 1, sig.UUID)
			}
		}
	}
	// A chord's callback follows its members, once.
	for _, sig := range roots {
		if sig != nil {
			walk(sig.ChordCallback, 1, id)
		}
	}
	return wf
}

// NewGraphMeta returns the record of the workflow id of any shape
// (WorkflowGraph) whose graph is nodes (Workflow.Nodes): a task for each
// node, in order.
func NewGraphMeta(id string, nodes []WorkflowNode) *WorkflowMeta {
	meta := &WorkflowMeta{WorkflowUUID: id, Kind: WorkflowGraph, CreatedAt: time.Now().UTC(), Tasks: make([]WorkflowTask, len(nodes))}
	for i, n := range nodes {
		t := workflowTask(n.Signature, "")
		t.Node, t.Deps = n.Key, n.Deps
		meta.Tasks[i] = t
		if eta := n.Signature.ETA; eta != nil && eta.After(meta.LastETA) {
			meta.LastETA = *eta
		}
	}
	return meta
}

// WorkflowStatus is where a workflow of any shape (WorkflowGraph) stands.
type WorkflowStatus struct {
	WorkflowUUID string
	Name         string
	// State is StatePending until every node has succeeded (StateSuccess)
	// or one has failed for good or the workflow was cancelled
	// (StateFailure).
	State string
	// Nodes counts the workflow's nodes, Succeeded those that succeeded,
	// Failed those that failed for good and were allowed to
	// (AllowFailure).
	Nodes, Succeeded, Failed int
	// FailedNode is the key of the node whose failure failed the
	// workflow (empty when it was cancelled), Error why it failed.
	FailedNode string `json:",omitempty"`
	Error      string `json:",omitempty"`
	// Results are the results of the workflow's outputs
	// (Workflow.Outputs), one after the other, once it succeeded.
	Results []*TaskResult `json:",omitempty"`
}

func workflowTask(sig *Signature, follows string) WorkflowTask {
	return WorkflowTask{UUID: sig.UUID, Name: sig.Name, Queue: sig.RoutingKey,
		GroupUUID: sig.GroupUUID, GroupTaskCount: sig.GroupTaskCount, Follows: follows}
}

// shareQueue reports whether sigs are some, none nil, all of one queue.
func shareQueue(sigs []*Signature) bool {
	if len(sigs) == 0 || sigs[0] == nil {
		return false
	}
	for _, sig := range sigs[1:] {
		if sig == nil || sig.RoutingKey != sigs[0].RoutingKey {
			return false
		}
	}
	return true
}

// GroupMeta is what a result backend stores for a group.
type GroupMeta struct {
	GroupUUID      string    `bson:"_id"`
	TaskUUIDs      []string  `bson:"task_uuids"`
	ChordTriggered bool      `bson:"chord_triggered"`
	Lock           bool      `bson:"lock"`
	CreatedAt      time.Time `bson:"created_at"`
	TTL            int64     `bson:"ttl,omitempty"`
}

func newState(sig *Signature, state string) *TaskState {
	return &TaskState{
		TaskUUID:  sig.UUID,
		TaskName:  sig.Name,
		State:     state,
		CreatedAt: time.Now().UTC(),
		Workflow:  sig.WorkflowUUID,
	}
}

// NewPendingTaskState returns the PENDING state of sig.
func NewPendingTaskState(sig *Signature) *TaskState { return newState(sig, StatePending) }

// NewReceivedTaskState returns the RECEIVED state of sig.
func NewReceivedTaskState(sig *Signature) *TaskState { return newState(sig, StateReceived) }

// NewStartedTaskState returns the STARTED state of sig.
func NewStartedTaskState(sig *Signature) *TaskState { return newState(sig, StateStarted) }

// NewRetryTaskState returns the RETRY state of sig.
func NewRetryTaskState(sig *Signature) *TaskState { return newState(sig, StateRetry) }

// NewSuccessTaskState returns the SUCCESS state of sig with its results.
func NewSuccessTaskState(sig *Signature, results []*TaskResult) *TaskState {
	s := newState(sig, StateSuccess)
	s.Results = results
	return s
}

// NewAggregatedTaskState returns the state of sig, a member of the
// aggregate aggregateUUID: PENDING, pointing at it.
func NewAggregatedTaskState(sig *Signature, aggregateUUID string) *TaskState {
	s := newState(sig, StatePending)
	s.Aggregate = aggregateUUID
	return s
}

// NewFailureTaskState returns the FAILURE state of sig with its error.
func NewFailureTaskState(sig *Signature, err string) *TaskState {
	s := newState(sig, StateFailure)
	s.Error = err
	return s
}

// IsCompleted reports whether the task is done for good: SUCCESS or FAILURE.
func (s *TaskState) IsCompleted() bool {
	return s.IsSuccess() || s.IsFailure()
}

// IsSuccess reports whether the task succeeded.
func (s *TaskState) IsSuccess() bool {
	return s.State == StateSuccess
}

// IsFailure reports whether the task failed for good.
func (s *TaskState) IsFailure() bool {
	return s.State == StateFailure
}
