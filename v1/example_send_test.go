package machinery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// exampleServer is a memory:// Server running add(a, b int64) and
// wait(ms int64), with a worker; stop closes both.
func exampleServer() (server *machinery.Server, stop func()) {
	server, err := machinery.NewServer(&config.Config{Broker: "memory://", NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	if err := server.RegisterTasks(map[string]interface{}{
		"add":  func(a, b int64) (int64, error) { return a + b, nil },
		"wait": func(ctx context.Context, ms int64) error { return nil },
	}); err != nil {
		panic(err)
	}
	worker := server.NewWorker("worker-1", 4)
	errs := make(chan error, 1)
	worker.LaunchAsync(errs)
	return server, func() { worker.Quit(); <-errs; server.Close() }
}

// One task, its result waited for under a deadline.
func ExampleServer_SendTaskWithContext() {
	server, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	sig := &tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}}}
	res, err := server.SendTaskWithContext(ctx, sig)
	if err != nil {
		panic(err)
	}
	values, err := res.GetWithContext(ctx, 5*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println(tasks.HumanReadableResults(values))
	// Output: 3
}

// A unique task: while one with the key is queued or running, another is
// refused with an error naming the holder.
func ExampleServer_SendTaskWithContext_unique() {
	server, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	later := time.Now().Add(time.Hour) // held for the hour it waits
	first, err := server.SendTaskWithContext(ctx, &tasks.Signature{Name: "wait", ETA: &later, UniqueFor: 2 * time.Hour, UniqueKey: "report:42"})
	if err != nil {
		panic(err)
	}
	_, err = server.SendTaskWithContext(ctx, &tasks.Signature{Name: "wait", UniqueFor: 2 * time.Hour, UniqueKey: "report:42"})
	var nu *tasks.NotUniqueError
	fmt.Println(errors.Is(err, tasks.ErrNotUnique), errors.As(err, &nu) && nu.Holder == first.Signature.UUID)
	// Output: true true
}

// A limit: at most two tasks of a key run at once, across every worker.
func ExampleServer_SendTaskWithContext_limit() {
	server, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var results []*result.AsyncResult
	for i := range int64(5) {
		sig := &tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: i}, {Type: "int64", Value: 10}},
			Limit: &tasks.Limit{Key: "tenant:acme", Concurrency: 2}}
		res, err := server.SendTaskWithContext(ctx, sig)
		if err != nil {
			panic(err)
		}
		results = append(results, res)
	}
	for _, r := range results {
		n, err := result.Get1[int64](ctx, r)
		if err != nil {
			panic(err)
		}
		fmt.Print(n, " ")
	}
	fmt.Println()
	// Output: 10 11 12 13 14
}
