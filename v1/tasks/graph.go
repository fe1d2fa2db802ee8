package tasks

import (
	"container/heap"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Limits on the size of a workflow, checked when it is built.
const (
	// MaxWorkflowNodes is the most signatures a workflow can hold.
	MaxWorkflowNodes = 10000
	// MaxWorkflowDeps is the most dependencies (WorkflowNode.Deps, all
	// nodes together) a workflow can have. A chain from a group of n to a
	// group of m makes n×m of them: put a signature between the two groups
	// (a chord callback) to need only n+m.
	MaxWorkflowDeps = 100000
	// MaxWorkflowDepth is how deep workflows can nest: ChainOf(a, b) is 1
	// deep, ChainOf(a, GroupOf(b, c)) is 2.
	MaxWorkflowDepth = 32
)

// Node is a step of a workflow: a *Signature, or a *Workflow nested in
// another one (ChainOf, GroupOf, ChordOf, or a built workflow). Building
// refuses any other type, even one that embeds either.
type Node interface {
	workflowNode()
}

func (*Signature) workflowNode()    {}
func (*Workflow) workflowNode()     {}
func (*allowFailure) workflowNode() {}

// allowFailure is a node whose signatures may fail (AllowFailure).
type allowFailure struct {
	node   Node
	atOnce bool
}

// FailureOption changes what AllowFailure does.
type FailureOption uint8

// RunNextAtOnce makes the nodes that follow a node allowed to fail run as
// soon as it fails, without waiting for their other deps: they get the
// results of the deps that had succeeded by then, and a dep that
// finishes later adds nothing to them and does not run them again.
const RunNextAtOnce FailureOption = 1

// AllowFailure marks every signature of node as allowed to fail: one that
// fails for good does not fail the workflow. It counts as finished, and
// what follows it runs once its other deps have finished (at once, with
// RunNextAtOnce), without its results (a parent that failed adds nothing
// to the args); the failure is in its task's state, which the nodes that
// follow can read with WorkflowParents. A workflow whose every node
// finished succeeds, even when some of them failed this way
// (WorkflowStatus.Failed counts them). The keys of node's signatures are
// those they would have without it.
func AllowFailure(node Node, opts ...FailureOption) Node {
	return &allowFailure{node: node, atOnce: slices.Contains(opts, RunNextAtOnce)}
}

// Workflow is a workflow of any shape: chains, groups and chords nested in
// each other, and DAGs. ChainOf, GroupOf and ChordOf describe one, to be
// nested in another; NewChainOf, NewGroupOf, NewChordOf and DAG.Build
// build one: they check it and compile it into a graph of signatures,
// which Nodes and Outputs return. Describing and nesting do not check
// anything: the build of the outermost workflow checks everything, and its
// errors name the place (the key, see WorkflowNode) where they are.
//
// A workflow nested in another is compiled again as part of it, from what
// was given to its constructor: its own ID and graph, if it was built, are
// not used, and each build makes new copies of the signatures, with new
// UUIDs where they had none. Nesting a DAG takes building it first. A
// built workflow can be read from several goroutines.
type Workflow struct {
	// ID is the workflow's "workflow_" UUID, set when it is built: every
	// signature of its graph has it as WorkflowUUID. Empty on a workflow
	// that was only described (ChainOf, GroupOf, ChordOf).
	ID string
	// Name is the name given to NewDAG (empty for the others), for people
	// reading logs; it need not be unique.
	Name string
	// CancelOnFailure, set on the workflow sent, also cancels the nodes
	// running when a node fails for good (as CancelTask does: their
	// contexts are cancelled, and they cannot succeed). Without it they
	// finish, and nothing follows them.
	CancelOnFailure bool
	// Deadline, set on the workflow sent, is every node's deadline
	// (Signature.SetDeadline): each node's context ends then, and a node
	// that starts after it fails for good, which fails the workflow
	// unless the node may fail. Zero: none.
	Deadline time.Time

	kind    workflowKind
	members []Node    // a chain's or group's; a chord's group and callback
	dag     []dagNode // a DAG's, in the order they were added

	nodes   []WorkflowNode // topologically sorted, once built
	outputs []int          // indexes into nodes
}

// WorkflowNode is one signature in the graph of a built workflow.
type WorkflowNode struct {
	// Key names the node in its workflow. It is built from where the node
	// sits, so the same description gives the same keys:
	//
	//   - A member of a chain or group is its position from 0: "0", "1".
	//   - A member of a nested workflow adds its position after a dot:
	//     "1.2" is the third member of the group that is the chain's
	//     second step.
	//   - A chord is numbered as its group, when that is a group (GroupOf,
	//     NewGroupOf): "2.0" and "2.1" are the group's members; its
	//     callback is "cb" ("2.cb", or "2.cb.0" for the first step of a
	//     callback that is a chain). A chord whose group is a signature or
	//     another workflow numbers it as "0" ("2.0").
	//   - A node of a DAG is its id ("extract"); a member of a workflow
	//     that is a DAG node adds its position after a slash ("load/0",
	//     "load/1.2"). A DAG nested in a chain adds its ids after a dot
	//     ("1.extract").
	//
	// Keys are unique in their workflow. They use the characters of DAG
	// ids and "/", and are at most about (64+1)·MaxWorkflowDepth long.
	Key string
	// Signature is a copy of the signature given, with a "task_" UUID if
	// it had none and WorkflowUUID set to the workflow's ID.
	Signature *Signature
	// Deps are the keys of the nodes that must succeed before this one
	// runs, in the order their results are appended to its args (unless it
	// is Immutable): a chain step after a group gets the group's results
	// in group order; a DAG node gets those of each of its deps in the
	// order the deps were given to Add. Empty for the workflow's first
	// nodes.
	Deps []string
	// AllowFailure says that the node's failure does not fail the
	// workflow, and RunNextAtOnce that the nodes after it run as soon as
	// it fails (see AllowFailure).
	AllowFailure  bool `json:",omitempty"`
	RunNextAtOnce bool `json:",omitempty"`
}

type workflowKind uint8

const (
	kindNone workflowKind = iota // a Workflow{} not made by a constructor
	kindChain
	kindGroup
	kindChord
	kindDAG
)

type dagNode struct {
	id   string
	node Node
	deps []string
}

// ChainOf describes a chain, to be nested in another workflow: each node
// runs after the one before it succeeded, with that one's results appended
// to its args unless it is Immutable. The results of a workflow are those
// of its outputs (see Workflow.Outputs), and each first node of a workflow
// gets them. Use NewChainOf for a chain that is the outermost workflow.
func ChainOf(nodes ...Node) *Workflow {
	return &Workflow{kind: kindChain, members: slices.Clone(nodes)}
}

// GroupOf describes a group, to be nested in another workflow: its nodes
// run in parallel, and what follows the group gets their results in group
// order. Use NewGroupOf for a group that is the outermost workflow.
func GroupOf(nodes ...Node) *Workflow {
	return &Workflow{kind: kindGroup, members: slices.Clone(nodes)}
}

// ChordOf describes a chord, to be nested in another workflow: callback
// runs once group has succeeded, with the results of group's outputs in
// group order. It is ChainOf(group, callback) but for its keys (see
// WorkflowNode.Key). group is usually a GroupOf, callback a signature, but
// either can be any node. Use NewChordOf for a chord that is the outermost
// workflow.
func ChordOf(group, callback Node) *Workflow {
	return &Workflow{kind: kindChord, members: []Node{group, callback}}
}

// NewChainOf builds the chain of nodes (see ChainOf). The signatures given
// are copied, not changed. Nest workflows in it with ChainOf, GroupOf,
// ChordOf, or built ones:
//
//	wf, err := tasks.NewChainOf(fetch, tasks.GroupOf(resizeA, resizeB), store)
func NewChainOf(nodes ...Node) (*Workflow, error) {
	return ChainOf(nodes...).build()
}

// NewGroupOf builds the group of nodes (see GroupOf). The signatures given
// are copied, not changed.
func NewGroupOf(nodes ...Node) (*Workflow, error) {
	return GroupOf(nodes...).build()
}

// NewChordOf builds the chord of group and callback (see ChordOf). The
// signatures given are copied, not changed.
func NewChordOf(group, callback Node) (*Workflow, error) {
	return ChordOf(group, callback).build()
}

// DAG builds a workflow from nodes and the dependencies between them, for
// shapes chains and groups cannot express: a diamond, a node that several
// others need. Make one with NewDAG, Add its nodes, then Build it. Add
// checks nothing; Build reports every mistake.
type DAG struct {
	name  string
	nodes []dagNode
}

// NewDAG returns an empty DAG; name becomes the built workflow's Name.
func NewDAG(name string) *DAG {
	return &DAG{name: name}
}

// Add adds node under id, to run once every node of deps has succeeded;
// deps may name nodes added later. node's first nodes get the results of
// the deps' outputs, dep after dep in the order given. id is 1 to 64 of
// A-Z, a-z, 0-9, '_', '.' and '-', unique in the DAG. Add returns d, so
// that calls can be chained.
func (d *DAG) Add(id string, node Node, deps ...string) *DAG {
	d.nodes = append(d.nodes, dagNode{id: id, node: node, deps: slices.Clone(deps)})
	return d
}

// Build checks and compiles the DAG. Its first nodes are those added
// without deps; its outputs are those of its sinks (the nodes no other
// one depends on), in the order they were added. Nodes added to d later
// do not change the workflow returned, and d can be built again, into a
// workflow with another ID.
func (d *DAG) Build() (*Workflow, error) {
	return d.workflow().build()
}

func (d *DAG) workflow() *Workflow {
	return &Workflow{Name: d.name, kind: kindDAG, dag: slices.Clone(d.nodes)}
}

// Nodes returns the built workflow's graph, ordered so that every node
// comes after its deps and otherwise in the order the workflow was
// written: a chain's steps in order, a group's members in order, a DAG's
// nodes in the order they were added unless one has to wait for a dep
// added after it. The nodes are copies: changing them does not change the
// workflow. Nil if the workflow was not built.
func (w *Workflow) Nodes() []WorkflowNode {
	if w == nil || w.nodes == nil {
		return nil
	}
	out := make([]WorkflowNode, len(w.nodes))
	for i, n := range w.nodes {
		out[i] = WorkflowNode{Key: n.Key, Signature: CopySignature(n.Signature), Deps: slices.Clone(n.Deps),
			AllowFailure: n.AllowFailure, RunNextAtOnce: n.RunNextAtOnce}
	}
	return out
}

// Outputs returns the keys of the nodes whose results are the workflow's
// results, in order: those of a chain's last step, those of a group's
// members in group order, those of a chord's callback, those of a DAG's
// sinks in the order they were added. They are what a workflow that
// follows this one, when nested, gets. Nil if the workflow was not built.
func (w *Workflow) Outputs() []string {
	if w == nil || w.outputs == nil {
		return nil
	}
	out := make([]string, len(w.outputs))
	for i, o := range w.outputs {
		out[i] = w.nodes[o].Key
	}
	return out
}

// errAt says where in the workflow err is: key "" is the outermost
// workflow (or the group of a chord that is the outermost workflow).
func errAt(key string, err error) error {
	if key == "" {
		return fmt.Errorf("workflow: %w", err)
	}
	return fmt.Errorf("workflow at %q: %w", key, err)
}

// build checks w in two passes and, if it is sound, compiles it into w.
// The first pass looks only at its shape (nil, reused or empty nodes, DAG
// ids and deps, sizes), so that the second, which copies signatures, runs
// only on a graph known to be of a bounded size.
func (w *Workflow) build() (*Workflow, error) {
	s := shaper{seen: make(map[Node]string), plans: make(map[*Workflow]*dagPlan)}
	if _, err := s.walk(w, "", "", 1); err != nil {
		return nil, err
	}
	if s.nodes > MaxWorkflowNodes {
		return nil, errAt("", fmt.Errorf("%w: %d nodes, more than MaxWorkflowNodes (%d)", ErrWorkflowTooLarge, s.nodes, MaxWorkflowNodes))
	}
	if s.deps > MaxWorkflowDeps {
		return nil, errAt("", fmt.Errorf("%w: %d dependencies, more than MaxWorkflowDeps (%d)", ErrWorkflowTooLarge, s.deps, MaxWorkflowDeps))
	}
	c := compiler{
		id:    "workflow_" + uuid.NewString(),
		nodes: make([]WorkflowNode, 0, s.nodes),
		uuids: make(map[string]string, s.nodes),
		plans: s.plans,
	}
	p, err := c.compile(w, "", "")
	if err != nil {
		return nil, err
	}
	// As in a chain, only a first node can be unique, and only when it is
	// the only one: the workflow is refused as a whole when its key is
	// held, before any other node is sent.
	for i, n := range c.nodes {
		if n.Signature.UniqueFor > 0 && (len(p.in) != 1 || p.in[0] != i) {
			return nil, errAt(n.Key, fmt.Errorf("%w (%q): in a workflow, only a first node that is its only first node can be unique", ErrUniqueInWorkflow, n.Signature.Name))
		}
	}
	index := make(map[string]int, len(c.nodes))
	for i, n := range c.nodes {
		index[n.Key] = i
		if len(n.Deps) > 0 {
			parents := make([]WorkflowParent, len(n.Deps))
			for j, d := range n.Deps {
				parents[j] = WorkflowParent{Key: d, UUID: c.nodes[index[d]].Signature.UUID}
			}
			n.Signature.WorkflowParents = parents
		}
	}
	w.ID, w.nodes, w.outputs = c.id, c.nodes, p.out
	return w, nil
}

// shaper is the first pass of build.
type shaper struct {
	seen  map[Node]string // where each *Signature and *Workflow was met
	nodes int
	deps  int
	plans map[*Workflow]*dagPlan
}

// span is how many first nodes (in) and outputs (out) a node has.
type span struct{ in, out int }

// dagPlan is what the first pass learns about a DAG for the second.
type dagPlan struct {
	order []int   // a topological order of its nodes
	deps  [][]int // each node's deps, as indexes
	sink  []bool
}

// walk checks the shape of n at key, whose members' keys start with
// prefix, depth workflows deep.
func (s *shaper) walk(n Node, key, prefix string, depth int) (span, error) {
	switch n := n.(type) {
	case *Signature:
		if n == nil {
			return span{}, errAt(key, ErrNilNode)
		}
		if err := s.see(n, key); err != nil {
			return span{}, err
		}
		s.nodes++
		return span{1, 1}, nil
	case *Workflow:
		if n == nil {
			return span{}, errAt(key, ErrNilNode)
		}
		if err := s.see(n, key); err != nil {
			return span{}, err
		}
		if depth > MaxWorkflowDepth {
			return span{}, errAt(key, fmt.Errorf("%w: workflows nest more than MaxWorkflowDepth (%d) deep", ErrWorkflowTooLarge, MaxWorkflowDepth))
		}
		switch n.kind {
		case kindChain:
			return s.chain(n.members, key, prefix, depth)
		case kindGroup:
			return s.group(n, key, prefix, depth)
		case kindChord:
			hk, hp := chordGroupKey(n.members[0], key, prefix)
			h, err := s.walk(n.members[0], hk, hp, depth+1)
			if err != nil {
				return span{}, err
			}
			cb, err := s.walk(n.members[1], prefix+"cb", prefix+"cb.", depth+1)
			if err != nil {
				return span{}, err
			}
			s.deps += h.out * cb.in
			return span{h.in, cb.out}, nil
		case kindDAG:
			return s.dag(n, key, prefix, depth)
		default:
			return span{}, errAt(key, ErrEmptyWorkflow)
		}
	case *allowFailure:
		if n == nil {
			return span{}, errAt(key, ErrNilNode)
		}
		return s.walk(n.node, key, prefix, depth)
	case nil:
		return span{}, errAt(key, ErrNilNode)
	default: // a type that embeds *Signature or *Workflow
		return span{}, errAt(key, fmt.Errorf("tasks: a %T is not a workflow node: pass its *Signature or *Workflow", n))
	}
}

// see records that node is at key, or reports where it already was.
func (s *shaper) see(node Node, key string) error {
	if prev, ok := s.seen[node]; ok {
		what := "the same *Workflow"
		if sig, ok := node.(*Signature); ok {
			what = fmt.Sprintf("the same *Signature (%q)", sig.Name)
		}
		if prev == "" {
			prev = "the outermost workflow's group"
		} else {
			prev = strconv.Quote(prev)
		}
		return errAt(key, fmt.Errorf("%w: %s, first used at %s", ErrDuplicateNode, what, prev))
	}
	s.seen[node] = key
	return nil
}

func (s *shaper) chain(members []Node, key, prefix string, depth int) (span, error) {
	if len(members) == 0 {
		return span{}, errAt(key, ErrEmptyWorkflow)
	}
	var sp span
	for i, m := range members {
		k := prefix + strconv.Itoa(i)
		c, err := s.walk(m, k, k+".", depth+1)
		if err != nil {
			return span{}, err
		}
		if i == 0 {
			sp.in = c.in
		} else {
			s.deps += sp.out * c.in
		}
		sp.out = c.out
	}
	return sp, nil
}

func (s *shaper) group(w *Workflow, key, prefix string, depth int) (span, error) {
	if len(w.members) == 0 {
		return span{}, errAt(key, ErrEmptyWorkflow)
	}
	var sp span
	for i, m := range w.members {
		k := prefix + strconv.Itoa(i)
		c, err := s.walk(m, k, k+".", depth+1)
		if err != nil {
			return span{}, err
		}
		sp.in += c.in
		sp.out += c.out
	}
	return sp, nil
}

func (s *shaper) dag(w *Workflow, key, prefix string, depth int) (span, error) {
	if len(w.dag) == 0 {
		return span{}, errAt(key, ErrEmptyWorkflow)
	}
	index := make(map[string]int, len(w.dag))
	spans := make([]span, len(w.dag))
	for i, e := range w.dag {
		if !validNodeID(e.id) {
			return span{}, errAt(key, fmt.Errorf("%w: %q: want 1 to 64 of A-Z a-z 0-9 _ . -", ErrBadNodeID, e.id))
		}
		if _, dup := index[e.id]; dup {
			return span{}, errAt(key, fmt.Errorf("%w: %q", ErrDuplicateNodeID, e.id))
		}
		index[e.id] = i
		k := prefix + e.id
		c, err := s.walk(e.node, k, k+"/", depth+1)
		if err != nil {
			return span{}, err
		}
		spans[i] = c
	}
	plan := &dagPlan{deps: make([][]int, len(w.dag)), sink: make([]bool, len(w.dag))}
	listed := make([]int, len(w.dag)) // i+1 once a dep of node i
	for i := range plan.sink {
		plan.sink[i] = true
	}
	var sp span
	for i, e := range w.dag {
		if len(e.deps) == 0 {
			sp.in += spans[i].in
			continue
		}
		outs := 0
		for _, d := range e.deps {
			j, ok := index[d]
			switch {
			case !ok:
				return span{}, errAt(prefix+e.id, fmt.Errorf("%w: %q", ErrUnknownDependency, d))
			case listed[j] == i+1:
				return span{}, errAt(prefix+e.id, fmt.Errorf("%w: %q", ErrDuplicateDependency, d))
			}
			listed[j] = i + 1
			plan.deps[i] = append(plan.deps[i], j)
			plan.sink[j] = false
			outs += spans[j].out
		}
		s.deps += outs * spans[i].in
	}
	for i := range w.dag {
		if plan.sink[i] {
			sp.out += spans[i].out
		}
	}
	order, cycle := topoSort(plan.deps)
	if cycle != nil {
		ids := make([]string, len(cycle))
		for i, c := range cycle {
			ids[i] = w.dag[c].id
		}
		return span{}, errAt(key, fmt.Errorf("%w: %s", ErrCycle, strings.Join(ids, " -> ")))
	}
	plan.order = order
	s.plans[w] = plan
	return sp, nil
}

// chordGroupKey returns the key and prefix of a chord's group: a GroupOf's
// members are numbered as the chord's own, anything else is its "0".
func chordGroupKey(group Node, key, prefix string) (string, string) {
	if g, ok := group.(*Workflow); ok && g != nil && g.kind == kindGroup {
		return key, prefix
	}
	return prefix + "0", prefix + "0."
}

func validNodeID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, r := range []byte(id) {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '_', r == '.', r == '-':
		default:
			return false
		}
	}
	return true
}

// topoSort orders nodes 0…n-1, where node i depends on deps[i], so that
// each comes after its deps and otherwise as early as its index allows.
// If they have a cycle, it returns one instead, each node depending on the
// next and the last on the first again.
func topoSort(deps [][]int) (order, cycle []int) {
	n := len(deps)
	waiting := make([]int, n) // deps not yet placed
	next := make([][]int, n)  // the nodes that depend on each
	ready := &intHeap{}
	for i, ds := range deps {
		waiting[i] = len(ds)
		for _, d := range ds {
			next[d] = append(next[d], i)
		}
		if len(ds) == 0 {
			heap.Push(ready, i)
		}
	}
	order = make([]int, 0, n)
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, i)
		for _, j := range next[i] {
			if waiting[j]--; waiting[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	if len(order) == n {
		return order, nil
	}
	// Every node left waits for another node left: following those from
	// any of them comes back to a node already met, which closes a cycle.
	at := make(map[int]int) // node → its place on the path
	var path []int
	i := slices.IndexFunc(waiting, func(w int) bool { return w > 0 })
	for {
		if p, ok := at[i]; ok {
			cycle = append(path[p:], i)
			return nil, cycle
		}
		at[i] = len(path)
		path = append(path, i)
		for _, d := range deps[i] {
			if waiting[d] > 0 {
				i = d
				break
			}
		}
	}
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// compiler is the second pass of build.
type compiler struct {
	id     string
	nodes  []WorkflowNode
	uuids  map[string]string // each node's UUID → its key
	plans  map[*Workflow]*dagPlan
	allow  int // how many AllowFailure the node compiled is in
	atOnce int // how many of them RunNextAtOnce
}

// ports are a compiled node's first nodes and outputs, as indexes into
// compiler.nodes.
type ports struct{ in, out []int }

// compile appends the nodes of n to c.nodes, in topological order, and
// returns its ports. The first pass has checked n's shape.
func (c *compiler) compile(n Node, key, prefix string) (ports, error) {
	switch n := n.(type) {
	case *Signature:
		return c.add(n, key)
	case *allowFailure:
		c.allow++
		if n.atOnce {
			c.atOnce++
		}
		defer func() {
			c.allow--
			if n.atOnce {
				c.atOnce--
			}
		}()
		return c.compile(n.node, key, prefix)
	}
	w := n.(*Workflow)
	var p ports
	switch w.kind {
	case kindChain:
		for i, m := range w.members {
			k := prefix + strconv.Itoa(i)
			q, err := c.compile(m, k, k+".")
			if err != nil {
				return ports{}, err
			}
			if i == 0 {
				p.in = q.in
			} else {
				c.link(p.out, q.in)
			}
			p.out = q.out
		}
	case kindGroup:
		for i, m := range w.members {
			k := prefix + strconv.Itoa(i)
			q, err := c.compile(m, k, k+".")
			if err != nil {
				return ports{}, err
			}
			p.in = append(p.in, q.in...)
			p.out = append(p.out, q.out...)
		}
	case kindChord:
		hk, hp := chordGroupKey(w.members[0], key, prefix)
		h, err := c.compile(w.members[0], hk, hp)
		if err != nil {
			return ports{}, err
		}
		cb, err := c.compile(w.members[1], prefix+"cb", prefix+"cb.")
		if err != nil {
			return ports{}, err
		}
		c.link(h.out, cb.in)
		p = ports{h.in, cb.out}
	case kindDAG:
		plan := c.plans[w]
		ps := make([]ports, len(w.dag))
		for _, i := range plan.order {
			k := prefix + w.dag[i].id
			q, err := c.compile(w.dag[i].node, k, k+"/")
			if err != nil {
				return ports{}, err
			}
			for _, d := range plan.deps[i] {
				c.link(ps[d].out, q.in)
			}
			ps[i] = q
		}
		for i := range w.dag {
			if len(plan.deps[i]) == 0 {
				p.in = append(p.in, ps[i].in...)
			}
			if plan.sink[i] {
				p.out = append(p.out, ps[i].out...)
			}
		}
	}
	return p, nil
}

// link makes each node of to depend on every node of from, in from's
// order, after the deps it has.
func (c *compiler) link(from, to []int) {
	for _, t := range to {
		for _, f := range from {
			c.nodes[t].Deps = append(c.nodes[t].Deps, c.nodes[f].Key)
		}
	}
}

// add checks sig and appends a copy of it as the node key.
func (c *compiler) add(sig *Signature, key string) (ports, error) {
	if err := sig.Validate(); err != nil {
		return ports{}, errAt(key, err)
	}
	if sig.AggregationKey != "" {
		return ports{}, errAt(key, fmt.Errorf("%w (%q, key %q)", ErrAggregationMember, sig.Name, sig.AggregationKey))
	}
	if len(sig.OnSuccess) > 0 || sig.ChordCallback != nil || sig.GroupUUID != "" || sig.GroupTaskCount != 0 {
		return ports{}, errAt(key, fmt.Errorf("%w (%q)", ErrWiredSignature, sig.Name))
	}
	s := CopySignature(sig)
	if s.UUID == "" {
		s.UUID = "task_" + uuid.NewString()
	}
	if prev, ok := c.uuids[s.UUID]; ok {
		return ports{}, errAt(key, fmt.Errorf("%w: UUID %q is also that of %q", ErrDuplicateNode, s.UUID, prev))
	}
	c.uuids[s.UUID] = key
	s.WorkflowUUID, s.WorkflowNode = c.id, key
	i := len(c.nodes)
	c.nodes = append(c.nodes, WorkflowNode{Key: key, Signature: s, AllowFailure: c.allow > 0, RunNextAtOnce: c.atOnce > 0})
	return ports{[]int{i}, []int{i}}, nil
}
