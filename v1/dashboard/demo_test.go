package dashboard

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/b6192125/machinist/internal/ops"
	"github.com/b6192125/machinist/v1/tasks"
)

// registerDemoTasks registers the tasks of the workflow tests: add, fail
// (which fails for good) and sum (a chord callback).
func registerDemoTasks(t *testing.T, e *env) {
	t.Helper()
	err := e.srv.RegisterTasks(map[string]interface{}{
		"add":  func(a, b int64) (int64, error) { return a + b, nil },
		"fail": func(ctx context.Context) error { return errors.New("disk full on shard 3") },
		"sum": func(xs ...int64) (int64, error) {
			var s int64
			for _, x := range xs {
				s += x
			}
			return s, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sendChord sends to queue a chord of ok members that succeed (add) and
// bad ones that fail, with sum as its callback, and returns the group's
// UUID and the callback's.
func sendChord(t *testing.T, e *env, queue string, ok, bad int) (group, callback string) {
	t.Helper()
	var members []*tasks.Signature
	for i := range ok + bad {
		name, args := "add", []tasks.Arg{{Type: "int64", Value: i}, {Type: "int64", Value: 10}}
		if i >= ok {
			name, args = "fail", nil
		}
		s, err := tasks.NewSignature(name, args)
		if err != nil {
			t.Fatal(err)
		}
		s.RoutingKey = queue
		members = append(members, s)
	}
	g, err := tasks.NewGroup(members...)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := tasks.NewSignature("sum", nil)
	cb.RoutingKey = queue
	c, err := tasks.NewChord(g, cb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.SendChordWithContext(testCtx(t), c, 0); err != nil {
		t.Fatal(err)
	}
	return g.GroupUUID, cb.UUID
}

// waitWorkflowDone waits until every member of the workflow id has
// finished, and returns it.
func waitWorkflowDone(t *testing.T, e *env, id string) *ops.Workflow {
	t.Helper()
	var wf *ops.Workflow
	eventually(t, "the workflow's members to finish", func() error {
		var err error
		if wf, err = e.h.ops.Workflow(testCtx(t), id, 0, 0); err != nil {
			return err
		}
		for _, m := range wf.Root.Members {
			if m.State != tasks.StateSuccess && m.State != tasks.StateFailure {
				return fmt.Errorf("member %s is %q", m.UUID, m.State)
			}
		}
		return nil
	})
	return wf
}
