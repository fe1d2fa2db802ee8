package ops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Workflow is a chain, group or chord as a graph of its tasks, each with
// its state.
type Workflow struct {
	ID, Kind  string
	CreatedAt time.Time
	// State sums up its tasks': FAILURE when one failed, SUCCESS when all
	// succeeded, STARTED when some ran or run, else PENDING.
	State string
	// Counts holds how many of its tasks are in each state.
	Counts map[string]int
	// Root is where it starts: a chain's first step, or a group node
	// (a group's, or a chord's, whose Next is the callback).
	Root *Node `json:",omitempty"`
	// Unread counts the tasks whose state was not read (beyond the first
	// maxStateReads not known to have finished): their State is "".
	Unread int `json:",omitempty"`
	// Graph is set, and Root nil, for a workflow of any shape
	// (SendWorkflowWithContext).
	Graph *Graph `json:",omitempty"`
}

// Graph is a workflow of any shape: where it stands, and a page of its
// nodes.
type Graph struct {
	Name string `json:",omitempty"`
	// Nodes counts its nodes, Succeeded those that succeeded, Failed those
	// that failed and were allowed to.
	Nodes, Succeeded, Failed int
	// FailedNode is the node whose failure failed it, Error why it failed
	// ("" while it has not).
	FailedNode string `json:",omitempty"`
	Error      string `json:",omitempty"`
	// Offset is the place of Page[0] among the nodes, which are ordered by
	// level, then as the workflow was written.
	Offset int
	Page   []*GraphNode
}

// GraphNode is a node of a workflow of any shape, with its task's state.
type GraphNode struct {
	Key   string
	UUID  string
	Name  string
	Queue string `json:",omitempty"`
	// State is its task's state, "" when the backend has none any more.
	State string
	Error string `json:",omitempty"`
	// Deps are the keys of the nodes it runs after.
	Deps []string `json:",omitempty"`
	// Level is the length of the longest path to it from a first node: 0
	// for a first node, and one more than its deepest dep's.
	Level int
}

// GraphPage is how many nodes of a workflow of any shape Workflow reads
// when given no limit, and the most it reads.
const GraphPage = 200

// maxStateReads bounds the state reads of one Workflow call: a chord of
// 100,000 members still running costs at most that many reads (members
// that finished are read at once from the group's bookkeeping).
const maxStateReads = 1000

// Node is a task of a workflow, or the group of a group or chord.
type Node struct {
	// Group: the node is a group, whose Members run at once; else a task.
	Group bool `json:",omitempty"`
	// UUID is the task's UUID, or the group's.
	UUID  string
	Name  string `json:",omitempty"`
	Queue string `json:",omitempty"`
	// State is the task's state, "" when the backend has none any more
	// (expired); a group's sums up its members' as Workflow.State does.
	State string
	// Error is the error of a task that failed.
	Error   string  `json:",omitempty"`
	Members []*Node `json:",omitempty"`
	// Next are the tasks sent when this one succeeds (a chain's next
	// step, its OnSuccess callbacks; after a group, a chord's callback).
	Next []*Node `json:",omitempty"`
}

// Workflow returns the workflow id names (its own ID or any of its
// tasks' UUIDs), with every task's state: an error wrapping the backend's
// ErrWorkflowNotFound when there is none. Of a workflow of any shape, it
// reads limit nodes from offset (GraphPage when limit is 0, and at most
// that); the others ignore offset and limit.
func (o *Ops) Workflow(ctx context.Context, id string, offset, limit int) (*Workflow, error) {
	if id == "" {
		return nil, fmt.Errorf("no workflow ID given: %w", store.ErrWorkflowNotFound)
	}
	meta, err := o.st.GetWorkflowContext(ctx, id)
	if err != nil {
		return nil, err
	}
	wf := &Workflow{ID: meta.WorkflowUUID, Kind: meta.Kind, CreatedAt: meta.CreatedAt, Counts: map[string]int{}}
	if meta.Kind == tasks.WorkflowGraph {
		return o.graph(ctx, wf, meta, offset, limit)
	}

	nodes := map[string]*Node{}
	var order []*Node // the tasks, as recorded
	for _, t := range meta.Tasks {
		n := &Node{UUID: t.UUID, Name: t.Name, Queue: t.Queue}
		nodes[t.UUID] = n
		order = append(order, n)
	}
	// The group is not in nodes: a task whose UUID were the group's would
	// otherwise make it a member of itself.
	var group *Node
	if meta.Kind != tasks.WorkflowChain {
		group = &Node{Group: true, UUID: meta.WorkflowUUID}
		wf.Root = group
	}
	sender := func(follows string) *Node {
		if group != nil && follows == meta.WorkflowUUID {
			return group
		}
		return nodes[follows]
	}
	if meta.Members > 0 {
		// Members sharing a queue are in the group's bookkeeping.
		states, err := o.st.GroupTaskStatesContext(ctx, meta.WorkflowUUID, meta.Members)
		if err != nil && !errors.Is(err, store.ErrGroupNotFound) {
			return nil, err
		}
		for _, st := range states {
			n := &Node{UUID: st.TaskUUID, Name: st.TaskName, Queue: meta.Queue}
			if st.IsCompleted() {
				n.State, n.Error = st.State, st.Error
			}
			group.Members = append(group.Members, n)
			nodes[n.UUID] = n
			order = append(order, n)
		}
	}
	follows := false
	for _, t := range meta.Tasks {
		follows = follows || t.Follows != ""
	}
	for i, t := range meta.Tasks {
		n := nodes[t.UUID]
		parent := sender(t.Follows)
		if parent == nil && t.Follows != "" {
			// What sends it is not in the record: a member of a group
			// whose bookkeeping was purged or expired. It is drawn, with
			// what its state says.
			parent = &Node{UUID: t.Follows}
			nodes[t.Follows] = parent
			order = append(order, parent)
			if group != nil {
				group.Members = append(group.Members, parent)
			} else if wf.Root == nil {
				wf.Root = parent
			}
		}
		switch {
		case !follows && meta.Kind == tasks.WorkflowChain && i > 0:
			// A record without Follows (written before it existed): a
			// chain's steps follow each other.
			parent = nodes[meta.Tasks[i-1].UUID]
		case !follows && group != nil && t.GroupUUID != meta.WorkflowUUID:
			parent = group // a chord's callback
		}
		switch {
		case parent == n:
			// A record that says a task sends itself is not drawn as a
			// loop (renderers also never draw a node twice).
		case parent != nil:
			parent.Next = append(parent.Next, n)
		case group != nil:
			group.Members = append(group.Members, n)
		case wf.Root == nil:
			wf.Root = n
		default:
			wf.Root.Next = append(wf.Root.Next, n) // not expected: shown rather than lost
		}
	}
	if wf.Root == nil {
		return nil, fmt.Errorf("workflow %s: its record lists no task: %w", id, store.ErrWorkflowNotFound)
	}

	// The states of the tasks whose final state is not known yet, one
	// read each: at most maxStateReads of them.
	var unknown []*Node
	for _, n := range order {
		if n.State == "" {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > maxStateReads {
		wf.Unread = len(unknown) - maxStateReads
		unknown = unknown[:maxStateReads]
	}
	err = o.readStates(ctx, len(unknown), func(i int) string { return unknown[i].UUID }, func(i int, st *tasks.TaskState) {
		n := unknown[i]
		n.State, n.Error = st.State, st.Error
		if n.Name == "" {
			n.Name = st.TaskName
		}
	})
	if err != nil {
		return nil, err
	}
	var states []string
	for _, n := range order {
		wf.Counts[n.State]++
		states = append(states, n.State)
	}
	wf.State = sumUp(states)
	if group != nil {
		var ms []string
		for _, m := range group.Members {
			ms = append(ms, m.State)
		}
		group.State = sumUp(ms)
	}
	return wf, nil
}

// graph fills in wf, the workflow of any shape meta records, with a page
// of limit nodes from offset.
func (o *Ops) graph(ctx context.Context, wf *Workflow, meta *tasks.WorkflowMeta, offset, limit int) (*Workflow, error) {
	if offset < 0 || limit < 0 {
		return nil, fmt.Errorf("workflow %s: a page from %d of %d nodes (want both at least 0)", wf.ID, offset, limit)
	}
	if limit == 0 || limit > GraphPage {
		limit = GraphPage
	}
	g := &Graph{Nodes: len(meta.Tasks), Offset: offset}
	wf.Graph = g
	// The record lists the nodes so that each comes after its deps.
	level := make(map[string]int, len(meta.Tasks))
	nodes := make([]*GraphNode, len(meta.Tasks))
	for i, t := range meta.Tasks {
		n := &GraphNode{Key: t.Node, UUID: t.UUID, Name: t.Name, Queue: t.Queue, Deps: t.Deps}
		for _, d := range t.Deps {
			n.Level = max(n.Level, level[d]+1)
		}
		level[t.Node] = n.Level
		nodes[i] = n
	}
	slices.SortStableFunc(nodes, func(a, b *GraphNode) int { return a.Level - b.Level })
	if offset < len(nodes) {
		g.Page = nodes[offset:min(offset+limit, len(nodes))]
	}
	err := o.readStates(ctx, len(g.Page), func(i int) string { return g.Page[i].UUID }, func(i int, st *tasks.TaskState) {
		g.Page[i].State, g.Page[i].Error = st.State, st.Error
	})
	if err != nil {
		return nil, err
	}
	for _, n := range g.Page {
		wf.Counts[n.State]++
	}
	st, err := o.st.GraphStatus(ctx, wf.ID)
	switch {
	case errors.Is(err, store.ErrWorkflowNotFound):
		// The graph expired before the states: what the page says.
		var states []string
		for _, n := range g.Page {
			states = append(states, n.State)
		}
		wf.State = sumUp(states)
		return wf, nil
	case err != nil:
		return nil, err
	}
	g.Name, g.Succeeded, g.Failed, g.FailedNode, g.Error = st.Name, st.Succeeded, st.Failed, st.FailedNode, st.Error
	wf.State = st.State
	if st.State == tasks.StatePending && (st.Succeeded+st.Failed > 0 || wf.Counts[tasks.StateStarted] > 0) {
		wf.State = tasks.StateStarted
	}
	return wf, nil
}

// readStates reads the states of n tasks, all at once (see each), the
// task uuid(i) giving its state to found(i, state); a state the backend
// has none of is left out.
func (o *Ops) readStates(ctx context.Context, n int, uuid func(int) string, found func(int, *tasks.TaskState)) error {
	return each(ctx, n, func(ctx context.Context, i int) error {
		st, err := o.st.GetStateContext(ctx, uuid(i))
		switch {
		case errors.Is(err, store.ErrStateNotFound):
			return nil
		case err != nil:
			return err
		}
		found(i, st)
		return nil
	})
}

// sumUp is the state of a set of tasks in states: FAILURE when one
// failed, SUCCESS when all succeeded, STARTED when one has begun or
// finished, else PENDING.
func sumUp(states []string) string {
	sum := tasks.StatePending
	all := len(states) > 0
	for _, s := range states {
		switch s {
		case tasks.StateFailure:
			return tasks.StateFailure
		case tasks.StateSuccess, tasks.StateStarted, tasks.StateReceived, tasks.StateRetry:
			sum = tasks.StateStarted
		}
		all = all && s == tasks.StateSuccess
	}
	if all {
		return tasks.StateSuccess
	}
	return sum
}
