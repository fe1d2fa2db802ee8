package machinery_test

import (
	"context"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/tasks"
)

// registerArithmetic registers add(a, b) and sum(ns...), the tasks
// sendWorkflows runs, and the functions of extra.
func registerArithmetic(t *testing.T, s *machinery.Server, extra map[string]any) {
	t.Helper()
	funcs := map[string]any{
		"add": func(a, b int64) (int64, error) { return a + b, nil },
		"sum": func(ns ...int64) (int64, error) {
			var t int64
			for _, n := range ns {
				t += n
			}
			return t, nil
		},
	}
	for name, fn := range extra {
		funcs[name] = fn
	}
	for name, fn := range funcs {
		if err := s.RegisterTask(name, fn); err != nil {
			t.Fatal(err)
		}
	}
}

// add returns a signature of the add task with args (a chain's later
// steps take one, and the step before gives the other).
func add(args ...int64) *tasks.Signature {
	sig := &tasks.Signature{Name: "add"}
	for _, a := range args {
		sig.Args = append(sig.Args, tasks.Arg{Type: "int64", Value: a})
	}
	return sig
}

// sendWorkflows sends through s, whose workers run the tasks of
// registerArithmetic, a task, a chain and a chord, and checks that each
// result arrives: 1+2, (1+2)+10+100, and the sum of a group's three adds.
func sendWorkflows(ctx context.Context, t *testing.T, s *machinery.Server) {
	t.Helper()
	r, err := s.SendTaskWithContext(ctx, add(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.GetWithContext(ctx, 5*time.Millisecond); err != nil || got[0].Int() != 3 {
		t.Fatalf("task: %v, %v; want 3", got, err)
	}
	chain, err := tasks.NewChain(add(1, 2), add(10), add(100))
	if err != nil {
		t.Fatal(err)
	}
	cr, err := s.SendChainWithContext(ctx, chain)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cr.GetWithContext(ctx, 5*time.Millisecond); err != nil || got[0].Int() != 113 {
		t.Fatalf("chain: %v, %v; want 113", got, err)
	}
	group, err := tasks.NewGroup(add(1, 1), add(2, 2), add(3, 3))
	if err != nil {
		t.Fatal(err)
	}
	chord, err := tasks.NewChord(group, &tasks.Signature{Name: "sum"})
	if err != nil {
		t.Fatal(err)
	}
	chr, err := s.SendChordWithContext(ctx, chord, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := chr.GetWithContext(ctx, 5*time.Millisecond); err != nil || got[0].Int() != 12 {
		t.Fatalf("chord: %v, %v; want 12", got, err)
	}
}
