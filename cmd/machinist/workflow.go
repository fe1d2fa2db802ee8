package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/b6192125/machinist/internal/ops"
)

func (a *app) workflowCommand() *cobra.Command {
	cmd := parent("workflow", "Show or cancel a workflow")
	var page, size int
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Draw a workflow, with each task's state",
		Long: `show draws the workflow ID names (its ID, a group's or chord's GroupUUID, or
the UUID of any of its tasks), each task with its state, and its error when it
failed. A chain, group or chord is drawn as a tree: a chain's steps one after
the other, a group's members side by side, and after them what they send (a
chord's callback). A workflow of any shape (nested, or a DAG) is listed by
level, each node after the nodes it runs after, a page of --size nodes at a
time.`,
		Args: cobra.ExactArgs(1),
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
			if page < 1 || size < 1 || size > ops.GraphPage {
				return usagef("--page starts at 1, and --size is from 1 to %d", ops.GraphPage)
			}
			wf, err := o.Workflow(ctx, args[0], (page-1)*size, size)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(wf)
			}
			if wf.Graph != nil {
				return a.printGraph(wf, page)
			}
			return a.printWorkflow(wf)
		}),
	}
	show.Flags().IntVar(&page, "page", 1, "of a workflow of any shape: the page of nodes to show, from 1")
	show.Flags().IntVar(&size, "size", ops.GraphPage, "of a workflow of any shape: the nodes per page")
	cmd.AddCommand(show)
	cmd.AddCommand(&cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a workflow: what waits never runs, what runs is stopped",
		Args:  cobra.ExactArgs(1),
		RunE: a.withOps(func(ctx context.Context, o *ops.Ops, args []string) error {
			if err := o.CancelWorkflow(ctx, args[0]); err != nil {
				return err
			}
			return a.report(map[string]string{"workflow": args[0], "done": "cancelled"}, "workflow %s cancelled", args[0])
		}),
	})
	return cmd
}

func (a *app) printWorkflow(wf *ops.Workflow) error {
	var counts []string
	for state, n := range wf.Counts {
		if state == "" {
			state = "unknown"
		}
		counts = append(counts, fmt.Sprintf("%d %s", n, state))
	}
	sort.Strings(counts)
	fmt.Fprintf(a.stdout, "%s %s: %s (%s), sent %s\n", wf.Kind, wf.ID, a.state(wf.State), strings.Join(counts, ", "), stamp(wf.CreatedAt))
	if wf.Unread > 0 {
		fmt.Fprintf(a.stdout, "(the states of %d tasks not known to have finished were not read: shown as unknown)\n", wf.Unread)
	}
	fmt.Fprintln(a.stdout)
	a.drawSequence(a.stdout, wf.Root, "", "", map[*ops.Node]bool{})
	return nil
}

// printGraph lists a page of the workflow of any shape wf, level by
// level, each node with the keys of the nodes it runs after.
func (a *app) printGraph(wf *ops.Workflow, page int) error {
	g := wf.Graph
	name := ""
	if g.Name != "" {
		name = fmt.Sprintf(" %q", g.Name)
	}
	fmt.Fprintf(a.stdout, "workflow %s%s: %s, %d of %d nodes succeeded", wf.ID, name, a.state(wf.State), g.Succeeded, g.Nodes)
	if g.Failed > 0 {
		fmt.Fprintf(a.stdout, ", %d failed (allowed)", g.Failed)
	}
	fmt.Fprintf(a.stdout, ", sent %s\n", stamp(wf.CreatedAt))
	if g.FailedNode != "" || g.Error != "" {
		at := ""
		if g.FailedNode != "" {
			at = fmt.Sprintf(" at node %s", g.FailedNode)
		}
		fmt.Fprintf(a.stdout, "failed%s: %s\n", at, a.paint(red, clip(g.Error, 120)))
	}
	if len(g.Page) == 0 {
		fmt.Fprintf(a.stdout, "\npage %d is past the last node (%d)\n", page, g.Nodes)
		return nil
	}
	if len(g.Page) < g.Nodes {
		fmt.Fprintf(a.stdout, "nodes %d-%d of %d (page %d)\n", g.Offset+1, g.Offset+len(g.Page), g.Nodes, page)
	}
	keyW := 0
	for _, n := range g.Page {
		keyW = max(keyW, len(n.Key))
	}
	level := -1
	for _, n := range g.Page {
		if n.Level != level {
			level = n.Level
			fmt.Fprintf(a.stdout, "\nlevel %d\n", level)
		}
		line := fmt.Sprintf("  %-*s  %s %s: %s", keyW, n.Key, n.Name, n.UUID, a.state(n.State))
		if n.Error != "" {
			line += " " + a.paint(red, clip(n.Error, 80))
		}
		if len(n.Deps) > 0 {
			line += "  ← " + strings.Join(n.Deps, ", ")
		}
		fmt.Fprintln(a.stdout, line)
	}
	return nil
}

// drawSequence draws n and what follows it: a single next task on the
// next line at the same depth ("→"), several as branches below.
// first prefixes n's own line, rest the lines under it. A node in seen
// (drawn already: a record that lists a task twice) is not drawn again.
func (a *app) drawSequence(w io.Writer, n *ops.Node, first, rest string, seen map[*ops.Node]bool) {
	arrow := ""
	for n != nil && !seen[n] {
		seen[n] = true
		fmt.Fprintf(w, "%s%s%s\n", first, arrow, a.nodeLine(n))
		under := rest + strings.Repeat(" ", len([]rune(arrow)))
		if n.Group {
			members := unseen(n.Members, seen)
			for i, m := range members {
				if i == len(members)-1 {
					a.drawSequence(w, m, under+"└─ ", under+"   ", seen)
				} else {
					a.drawSequence(w, m, under+"├─ ", under+"│  ", seen)
				}
			}
		}
		next := unseen(n.Next, seen)
		switch len(next) {
		case 0:
			return
		case 1:
			n, first, arrow = next[0], rest, "→ "
		default:
			fmt.Fprintf(w, "%sthen, each:\n", under)
			for i, m := range next {
				if i == len(next)-1 {
					a.drawSequence(w, m, under+"└─ ", under+"   ", seen)
				} else {
					a.drawSequence(w, m, under+"├─ ", under+"│  ", seen)
				}
			}
			return
		}
	}
}

// unseen returns the nodes of ns not drawn yet, each once.
func unseen(ns []*ops.Node, seen map[*ops.Node]bool) []*ops.Node {
	var out []*ops.Node
	for _, n := range ns {
		if !seen[n] && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// nodeLine is one task's or group's line.
func (a *app) nodeLine(n *ops.Node) string {
	if n.Group {
		return fmt.Sprintf("group %s (%d tasks): %s", n.UUID, len(n.Members), a.state(n.State))
	}
	line := fmt.Sprintf("%s %s: %s", n.Name, n.UUID, a.state(n.State))
	if n.Error != "" {
		line += " " + a.paint(red, clip(n.Error, 80))
	}
	return line
}
