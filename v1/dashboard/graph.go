package dashboard

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/b6192125/machinist/internal/ops"
	"github.com/b6192125/machinist/v1/tasks"
)

// The drawing of a workflow: a chain runs left to right, a group is a
// framed column of its members (a grid of smaller boxes when it has more
// than columnMax), and arrows go from a task, or from each member of a
// group, to what runs after it (Node.Next: a chain's next step, a chord's
// callback). A group shows at most membersMax members, its failed ones
// first; a box says how many more there are, by state.
const (
	nodeW, nodeH   = 200.0, 60.0 // a task's box
	cellW, cellH   = 150.0, 40.0 // a member's box in a grid
	gapX, gapY     = 64.0, 14.0  // between columns, between boxes of a column
	cellGap        = 8.0         // between the boxes of a grid
	framePad       = 12.0        // inside a group's frame
	frameHead      = 24.0        // the frame's label
	margin         = 16.0        // around the drawing
	columnMax      = 12          // members of a group drawn as a column
	membersMax     = 200         // members of a group drawn at all
	nameChars      = 27          // of a task's name in its box
	cellNameChars  = 19
	errorChars     = 27
	maxGraphDepth  = 64 // of Next edges followed (a cycle would be a broken record)
	arrowClearance = 6.0
)

// graph is a workflow's drawing, in SVG coordinates.
type graph struct {
	Width, Height float64
	Frames        []frame
	Nodes         []gnode
	Edges         []string // SVG path data
	Tasks         int      // the task boxes drawn, collapsed members excluded
}

// gnode is a task's box.
type gnode struct {
	X, Y, W, H float64
	Compact    bool // a member in a grid: name and state only
	Name       string
	Short      string // the short UUID
	State      string // the state's name ("unknown" for none)
	Class      string // the CSS class of the state
	Error      string // a failure's error, shortened
	Title      string // the full description, shown on hover
	URL        string
	More       bool // a box standing for members not drawn
}

// frame is a group's frame.
type frame struct {
	X, Y, W, H float64
	Label      string
	Class      string
}

// point is a place in a block, relative to its top left corner.
type point struct{ X, Y float64 }

// block is a part of a drawing laid out but not placed: its size, the
// point arrows into it end at, the points arrows out of it start from,
// and how to draw it at a place.
type block struct {
	w, h  float64
	in    point
	outs  []point
	place func(g *graph, x, y float64)
}

// layoutWorkflow draws wf; links to tasks start with prefix.
func layoutWorkflow(wf *ops.Workflow, prefix string) *graph {
	g := &graph{}
	l := layouter{prefix: prefix, kind: wf.Kind, seen: map[*ops.Node]bool{}}
	b := l.chain(wf.Root, 0)
	b.place(g, margin, margin)
	g.Width, g.Height = b.w+2*margin, b.h+2*margin
	return g
}

// layoutDAG draws the page of the workflow of any shape wf.Graph: a
// column per level (a first node's is 0, another node's one more than
// its deepest dep's), the nodes of a level stacked in the order the
// workflow was written, and an arrow from each dep on the page to the
// node that runs after it.
func layoutDAG(wf *ops.Workflow, prefix string) *graph {
	g := &graph{}
	l := layouter{prefix: prefix, kind: wf.Kind}
	type placed struct{ x, y float64 }
	at := map[string]placed{}
	var columns [][]*ops.GraphNode
	base := 0
	if len(wf.Graph.Page) > 0 {
		base = wf.Graph.Page[0].Level
	}
	for _, n := range wf.Graph.Page {
		c := n.Level - base
		for len(columns) <= c {
			columns = append(columns, nil)
		}
		columns[c] = append(columns[c], n)
	}
	for c, col := range columns {
		x := margin + float64(c)*(nodeW+gapX)
		for i, n := range col {
			y := margin + float64(i)*(nodeH+gapY)
			at[n.Key] = placed{x, y}
			box := l.box(&ops.Node{UUID: n.UUID, Name: n.Name, Queue: n.Queue, State: n.State, Error: n.Error}, x, y, nodeW, nodeH, false)
			box.Title = n.Key + ": " + box.Title
			g.Nodes = append(g.Nodes, box)
			g.Tasks++
			g.Width = max(g.Width, x+nodeW+margin)
			g.Height = max(g.Height, y+nodeH+margin)
		}
	}
	for _, n := range wf.Graph.Page {
		to := at[n.Key]
		for _, d := range n.Deps {
			if from, ok := at[d]; ok {
				g.Edges = append(g.Edges, edge(point{from.x + nodeW, from.y + nodeH/2}, point{to.x, to.y + nodeH/2}))
			}
		}
	}
	return g
}

type layouter struct {
	prefix string
	kind   string
	seen   map[*ops.Node]bool // nodes already laid out (a node is drawn once)
}

// chain lays out n followed by what runs after it.
func (l *layouter) chain(n *ops.Node, depth int) block {
	l.seen[n] = true
	self := l.node(n, depth)
	var next []block
	for _, m := range n.Next {
		if !l.seen[m] && depth < maxGraphDepth {
			next = append(next, l.chain(m, depth+1))
		}
	}
	if len(next) == 0 {
		return self
	}
	col := column(next, gapY)
	h := max(self.h, col.h)
	selfY, colY := (h-self.h)/2, (h-col.h)/2
	colX := self.w + gapX
	b := block{w: colX + col.w, h: h, in: point{self.in.X, selfY + self.in.Y}}
	for _, o := range col.outs {
		b.outs = append(b.outs, point{colX + o.X, colY + o.Y})
	}
	b.place = func(g *graph, x, y float64) {
		self.place(g, x, y+selfY)
		col.place(g, x+colX, y+colY)
		for _, o := range self.outs {
			for _, in := range col.ins {
				g.Edges = append(g.Edges, edge(point{x + o.X, y + selfY + o.Y}, point{x + colX + in.X, y + colY + in.Y}))
			}
		}
	}
	return b
}

// columnBlock is blocks stacked, with the points arrows into each end at.
type columnBlock struct {
	block
	ins []point
}

// column stacks blocks, centred, gap apart.
func column(bs []block, gap float64) columnBlock {
	var c columnBlock
	ys := make([]float64, len(bs))
	for i, b := range bs {
		c.w = max(c.w, b.w)
		ys[i] = c.h
		c.h += b.h
		if i < len(bs)-1 {
			c.h += gap
		}
	}
	for i, b := range bs {
		c.ins = append(c.ins, point{b.in.X, ys[i] + b.in.Y})
		for _, o := range b.outs {
			c.outs = append(c.outs, point{o.X, ys[i] + o.Y})
		}
	}
	c.place = func(g *graph, x, y float64) {
		for i, b := range bs {
			b.place(g, x, y+ys[i])
		}
	}
	return c
}

// node lays out n alone: a task's box or a group's frame.
func (l *layouter) node(n *ops.Node, depth int) block {
	if n.Group {
		return l.group(n, depth)
	}
	return block{w: nodeW, h: nodeH, in: point{0, nodeH / 2}, outs: []point{{nodeW, nodeH / 2}},
		place: func(g *graph, x, y float64) {
			g.Nodes = append(g.Nodes, l.box(n, x, y, nodeW, nodeH, false))
			g.Tasks++
		}}
}

// group lays out a group's frame with its members: a column (each
// member followed by what runs after it), or a grid beyond columnMax.
func (l *layouter) group(n *ops.Node, depth int) block {
	// A member already laid out (a record that lists a task twice, or a
	// group among its own members) is not drawn again.
	var fresh []*ops.Node
	for _, m := range n.Members {
		if !l.seen[m] {
			l.seen[m] = true
			fresh = append(fresh, m)
		}
	}
	label := fmt.Sprintf("%s %s · %d members · %s", l.kind, shortID(n.UUID), len(n.Members), stateName(n.State))
	if l.kind == tasks.WorkflowChain {
		label = fmt.Sprintf("group %s · %d members · %s", shortID(n.UUID), len(n.Members), stateName(n.State))
	}
	fr := frame{Label: label, Class: stateClass(n.State)}
	if len(fresh) == 0 {
		fr.Label += " (none recorded)"
		w, h := nodeW+2*framePad, frameHead+framePad
		return block{w: w, h: h, in: point{0, h / 2}, outs: []point{{w, h / 2}},
			place: func(g *graph, x, y float64) {
				fr.X, fr.Y, fr.W, fr.H = x, y, w, h
				g.Frames = append(g.Frames, fr)
			}}
	}
	if len(fresh) <= columnMax {
		var ms []block
		for _, m := range fresh {
			ms = append(ms, l.chain(m, depth+1))
		}
		col := column(ms, gapY)
		w, h := max(col.w+2*framePad, float64(len([]rune(fr.Label)))*7.4+2*framePad), col.h+frameHead+framePad
		colX, colY := (w-col.w)/2, frameHead
		b := block{w: w, h: h, in: point{0, h / 2}}
		for _, o := range col.outs {
			b.outs = append(b.outs, point{colX + o.X, colY + o.Y})
		}
		b.place = func(g *graph, x, y float64) {
			fr.X, fr.Y, fr.W, fr.H = x, y, w, h
			g.Frames = append(g.Frames, fr)
			col.place(g, x+colX, y+colY)
		}
		return b
	}

	// A grid: the failed members first, then the others in group order,
	// up to membersMax; one box for the rest.
	members := fresh
	slices.SortStableFunc(members, func(a, b *ops.Node) int {
		fa, fb := a.State == tasks.StateFailure, b.State == tasks.StateFailure
		switch {
		case fa && !fb:
			return -1
		case fb && !fa:
			return 1
		}
		return 0
	})
	cells := len(members)
	var rest []*ops.Node
	if cells > membersMax {
		rest, members = members[membersMax-1:], members[:membersMax-1]
		cells = membersMax
	}
	rows := int(math.Ceil(math.Sqrt(2 * float64(cells))))
	cols := (cells + rows - 1) / rows
	gridW := float64(cols)*(cellW+cellGap) - cellGap
	gridH := float64(rows)*(cellH+cellGap) - cellGap
	w, h := gridW+2*framePad, gridH+frameHead+framePad
	return block{w: w, h: h, in: point{0, h / 2}, outs: []point{{w, h / 2}},
		place: func(g *graph, x, y float64) {
			fr.X, fr.Y, fr.W, fr.H = x, y, w, h
			g.Frames = append(g.Frames, fr)
			for i, m := range members {
				cx := x + framePad + float64(i/rows)*(cellW+cellGap)
				cy := y + frameHead + float64(i%rows)*(cellH+cellGap)
				g.Nodes = append(g.Nodes, l.box(m, cx, cy, cellW, cellH, true))
				g.Tasks++
			}
			if len(rest) > 0 {
				i := len(members)
				cx := x + framePad + float64(i/rows)*(cellW+cellGap)
				cy := y + frameHead + float64(i%rows)*(cellH+cellGap)
				g.Nodes = append(g.Nodes, moreBox(rest, cx, cy))
			}
		}}
}

// box returns the box of the task n at x, y.
func (l *layouter) box(n *ops.Node, x, y, w, h float64, compact bool) gnode {
	chars := nameChars
	if compact {
		chars = cellNameChars
	}
	name := n.Name
	if name == "" {
		name = "(name unknown)"
	}
	title := fmt.Sprintf("%s %s: %s", name, n.UUID, stateName(n.State))
	if n.Queue != "" {
		title += " (queue " + n.Queue + ")"
	}
	if n.Error != "" {
		title += "\n" + n.Error
	}
	u := l.prefix + "/tasks/" + url.PathEscape(n.UUID)
	if n.Queue != "" {
		u += "?queue=" + url.QueryEscape(n.Queue)
	}
	errText := ""
	if n.State == tasks.StateFailure && n.Error != "" {
		errText = truncate(errorChars, firstLine(n.Error))
	}
	return gnode{X: x, Y: y, W: w, H: h, Compact: compact, Name: truncate(chars, name), Short: shortID(n.UUID),
		State: stateName(n.State), Class: stateClass(n.State), Error: errText, Title: title, URL: u}
}

// moreBox stands for the members rest, not drawn.
func moreBox(rest []*ops.Node, x, y float64) gnode {
	counts := map[string]int{}
	for _, m := range rest {
		counts[stateName(m.State)]++
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
	}
	return gnode{X: x, Y: y, W: cellW, H: cellH, Compact: true, More: true,
		Name: fmt.Sprintf("+ %d more", len(rest)), State: strings.Join(parts, ", "), Class: "st-more",
		Title: fmt.Sprintf("%d more members: %s", len(rest), strings.Join(parts, ", "))}
}

// edge is the path of an arrow from a to b: a curve leaving a and reaching
// b horizontally.
func edge(a, b point) string {
	b.X -= arrowClearance
	dx := max((b.X-a.X)/2, 16)
	return fmt.Sprintf("M%.1f %.1f C%.1f %.1f %.1f %.1f %.1f %.1f", a.X, a.Y, a.X+dx, a.Y, b.X-dx, b.Y, b.X, b.Y)
}

// stateClass is the CSS class that colours a task of state s.
func stateClass(s string) string {
	switch s {
	case tasks.StateSuccess:
		return "st-success"
	case tasks.StateFailure:
		return "st-failure"
	case tasks.StatePending:
		return "st-pending"
	case tasks.StateReceived, tasks.StateStarted:
		return "st-started"
	case tasks.StateRetry:
		return "st-retry"
	}
	return "st-unknown"
}

// firstLine returns s up to its first line break.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
