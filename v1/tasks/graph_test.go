package tasks

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func sig(name string) *Signature { return &Signature{Name: name} }

// render lists w's nodes as "key name <- deps…", the form the tests
// compare.
func render(w *Workflow) []string {
	var out []string
	for _, n := range w.Nodes() {
		line := n.Key + " " + n.Signature.Name
		if len(n.Deps) > 0 {
			line += " <- " + strings.Join(n.Deps, " ")
		}
		out = append(out, line)
	}
	return out
}

// mustBuild returns a function that takes what a build returns and fails
// t on an error: mustBuild(t)(NewChainOf(a, b)).
func mustBuild(t *testing.T) func(*Workflow, error) *Workflow {
	t.Helper()
	return func(w *Workflow, err error) *Workflow {
		t.Helper()
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		return w
	}
}

func TestWorkflowGraph(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		build   func() (*Workflow, error)
		nodes   []string
		outputs []string
	}{
		{
			name:    "a single signature",
			build:   func() (*Workflow, error) { return NewChainOf(sig("a")) },
			nodes:   []string{"0 a"},
			outputs: []string{"0"},
		},
		{
			name:    "a group of one",
			build:   func() (*Workflow, error) { return NewGroupOf(sig("a")) },
			nodes:   []string{"0 a"},
			outputs: []string{"0"},
		},
		{
			name:    "a flat chain",
			build:   func() (*Workflow, error) { return NewChainOf(sig("a"), sig("b"), sig("c")) },
			nodes:   []string{"0 a", "1 b <- 0", "2 c <- 1"},
			outputs: []string{"2"},
		},
		{
			name: "chain, group, chain: the group's outputs feed the next in group order",
			build: func() (*Workflow, error) {
				return NewChainOf(
					sig("a"),
					GroupOf(ChainOf(sig("b1"), sig("b2")), sig("c"), sig("d")),
					ChainOf(sig("e"), sig("f")),
				)
			},
			nodes: []string{
				"0 a",
				"1.0.0 b1 <- 0", "1.0.1 b2 <- 1.0.0",
				"1.1 c <- 0",
				"1.2 d <- 0",
				"2.0 e <- 1.0.1 1.1 1.2",
				"2.1 f <- 2.0",
			},
			outputs: []string{"2.1"},
		},
		{
			name: "a chain whose second step is a group, then a chord whose callback is a chain",
			build: func() (*Workflow, error) {
				return NewChainOf(
					sig("fetch"),
					GroupOf(sig("resizeA"), sig("resizeB"), sig("resizeC")),
					ChordOf(GroupOf(sig("upload1"), sig("upload2")), ChainOf(sig("index"), sig("notify"))),
				)
			},
			nodes: []string{
				"0 fetch",
				"1.0 resizeA <- 0", "1.1 resizeB <- 0", "1.2 resizeC <- 0",
				"2.0 upload1 <- 1.0 1.1 1.2", "2.1 upload2 <- 1.0 1.1 1.2",
				"2.cb.0 index <- 2.0 2.1",
				"2.cb.1 notify <- 2.cb.0",
			},
			outputs: []string{"2.cb.1"},
		},
		{
			name:    "a chord",
			build:   func() (*Workflow, error) { return NewChordOf(GroupOf(sig("a"), sig("b")), sig("sum")) },
			nodes:   []string{"0 a", "1 b", "cb sum <- 0 1"},
			outputs: []string{"cb"},
		},
		{
			name:    "a chord whose group is a built group",
			build:   func() (*Workflow, error) { return NewChordOf(mustGroup(sig("a"), sig("b")), sig("sum")) },
			nodes:   []string{"0 a", "1 b", "cb sum <- 0 1"},
			outputs: []string{"cb"},
		},
		{
			name:    "a chord whose group is a chain",
			build:   func() (*Workflow, error) { return NewChordOf(ChainOf(sig("a"), sig("b")), sig("cb")) },
			nodes:   []string{"0.0 a", "0.1 b <- 0.0", "cb cb <- 0.1"},
			outputs: []string{"cb"},
		},
		{
			name: "a group of groups",
			build: func() (*Workflow, error) {
				return NewGroupOf(GroupOf(sig("a"), sig("b")), GroupOf(sig("c")), sig("d"), GroupOf(GroupOf(sig("e"))))
			},
			nodes:   []string{"0.0 a", "0.1 b", "1.0 c", "2 d", "3.0.0 e"},
			outputs: []string{"0.0", "0.1", "1.0", "2", "3.0.0"},
		},
		{
			name: "a chain of a group of groups: the next step gets all of them in order",
			build: func() (*Workflow, error) {
				return NewChainOf(GroupOf(GroupOf(sig("a"), sig("b")), sig("c")), sig("z"))
			},
			nodes:   []string{"0.0.0 a", "0.0.1 b", "0.1 c", "1 z <- 0.0.0 0.0.1 0.1"},
			outputs: []string{"1"},
		},
		{
			name: "a diamond DAG",
			build: func() (*Workflow, error) {
				return NewDAG("report").
					Add("a", sig("extract")).
					Add("b", sig("cleanUsers"), "a").
					Add("c", sig("cleanOrders"), "a").
					Add("d", sig("join"), "b", "c").
					Build()
			},
			nodes:   []string{"a extract", "b cleanUsers <- a", "c cleanOrders <- a", "d join <- b c"},
			outputs: []string{"d"},
		},
		{
			name: "a join gets its deps' results in the order the deps were given",
			build: func() (*Workflow, error) {
				return NewDAG("").
					Add("b", sig("b")).
					Add("c", sig("c")).
					Add("a", sig("a")).
					Add("join", sig("join"), "c", "a", "b").
					Build()
			},
			nodes:   []string{"b b", "c c", "a a", "join join <- c a b"},
			outputs: []string{"join"},
		},
		{
			name: "a DAG with deps added after their node, and several sinks",
			build: func() (*Workflow, error) {
				return NewDAG("").
					Add("late", sig("late"), "early", "mid").
					Add("sink1", sig("sink1"), "early").
					Add("mid", sig("mid"), "early").
					Add("early", sig("early")).
					Build()
			},
			nodes:   []string{"early early", "sink1 sink1 <- early", "mid mid <- early", "late late <- early mid"},
			outputs: []string{"late", "sink1"},
		},
		{
			name: "a DAG whose nodes are workflows",
			build: func() (*Workflow, error) {
				return NewDAG("etl").
					Add("extract", ChainOf(sig("x1"), sig("x2"))).
					Add("users", GroupOf(sig("u1"), sig("u2")), "extract").
					Add("orders", sig("o"), "extract").
					Add("load", ChordOf(GroupOf(sig("l1"), sig("l2")), sig("lcb")), "users", "orders").
					Add("audit", sig("audit"), "extract").
					Build()
			},
			nodes: []string{
				"extract/0 x1", "extract/1 x2 <- extract/0",
				"users/0 u1 <- extract/1", "users/1 u2 <- extract/1",
				"orders o <- extract/1",
				"load/0 l1 <- users/0 users/1 orders", "load/1 l2 <- users/0 users/1 orders",
				"load/cb lcb <- load/0 load/1",
				"audit audit <- extract/1",
			},
			outputs: []string{"load/cb", "audit"},
		},
		{
			name: "a DAG in a chain, and a DAG in a DAG",
			build: func() (*Workflow, error) {
				inner := mustDAG(NewDAG("inner").Add("p", sig("p")).Add("q", sig("q")).Add("r", sig("r"), "p"))
				outer := mustDAG(NewDAG("outer").Add("in", inner).Add("after", sig("after"), "in"))
				return NewChainOf(sig("first"), outer, sig("last"))
			},
			nodes: []string{
				"0 first",
				"1.in/p p <- 0", "1.in/q q <- 0", "1.in/r r <- 1.in/p",
				"1.after after <- 1.in/q 1.in/r",
				"2 last <- 1.after",
			},
			outputs: []string{"2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := mustBuild(t)(tt.build())
			if got := render(w); !slices.Equal(got, tt.nodes) {
				t.Errorf("nodes:\n got %q\nwant %q", got, tt.nodes)
			}
			if got := w.Outputs(); !slices.Equal(got, tt.outputs) {
				t.Errorf("Outputs = %q, want %q", got, tt.outputs)
			}
		})
	}
}

func mustGroup(nodes ...Node) *Workflow {
	w, err := NewGroupOf(nodes...)
	if err != nil {
		panic(err)
	}
	return w
}

func mustDAG(d *DAG) *Workflow {
	w, err := d.Build()
	if err != nil {
		panic(err)
	}
	return w
}

func TestWorkflowCopiesSignatures(t *testing.T) {
	t.Parallel()
	a, b := sig("a"), sig("b")
	b.UUID = "task_mine"
	b.OnError = []*Signature{sig("onError")}
	b.Args = []Arg{{Type: "[]int64", Value: []int64{1, 2}}}
	w := mustBuild(t)(NewChainOf(a, b))
	if !strings.HasPrefix(w.ID, "workflow_") {
		t.Errorf("ID = %q, want a workflow_ prefix", w.ID)
	}
	if a.UUID != "" || a.WorkflowUUID != "" || b.WorkflowUUID != "" || b.OnSuccess != nil {
		t.Errorf("the caller's signatures changed: %+v, %+v", a, b)
	}
	nodes := w.Nodes()
	if nodes[0].Signature == a || nodes[1].Signature == b {
		t.Error("Nodes holds the caller's signatures, not copies")
	}
	if !strings.HasPrefix(nodes[0].Signature.UUID, "task_") || nodes[1].Signature.UUID != "task_mine" {
		t.Errorf("UUIDs = %q, %q; want a new task_ one and task_mine", nodes[0].Signature.UUID, nodes[1].Signature.UUID)
	}
	for _, n := range nodes {
		if n.Signature.WorkflowUUID != w.ID {
			t.Errorf("node %s has WorkflowUUID %q, want %q", n.Key, n.Signature.WorkflowUUID, w.ID)
		}
	}
	b.Args[0].Value.([]int64)[0] = 9
	if got := nodes[1].Signature.Args[0].Value.([]int64)[0]; got != 1 {
		t.Errorf("changing the caller's args changed the node's: %d", got)
	}
	if len(nodes[1].Signature.OnError) != 1 {
		t.Errorf("OnError = %v, want the one given", nodes[1].Signature.OnError)
	}

	// Nodes and Outputs return copies.
	nodes[1].Signature.Name = "changed"
	nodes[1].Deps[0] = "changed"
	w.Outputs()[0] = "changed"
	if got := render(w); !slices.Equal(got, []string{"0 a", "1 b <- 0"}) || w.Outputs()[0] != "1" {
		t.Errorf("changing what Nodes and Outputs returned changed the workflow: %q, %q", got, w.Outputs())
	}
	if again := w.Nodes(); again[0].Signature.UUID != nodes[0].Signature.UUID {
		t.Error("Nodes returned another UUID the second time")
	}
}

func TestWorkflowRebuilds(t *testing.T) {
	t.Parallel()
	inner := mustGroup(sig("a"), sig("b"))
	first := mustBuild(t)(NewChainOf(inner, sig("c")))
	second := mustBuild(t)(NewChainOf(sig("z"), inner))
	if first.ID == second.ID || first.ID == inner.ID {
		t.Errorf("IDs %q, %q, %q: want each build its own", first.ID, second.ID, inner.ID)
	}
	if first.Nodes()[0].Signature.UUID == second.Nodes()[1].Signature.UUID {
		t.Error("a nested workflow built twice gave its signature the same UUID both times")
	}
	if got := render(inner); !slices.Equal(got, []string{"0 a", "1 b"}) {
		t.Errorf("nesting a built workflow changed it: %q", got)
	}

	d := NewDAG("d").Add("a", sig("a"))
	one := mustBuild(t)(d.Build())
	d.Add("b", sig("b"), "a")
	two := mustBuild(t)(d.Build())
	if got := render(one); !slices.Equal(got, []string{"a a"}) {
		t.Errorf("Add after Build changed the built workflow: %q", got)
	}
	if got := render(two); !slices.Equal(got, []string{"a a", "b b <- a"}) || two.Name != "d" {
		t.Errorf("the second build: %q, Name %q", got, two.Name)
	}

	described := ChainOf(sig("a"))
	if described.ID != "" || described.Nodes() != nil || described.Outputs() != nil {
		t.Errorf("a described workflow has ID %q, nodes %v, outputs %v; want none", described.ID, described.Nodes(), described.Outputs())
	}
}

// embedded is a type that has Node's method without being a node.
type embedded struct{ *Signature }

func TestWorkflowBuildErrors(t *testing.T) {
	t.Parallel()
	shared := sig("shared")
	sharedWF := GroupOf(sig("x"))
	withUUID := func(name, id string) *Signature { s := sig(name); s.UUID = id; return s }
	with := func(f func(*Signature)) *Signature { s := sig("s"); f(s); return s }
	unique := func(name string) *Signature {
		s := sig(name)
		s.UniqueFor = time.Minute
		return s
	}
	many := func(n int) []Node {
		out := make([]Node, n)
		for i := range out {
			out[i] = sig(fmt.Sprint("s", i))
		}
		return out
	}
	nest := func(depth int) *Workflow {
		w := ChainOf(sig("leaf"))
		for range depth - 1 {
			w = ChainOf(w)
		}
		return w
	}

	tests := []struct {
		name  string
		build func() (*Workflow, error)
		want  error
		text  string // in the message: the place, and what is wrong
	}{
		{"empty chain", func() (*Workflow, error) { return NewChainOf() }, ErrEmptyWorkflow, "workflow: "},
		{"empty group", func() (*Workflow, error) { return NewGroupOf() }, ErrEmptyWorkflow, "workflow: "},
		{"empty nested group", func() (*Workflow, error) { return NewChainOf(sig("a"), GroupOf()) }, ErrEmptyWorkflow, `at "1"`},
		{"empty DAG", func() (*Workflow, error) { return NewDAG("x").Build() }, ErrEmptyWorkflow, "workflow: "},
		{"empty DAG in a chord callback", func() (*Workflow, error) {
			return NewChordOf(GroupOf(sig("a")), NewDAG("x").workflow())
		}, ErrEmptyWorkflow, `at "cb"`},
		{"a Workflow not made by a constructor", func() (*Workflow, error) { return NewChainOf(&Workflow{}) }, ErrEmptyWorkflow, `at "0"`},

		{"nil node", func() (*Workflow, error) { return NewChainOf(sig("a"), nil) }, ErrNilNode, `at "1"`},
		{"nil signature", func() (*Workflow, error) { return NewChainOf(sig("a"), GroupOf(sig("b"), (*Signature)(nil))) }, ErrNilNode, `at "1.1"`},
		{"nil workflow", func() (*Workflow, error) { return NewGroupOf((*Workflow)(nil)) }, ErrNilNode, `at "0"`},
		{"nil chord callback", func() (*Workflow, error) { return NewChordOf(GroupOf(sig("a")), nil) }, ErrNilNode, `at "cb"`},
		{"nil DAG node", func() (*Workflow, error) { return NewDAG("").Add("a", nil).Build() }, ErrNilNode, `at "a"`},

		{"cycle", func() (*Workflow, error) {
			return NewDAG("").Add("x", sig("x")).Add("a", sig("a"), "x", "c").Add("b", sig("b"), "a").Add("c", sig("c"), "b").Add("y", sig("y"), "c").Build()
		}, ErrCycle, "a -> c -> b -> a"},
		{"a node that depends on itself", func() (*Workflow, error) {
			return NewDAG("").Add("a", sig("a")).Add("b", sig("b"), "a", "b").Build()
		}, ErrCycle, "b -> b"},
		{"cycle in a nested DAG", func() (*Workflow, error) {
			return NewChainOf(sig("first"), NewDAG("").Add("a", sig("a"), "b").Add("b", sig("b"), "a").workflow())
		}, ErrCycle, `at "1": tasks: DAG has a cycle (each node listed depends on the next): a -> b -> a`},
		{"unknown dependency", func() (*Workflow, error) {
			return NewDAG("").Add("a", sig("a")).Add("b", sig("b"), "a", "nope").Build()
		}, ErrUnknownDependency, `at "b": tasks: DAG dependency names no node: "nope"`},
		{"duplicate dependency", func() (*Workflow, error) {
			return NewDAG("").Add("a", sig("a")).Add("b", sig("b"), "a", "a").Build()
		}, ErrDuplicateDependency, `at "b"`},
		{"duplicate DAG id", func() (*Workflow, error) {
			return NewDAG("").Add("a", sig("a")).Add("a", sig("b")).Build()
		}, ErrDuplicateNodeID, `"a"`},
		{"empty DAG id", func() (*Workflow, error) { return NewDAG("").Add("", sig("a")).Build() }, ErrBadNodeID, `""`},
		{"DAG id with a slash", func() (*Workflow, error) { return NewDAG("").Add("a/b", sig("a")).Build() }, ErrBadNodeID, `"a/b"`},
		{"DAG id with a space", func() (*Workflow, error) { return NewDAG("").Add("a b", sig("a")).Build() }, ErrBadNodeID, `"a b"`},
		{"DAG id not ASCII", func() (*Workflow, error) { return NewDAG("").Add("é", sig("a")).Build() }, ErrBadNodeID, `"é"`},
		{"DAG id too long", func() (*Workflow, error) { return NewDAG("").Add(strings.Repeat("a", 65), sig("a")).Build() }, ErrBadNodeID, "want 1 to 64"},

		{"same signature twice", func() (*Workflow, error) { return NewChainOf(shared, GroupOf(sig("a"), shared)) }, ErrDuplicateNode, `at "1.1": tasks: the same node is twice in a workflow: the same *Signature ("shared"), first used at "0"`},
		{"same workflow twice", func() (*Workflow, error) { return NewChainOf(sharedWF, sig("a"), sharedWF) }, ErrDuplicateNode, `at "2"`},
		{"same group as a chord's group and callback", func() (*Workflow, error) { return NewChordOf(sharedWF, sharedWF) }, ErrDuplicateNode, "first used at the outermost workflow's group"},
		{"same UUID twice", func() (*Workflow, error) {
			return NewGroupOf(withUUID("a", "task_1"), withUUID("b", "task_1"))
		}, ErrDuplicateNode, `at "1": tasks: the same node is twice in a workflow: UUID "task_1" is also that of "0"`},

		{"too many nodes", func() (*Workflow, error) { return NewGroupOf(many(MaxWorkflowNodes + 1)...) }, ErrWorkflowTooLarge, "10001 nodes"},
		{"too many deps", func() (*Workflow, error) {
			return NewChainOf(GroupOf(many(400)...), GroupOf(many(400)...))
		}, ErrWorkflowTooLarge, "160000 dependencies"},
		{"nested too deep", func() (*Workflow, error) { return NewChainOf(nest(MaxWorkflowDepth)) }, ErrWorkflowTooLarge, "deep"},

		{"signature without a name", func() (*Workflow, error) { return NewChainOf(sig("a"), sig("")) }, ErrEmptyTaskName, `at "1"`},
		{"signature with a bad limit", func() (*Workflow, error) {
			return NewChainOf(with(func(s *Signature) { s.Limit = &Limit{Key: "k"} }))
		}, ErrBadLimit, `at "0"`},
		{"aggregation member", func() (*Workflow, error) {
			return NewChainOf(with(func(s *Signature) { s.AggregationKey = "k" }))
		}, ErrAggregationMember, `at "0"`},
		{"signature with OnSuccess", func() (*Workflow, error) {
			return NewGroupOf(sig("a"), with(func(s *Signature) { s.OnSuccess = []*Signature{sig("next")} }))
		}, ErrWiredSignature, `at "1"`},
		{"signature with a GroupUUID", func() (*Workflow, error) {
			return NewGroupOf(with(func(s *Signature) { s.GroupUUID = "group_1"; s.GroupTaskCount = 2 }))
		}, ErrWiredSignature, `at "0"`},
		{"signature with a ChordCallback", func() (*Workflow, error) {
			return NewGroupOf(with(func(s *Signature) { s.ChordCallback = sig("cb") }))
		}, ErrWiredSignature, `at "0"`},

		{"unique second step", func() (*Workflow, error) { return NewChainOf(sig("a"), unique("u")) }, ErrUniqueInWorkflow, `at "1"`},
		{"unique group member", func() (*Workflow, error) { return NewGroupOf(unique("u"), sig("b")) }, ErrUniqueInWorkflow, `at "0"`},
		{"unique first of a chain that starts with a group", func() (*Workflow, error) {
			return NewChainOf(GroupOf(unique("u"), sig("b")), sig("c"))
		}, ErrUniqueInWorkflow, `at "0.0"`},
		{"unique chord callback", func() (*Workflow, error) { return NewChordOf(GroupOf(sig("a")), unique("u")) }, ErrUniqueInWorkflow, `at "cb"`},
		{"unique root of a DAG with two roots", func() (*Workflow, error) {
			return NewDAG("").Add("a", unique("u")).Add("b", sig("b")).Build()
		}, ErrUniqueInWorkflow, `at "a"`},

		{"a type that embeds *Signature", func() (*Workflow, error) { return NewChainOf(embedded{sig("a")}) }, nil, "tasks.embedded is not a workflow node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := tt.build()
			if err == nil {
				t.Fatalf("built %q, want an error", render(w))
			}
			if w != nil {
				t.Errorf("returned a workflow with the error %v", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %q does not wrap %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q does not say %q", err, tt.text)
			}
		})
	}
}

func TestWorkflowAccepts(t *testing.T) {
	t.Parallel()
	unique := sig("u")
	unique.UniqueFor = time.Minute
	tests := []struct {
		name  string
		build func() (*Workflow, error)
	}{
		{"a unique first step of a chain", func() (*Workflow, error) { return NewChainOf(unique, sig("b")) }},
		{"a unique first step of a nested chain", func() (*Workflow, error) {
			return NewChainOf(ChainOf(unique, sig("b")), GroupOf(sig("c"), sig("d")))
		}},
		{"a unique only root of a DAG", func() (*Workflow, error) {
			return NewDAG("").Add("b", sig("b"), "u").Add("u", unique).Build()
		}},
		{"OnError callbacks", func() (*Workflow, error) {
			s := sig("a")
			s.OnError = []*Signature{sig("alert")}
			return NewChainOf(s, sig("b"))
		}},
		{"nesting MaxWorkflowDepth deep", func() (*Workflow, error) {
			w := ChainOf(sig("leaf"))
			for range MaxWorkflowDepth - 1 {
				w = GroupOf(w)
			}
			return w.build()
		}},
		{"MaxWorkflowNodes nodes", func() (*Workflow, error) {
			nodes := make([]Node, MaxWorkflowNodes)
			for i := range nodes {
				nodes[i] = sig("s")
			}
			return NewChordOf(GroupOf(nodes[1:]...), nodes[0])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mustBuild(t)(tt.build())
		})
	}
}

// genWorkflow builds a random workflow from data, keeping its own account
// of what each signature should depend on, by name, and of the outputs.
type genWorkflow struct {
	data []byte
	sigs []*Signature
	deps map[string][]string
}

func (g *genWorkflow) next() int {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return int(b)
}

// node returns a node, its first nodes and its outputs, by name.
func (g *genWorkflow) node(depth int) (Node, []string, []string) {
	b := g.next()
	if depth >= 5 || b%5 == 0 {
		s := sig(fmt.Sprint("s", len(g.sigs)))
		g.sigs = append(g.sigs, s)
		return s, []string{s.Name}, []string{s.Name}
	}
	n := 1 + g.next()%4
	link := func(from, to []string) {
		for _, t := range to {
			g.deps[t] = append(g.deps[t], from...)
		}
	}
	switch b % 5 {
	case 1:
		var members []Node
		var in, out []string
		for i := range n {
			m, mi, mo := g.node(depth + 1)
			members = append(members, m)
			if i == 0 {
				in = mi
			} else {
				link(out, mi)
			}
			out = mo
		}
		return ChainOf(members...), in, out
	case 2, 3:
		var members []Node
		var in, out []string
		for range n {
			m, mi, mo := g.node(depth + 1)
			members = append(members, m)
			in, out = append(in, mi...), append(out, mo...)
		}
		if b%5 == 2 {
			return GroupOf(members...), in, out
		}
		cb, ci, co := g.node(depth + 1)
		link(out, ci)
		return ChordOf(GroupOf(members...), cb), in, co
	default:
		// Node i may depend on any j < i, listed in a random order, and
		// the nodes are added in a random order too.
		d := NewDAG("fuzz")
		type entry struct {
			id       string
			node     Node
			deps     []string
			in, out  []string
			hasSucc  bool
			depNodes []int
		}
		entries := make([]*entry, n)
		for i := range entries {
			m, mi, mo := g.node(depth + 1)
			e := &entry{id: fmt.Sprint("n", i), node: m, in: mi, out: mo}
			mask := g.next()
			for j := range i {
				if mask&(1<<j) != 0 {
					e.depNodes = append(e.depNodes, j)
				}
			}
			if g.next()%2 == 1 {
				slices.Reverse(e.depNodes)
			}
			for _, j := range e.depNodes {
				e.deps = append(e.deps, entries[j].id)
				entries[j].hasSucc = true
				link(entries[j].out, mi)
			}
			entries[i] = e
		}
		added := slices.Clone(entries)
		if g.next()%2 == 1 {
			slices.Reverse(added)
		}
		var in, out []string
		for _, e := range added {
			d.Add(e.id, e.node, e.deps...)
			if len(e.deps) == 0 {
				in = append(in, e.in...)
			}
			if !e.hasSucc {
				out = append(out, e.out...)
			}
		}
		return d.workflow(), in, out
	}
}

var keyPattern = regexp.MustCompile(`^[A-Za-z0-9_.\-/]+$`)

func FuzzWorkflow(f *testing.F) {
	f.Add([]byte{1, 3, 0, 2, 2, 0, 0, 3, 1, 0, 0, 0})
	f.Add([]byte{4, 3, 1, 0, 0, 2, 1, 1, 0, 0, 3, 0, 0, 1})
	f.Add([]byte{3, 2, 4, 2, 0, 0, 3, 1, 0, 7, 1, 1, 2, 0, 0, 0, 1})
	f.Add([]byte{1, 2, 4, 3, 0, 0, 0, 1, 0, 2, 1, 0, 1, 0, 3, 1, 1, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &genWorkflow{data: data, deps: make(map[string][]string)}
		root, _, wantOut := g.node(1)
		w, ok := root.(*Workflow)
		if !ok {
			w = ChainOf(root)
		}
		built, err := w.build()
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		nodes := built.Nodes()
		if len(nodes) != len(g.sigs) {
			t.Fatalf("%d nodes, want %d", len(nodes), len(g.sigs))
		}
		name := make(map[string]string) // key → name
		at := make(map[string]int)      // key → place in nodes
		uuids := make(map[string]bool)
		hasSucc := make(map[string]bool)
		for i, n := range nodes {
			if _, dup := at[n.Key]; dup {
				t.Fatalf("key %q twice", n.Key)
			}
			if !keyPattern.MatchString(n.Key) {
				t.Errorf("key %q has other characters than a DAG id's and /", n.Key)
			}
			at[n.Key], name[n.Key] = i, n.Signature.Name
			if uuids[n.Signature.UUID] || n.Signature.UUID == "" {
				t.Errorf("node %s has UUID %q, empty or already used", n.Key, n.Signature.UUID)
			}
			uuids[n.Signature.UUID] = true
			if n.Signature.WorkflowUUID != built.ID {
				t.Errorf("node %s has WorkflowUUID %q, want %q", n.Key, n.Signature.WorkflowUUID, built.ID)
			}
			var deps []string
			for _, d := range n.Deps {
				j, ok := at[d]
				if !ok {
					t.Fatalf("node %s depends on %s, which does not come before it", n.Key, d)
				}
				hasSucc[d] = true
				deps = append(deps, nodes[j].Signature.Name)
			}
			if want := g.deps[n.Signature.Name]; !slices.Equal(deps, want) {
				t.Errorf("node %s (%s) depends on %q, want %q", n.Key, n.Signature.Name, deps, want)
			}
		}
		var out []string
		for _, k := range built.Outputs() {
			out = append(out, name[k])
			if hasSucc[k] {
				t.Errorf("output %s has successors", k)
			}
		}
		if !slices.Equal(out, wantOut) {
			t.Errorf("outputs %q, want %q", out, wantOut)
		}
		for _, n := range nodes {
			if !hasSucc[n.Key] && !slices.Contains(built.Outputs(), n.Key) {
				t.Errorf("node %s has no successor but is not an output", n.Key)
			}
		}
		for _, s := range g.sigs {
			if s.UUID != "" || s.WorkflowUUID != "" {
				t.Errorf("the caller's signature %s changed: %+v", s.Name, s)
			}
		}
	})
}

// AllowFailure marks every signature of the node it wraps, nested or
// not, and changes no key; a node used twice, or nil, inside it is
// refused as anywhere else.
func TestWorkflowAllowFailure(t *testing.T) {
	a, b, c, d := sig("a"), sig("b"), sig("c"), sig("d")
	w := mustBuild(t)(NewChainOf(a, AllowFailure(GroupOf(b, ChainOf(c, d))), sig("e")))
	plain := mustBuild(t)(NewChainOf(sig("a"), GroupOf(sig("b"), ChainOf(sig("c"), sig("d"))), sig("e")))
	if got, want := render(w), render(plain); !slices.Equal(got, want) {
		t.Fatalf("keys with AllowFailure %q, without %q", got, want)
	}
	var allowed []string
	for _, n := range w.Nodes() {
		if n.AllowFailure {
			allowed = append(allowed, n.Key)
		}
	}
	if want := []string{"1.0", "1.1.0", "1.1.1"}; !slices.Equal(allowed, want) {
		t.Fatalf("nodes allowed to fail %q, want %q", allowed, want)
	}
	w = mustBuild(t)(NewGroupOf(sig("x"), AllowFailure(sig("y"), RunNextAtOnce), AllowFailure(sig("z"))))
	if n := w.Nodes(); n[0].RunNextAtOnce || !n[1].RunNextAtOnce || !n[1].AllowFailure || n[2].RunNextAtOnce || !n[2].AllowFailure {
		t.Fatalf("RunNextAtOnce on %+v, want only on y", n)
	}
	if _, err := NewGroupOf(a, AllowFailure(a)); !errors.Is(err, ErrDuplicateNode) {
		t.Fatalf("a signature used twice through AllowFailure: %v, want ErrDuplicateNode", err)
	}
	if _, err := NewGroupOf(a, AllowFailure(nil)); !errors.Is(err, ErrNilNode) {
		t.Fatalf("AllowFailure(nil): %v, want ErrNilNode", err)
	}
}
