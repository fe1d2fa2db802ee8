// Command producer sends a task and a chain to the worker of
// example/worker, running in another process, and prints their results.
// Both read their configuration from the environment and meet on Redis:
//
//	export BROKER=redis://localhost:6379 RESULT_BACKEND=redis://localhost:6379
//	go run ./example/worker     # in one terminal
//	go run ./example/producer   # in another
//
// README.md shows its run function; a test in v1
// (TestREADMEGoBlocksAreTestedCode) keeps the two the same.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func main() {
	// Without BROKER, NewServer would refuse to start and suggest the
	// in-process broker, which the worker, in its own process, cannot reach.
	if os.Getenv("BROKER") == "" {
		log.Fatal("set BROKER and RESULT_BACKEND, e.g. BROKER=redis://localhost:6379 RESULT_BACKEND=redis://localhost:6379")
	}
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	cnf, err := config.NewFromEnvironment()
	if err != nil {
		return err
	}
	server, err := machinery.NewServer(cnf) // it sends tasks and reads results; no worker
	if err != nil {
		return err
	}
	defer server.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	add := &tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}}}
	res, err := server.SendTaskWithContext(ctx, add)
	if err != nil {
		return err
	}
	values, err := res.GetWithContext(ctx, 5*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Println("add(1, 2) =", tasks.HumanReadableResults(values))

	// Each step's results are appended to the next one's args.
	chain, err := tasks.NewChain(
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 1}}},
		&tasks.Signature{Name: "multiply", Args: []tasks.Arg{{Type: "int64", Value: 10}}},
	)
	if err != nil {
		return err
	}
	chainRes, err := server.SendChainWithContext(ctx, chain)
	if err != nil {
		return err
	}
	values, err = chainRes.GetWithContext(ctx, 5*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Println("multiply(10, add(1, 1)) =", tasks.HumanReadableResults(values))
	return nil
}
