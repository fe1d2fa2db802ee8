package machinery_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// A chain, a group and a chord, as the README's Workflows section sends
// them (workflows is that section's code).
func ExampleServer_SendChord() {
	server, err := machinery.NewServer(&config.Config{Broker: "memory://", NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer server.Close()
	if err := server.RegisterTasks(map[string]interface{}{
		"add": func(args ...int64) (int64, error) {
			var sum int64
			for _, a := range args {
				sum += a
			}
			return sum, nil
		},
		"multiply": func(a, b int64) (int64, error) { return a * b, nil },
	}); err != nil {
		panic(err)
	}
	worker := server.NewWorker("worker-1", 10)
	errs := make(chan error, 1)
	worker.LaunchAsync(errs)
	defer func() { worker.Quit(); <-errs }()

	if err := workflows(context.Background(), server); err != nil {
		panic(err)
	}
	// Output:
	// 48
	// 3
	// 7
	// 11
	// 21
	// 7
}

// workflows is the code of the README's Workflows section, between the
// markers (TestREADMEWorkflowsRunAsWritten holds the two together).
func workflows(ctx context.Context, server *machinery.Server) error {
	// README Workflows: begin
	add := func(a, b int64) *tasks.Signature {
		return &tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: a}, {Type: "int64", Value: b}}}
	}

	// Chain: each task's results are appended to the next one's args.
	chain, err := tasks.NewChain(add(1, 1), add(5, 5), &tasks.Signature{Name: "multiply", Args: []tasks.Arg{{Type: "int64", Value: 4}}})
	if err != nil {
		return err
	}
	chainResult, err := server.SendChainWithContext(ctx, chain)
	if err != nil {
		return err
	}
	values, err := chainResult.GetWithContext(ctx, 5*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Println(tasks.HumanReadableResults(values)) // multiply(4, add(5, 5, add(1, 1))): 48

	// Group: in parallel.
	group, err := tasks.NewGroup(add(1, 2), add(3, 4), add(5, 6))
	if err != nil {
		return err
	}
	groupResults, err := server.SendGroupWithContext(ctx, group, 0) // 0: publish with no concurrency limit
	if err != nil {
		return err
	}
	for _, r := range groupResults {
		values, err := r.GetWithContext(ctx, 5*time.Millisecond)
		if err != nil {
			return err
		}
		fmt.Println(tasks.HumanReadableResults(values)) // 3, 7, 11
	}

	// Chord: a group, then a callback with every member's results in group
	// order. A group's tasks are sent once: a chord gets a group of its own.
	members, err := tasks.NewGroup(add(1, 2), add(3, 4), add(5, 6))
	if err != nil {
		return err
	}
	chord, err := tasks.NewChord(members, &tasks.Signature{Name: "add"})
	if err != nil {
		return err
	}
	chordResult, err := server.SendChordWithContext(ctx, chord, 0)
	if err != nil {
		return err
	}
	values, err = chordResult.GetWithContext(ctx, 5*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Println(tasks.HumanReadableResults(values)) // add(3, 7, 11): 21

	// Any shape: chains, groups and chords nest (and tasks.NewDAG joins
	// nodes as no chain can). The group gets the first step's result.
	wf, err := tasks.NewChainOf(add(1, 1), tasks.GroupOf(add(1, 0), add(2, 0)), &tasks.Signature{Name: "add"})
	if err != nil {
		return err
	}
	wfResult, err := server.SendWorkflowWithContext(ctx, wf)
	if err != nil {
		return err
	}
	values, err = wfResult.GetWithContext(ctx, 5*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Println(tasks.HumanReadableResults(values)) // add(add(1, 0, 2), add(2, 0, 2)): 7
	// README Workflows: end
	return nil
}

// The README's Workflows code is workflows' (which ExampleServer_SendChord
// runs), line for line, so that it compiles and runs as written.
func TestREADMEWorkflowsRunAsWritten(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### Workflows\n")
	_, block, ok2 := strings.Cut(section, "```go\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no Go block under ### Workflows")
	}
	src, err := os.ReadFile("example_workflows_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(src), "// README Workflows: begin\n")
	code, _, _ = strings.Cut(code, "\t// README Workflows: end")
	if got, want := strings.TrimRight(block, "\n"), dedent(code); got != want {
		t.Fatalf("README.md's Workflows code:\n%s\nis not workflows' code in example_workflows_test.go:\n%s", got, want)
	}
}

// dedent returns s, code of a function body, with each line's first tab
// of indentation removed.
func dedent(s string) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range ls {
		ls[i] = strings.TrimPrefix(l, "\t")
	}
	return strings.Join(ls, "\n")
}
