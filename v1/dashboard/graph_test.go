package dashboard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/ops"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

func chord(members int, failed int) *ops.Workflow {
	g := &ops.Node{Group: true, UUID: "group_1", State: tasks.StateFailure}
	for i := range members {
		st := tasks.StateSuccess
		if i == failed {
			st = tasks.StateFailure
		}
		g.Members = append(g.Members, &ops.Node{UUID: fmt.Sprintf("task_%d", i), Name: "add", State: st, Queue: "q"})
	}
	g.Next = []*ops.Node{{UUID: "chord_cb", Name: "sum", State: tasks.StatePending}}
	return &ops.Workflow{ID: "group_1", Kind: tasks.WorkflowChord, Root: g}
}

func TestLayoutWorkflow(t *testing.T) {
	t.Parallel()
	a := &ops.Node{UUID: "task_a", Name: "fetch", State: tasks.StateSuccess}
	b := &ops.Node{UUID: "task_b", Name: "parse", State: tasks.StateStarted}
	c := &ops.Node{UUID: "task_c", Name: "store", State: ""}
	a.Next, b.Next = []*ops.Node{b}, []*ops.Node{c}
	g := layoutWorkflow(&ops.Workflow{ID: "chain_1", Kind: tasks.WorkflowChain, Root: a}, "/p")
	if g.Tasks != 3 || len(g.Edges) != 2 || len(g.Frames) != 0 {
		t.Fatalf("chain: %d tasks, %d edges, %d frames; want 3, 2, 0", g.Tasks, len(g.Edges), len(g.Frames))
	}
	if !(g.Nodes[0].X < g.Nodes[1].X && g.Nodes[1].X < g.Nodes[2].X) || g.Nodes[0].Y != g.Nodes[2].Y {
		t.Errorf("chain: not a left-to-right row: %+v", g.Nodes)
	}
	if g.Nodes[2].Class != "st-unknown" || g.Nodes[1].Class != "st-started" || g.Nodes[0].URL != "/p/tasks/task_a" {
		t.Errorf("chain: classes or links wrong: %+v", g.Nodes)
	}

	g = layoutWorkflow(chord(5, 2), "")
	if g.Tasks != 6 || len(g.Edges) != 5 || len(g.Frames) != 1 {
		t.Fatalf("chord of 5: %d tasks, %d edges, %d frames; want 6, 5 (into the callback), 1", g.Tasks, len(g.Edges), len(g.Frames))
	}
	cb := g.Nodes[len(g.Nodes)-1]
	for _, n := range g.Nodes[:5] {
		if n.X >= cb.X || n.X < g.Frames[0].X || n.Y+n.H > g.Frames[0].Y+g.Frames[0].H {
			t.Errorf("chord of 5: member %+v not in the frame left of the callback %+v", n, cb)
		}
	}
	if g.Nodes[2].Class != "st-failure" || g.Nodes[2].URL != "/tasks/task_2?queue=q" {
		t.Errorf("the failed member: %+v", g.Nodes[2])
	}

	// A chord of 100 is a grid, no taller than the window, with one arrow.
	g = layoutWorkflow(chord(100, 60), "")
	if g.Tasks != 101 || len(g.Edges) != 1 || g.Height > 900 {
		t.Errorf("chord of 100: %d tasks, %d edges, %.0f high; want 101, 1, at most 900", g.Tasks, len(g.Edges), g.Height)
	}
	if !g.Nodes[0].Compact || g.Nodes[0].Class != "st-failure" {
		t.Errorf("chord of 100: the failed member is not first: %+v", g.Nodes[0])
	}

	// Beyond membersMax the rest is one box, with counts.
	g = layoutWorkflow(chord(500, 499), "")
	more := g.Nodes[membersMax-1]
	if g.Tasks != membersMax || !more.More || !strings.Contains(more.Name, "301 more") || g.Nodes[0].Class != "st-failure" {
		t.Errorf("chord of 500: %d tasks drawn, box %+v", g.Tasks, more)
	}
}

func TestNewChartSumsPeriodsIntoBars(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 3, 41, 5, 0, time.UTC)
	stats := &brokers.QueueStats{Periods: []brokers.StatCount{
		{At: now.Truncate(brokers.StatsPeriod), Processed: 10, Failed: 4},
		{At: now.Truncate(brokers.StatsPeriod).Add(-10 * time.Second), Processed: 6},
		{At: now.Add(-2 * time.Hour), Processed: 99}, // outside the window
	}}
	ps := periodsOf(now, stats, stats)
	c := newChart(ps, 180, 360, 100)
	if c.Processed != 32 || c.Failed != 8 || c.Max != 32 || len(c.Bars) != 1 || c.Bucket != 20*time.Second {
		t.Fatalf("chart: %+v", c)
	}
	b := c.Bars[0]
	if b.BadH != 25 || b.OKH != 75 || b.OKY != 0 || b.BadY != 75 || b.X != 358 {
		t.Errorf("bar: %+v, want 75 succeeded on 25 failed at the right end", b)
	}
	if c := newChart(periodsOf(now), 60, 180, 28); !c.Empty || len(c.Bars) != 0 {
		t.Errorf("chart of nothing: %+v", c)
	}
}

func TestRelative(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 3, 41, 5, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-3 * time.Second, "3 s ago"}, {2 * time.Minute, "in 2 min"}, {-90 * time.Minute, "1 h 30 min ago"}, {0, "now"},
	} {
		if got := relative(now.Add(tc.d), now); got != tc.want {
			t.Errorf("relative(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := formatUTC(now.In(time.FixedZone("x", 3600))); got != "2026-11-27 03:41:05 UTC" {
		t.Errorf("formatUTC = %q", got)
	}
}

// A record that loops (a group among its own members, tasks that send
// each other) is drawn with each node once, and the layout ends.
func TestLayoutWorkflowLoops(t *testing.T) {
	t.Parallel()
	g := &ops.Node{Group: true, UUID: "group_1"}
	a := &ops.Node{UUID: "task_a", Name: "a"}
	b := &ops.Node{UUID: "task_b", Name: "b"}
	a.Next, b.Next = []*ops.Node{b}, []*ops.Node{a, g}
	g.Members = []*ops.Node{g, a, a}
	out := layoutWorkflow(&ops.Workflow{ID: "group_1", Kind: tasks.WorkflowGroup, Root: g}, "")
	if out.Tasks != 2 || len(out.Frames) != 1 {
		t.Fatalf("a looping record: %d tasks, %d frames; want 2 and 1", out.Tasks, len(out.Frames))
	}
}

// A workflow of any shape is drawn a column per level, with an arrow from
// each dep on the page to the node after it.
func TestLayoutDAG(t *testing.T) {
	page := []*ops.GraphNode{
		{Key: "a", UUID: "task_a", Name: "extract", State: tasks.StateSuccess},
		{Key: "b", UUID: "task_b", Name: "clean", State: tasks.StateSuccess, Deps: []string{"a"}, Level: 1},
		{Key: "c", UUID: "task_c", Name: "geocode", State: tasks.StateFailure, Error: "timeout", Deps: []string{"a"}, Level: 1},
		{Key: "d", UUID: "task_d", Name: "join", State: tasks.StateStarted, Deps: []string{"b", "c", "off_page"}, Level: 2},
	}
	g := layoutDAG(&ops.Workflow{ID: "workflow_1", Kind: tasks.WorkflowGraph, Graph: &ops.Graph{Nodes: 4, Page: page}}, "/p")
	if g.Tasks != 4 || len(g.Edges) != 4 {
		t.Fatalf("%d boxes and %d arrows, want 4 and 4 (none from a dep off the page)", g.Tasks, len(g.Edges))
	}
	xs := map[string]float64{}
	for _, n := range g.Nodes {
		xs[n.Name] = n.X
	}
	if !(xs["extract"] < xs["clean"] && xs["clean"] == xs["geocode"] && xs["geocode"] < xs["join"]) {
		t.Fatalf("columns %v, want one per level", xs)
	}
	if g.Nodes[2].Class != "st-failure" || g.Nodes[2].Error != "timeout" || !strings.HasPrefix(g.Nodes[2].Title, "c: ") {
		t.Fatalf("the failed node is drawn as %+v", g.Nodes[2])
	}
	if g.Width < 3*nodeW || g.Height < 2*nodeH {
		t.Fatalf("drawing of %.0f×%.0f, too small for 3 columns of up to 2 boxes", g.Width, g.Height)
	}
}
