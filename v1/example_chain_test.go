package machinery_test

import (
	"context"
	"fmt"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// A chain: each step's result is appended to the next one's args.
func ExampleServer_SendChainWithContext() {
	server, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	first, err := tasks.NewSignatureOf("add", int64(1), int64(2)) // 3
	if err != nil {
		panic(err)
	}
	second, err := tasks.NewSignatureOf("add", int64(10)) // add(10, 3)
	if err != nil {
		panic(err)
	}
	chain, err := tasks.NewChain(first, second)
	if err != nil {
		panic(err)
	}
	res, err := server.SendChainWithContext(ctx, chain)
	if err != nil {
		panic(err)
	}
	values, err := res.GetWithContext(ctx, 5*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println(tasks.HumanReadableResults(values))
	// Output: 13
}

// A group: its tasks run in parallel; each has its own result.
func ExampleServer_SendGroupWithContext() {
	server, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var members []*tasks.Signature
	for i := range int64(3) {
		sig, err := tasks.NewSignatureOf("add", i, i)
		if err != nil {
			panic(err)
		}
		members = append(members, sig)
	}
	group, err := tasks.NewGroup(members...)
	if err != nil {
		panic(err)
	}
	results, err := server.SendGroupWithContext(ctx, group, 0) // 0: publish with no concurrency limit
	if err != nil {
		panic(err)
	}
	for _, r := range results {
		values, err := r.GetWithContext(ctx, 5*time.Millisecond)
		if err != nil {
			panic(err)
		}
		fmt.Print(tasks.HumanReadableResults(values), " ")
	}
	fmt.Println()
	// Output: 0 2 4
}
