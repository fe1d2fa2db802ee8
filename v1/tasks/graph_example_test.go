package tasks_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/b6192125/machinist/v1/tasks"
)

// printGraph prints each node of wf with the nodes it gets results from.
func printGraph(wf *tasks.Workflow) {
	for _, n := range wf.Nodes() {
		line := fmt.Sprintf("%-7s %-11s", n.Key, n.Signature.Name)
		if len(n.Deps) > 0 {
			line += " <- " + strings.Join(n.Deps, " ")
		}
		fmt.Println(strings.TrimSpace(line))
	}
	fmt.Println("outputs:", wf.Outputs())
}

func ExampleNewChainOf() {
	sig := func(name string) *tasks.Signature { return &tasks.Signature{Name: name} }
	// A chain whose second step is a group, then a chord whose callback is
	// a chain. ChainOf, GroupOf and ChordOf describe workflows to nest;
	// NewChainOf builds the outermost one and reports any mistake.
	wf, err := tasks.NewChainOf(
		sig("fetch"),
		tasks.GroupOf(sig("resizeA"), sig("resizeB"), sig("resizeC")),
		tasks.ChordOf(tasks.GroupOf(sig("upload1"), sig("upload2")), tasks.ChainOf(sig("index"), sig("notify"))),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	printGraph(wf)
	// Output:
	// 0       fetch
	// 1.0     resizeA     <- 0
	// 1.1     resizeB     <- 0
	// 1.2     resizeC     <- 0
	// 2.0     upload1     <- 1.0 1.1 1.2
	// 2.1     upload2     <- 1.0 1.1 1.2
	// 2.cb.0  index       <- 2.0 2.1
	// 2.cb.1  notify      <- 2.cb.0
	// outputs: [2.cb.1]
}

func ExampleNewDAG() {
	sig := func(name string) *tasks.Signature { return &tasks.Signature{Name: name} }
	// A diamond: b and c both need a, and d gets b's results, then c's.
	dag, err := tasks.NewDAG("report").
		Add("a", sig("extract")).
		Add("b", sig("cleanUsers"), "a").
		Add("c", sig("cleanOrders"), "a").
		Add("d", sig("join"), "b", "c").
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	printGraph(dag)

	// Mistakes are found by Build, and name where they are.
	_, err = tasks.NewDAG("broken").
		Add("a", sig("a"), "c").
		Add("b", sig("b"), "a").
		Add("c", sig("c"), "b").
		Build()
	fmt.Println(errors.Is(err, tasks.ErrCycle), err)
	// Output:
	// a       extract
	// b       cleanUsers  <- a
	// c       cleanOrders <- a
	// d       join        <- b c
	// outputs: [d]
	// true workflow: tasks: DAG has a cycle (each node listed depends on the next): a -> c -> b -> a
}
