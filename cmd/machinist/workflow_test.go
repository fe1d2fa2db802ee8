package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/b6192125/machinist/internal/ops"
	"github.com/b6192125/machinist/v1/tasks"
)

// A record that loops (a group among its own members, tasks that send
// each other) is drawn with each node once.
func TestDrawWorkflowLoops(t *testing.T) {
	t.Parallel()
	g := &ops.Node{Group: true, UUID: "group_1", State: tasks.StatePending}
	a := &ops.Node{UUID: "task_a", Name: "a", State: tasks.StatePending}
	b := &ops.Node{UUID: "task_b", Name: "b", State: tasks.StatePending}
	a.Next, b.Next = []*ops.Node{b}, []*ops.Node{a, g}
	g.Members = []*ops.Node{g, a, a}
	var out bytes.Buffer
	a2 := &app{env: env{getenv: func(string) string { return "" }, stdout: &out}}
	if err := a2.printWorkflow(&ops.Workflow{ID: "group_1", Kind: tasks.WorkflowGroup, State: tasks.StatePending, Root: g, Unread: 3}); err != nil {
		t.Fatal(err)
	}
	want := `group group_1: PENDING (), sent 
(the states of 3 tasks not known to have finished were not read: shown as unknown)

group group_1 (3 tasks): PENDING
└─ a task_a: PENDING
   → b task_b: PENDING
`
	if got := out.String(); got != want {
		t.Fatalf("drawn as:\n%s\nwant:\n%s", got, want)
	}
	if strings.Count(out.String(), "task_a") != 1 {
		t.Fatal("task_a drawn twice")
	}
}
