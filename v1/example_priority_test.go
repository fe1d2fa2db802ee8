package machinery_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Priorities, then fair turns between tenants: sent before a worker that
// runs one task at a time starts, the urgent task runs first, then the
// tenants take turns, each in the order it sent.
func ExampleServer_SendTaskWithContext_priorityAndFairKey() {
	server, err := machinery.NewServer(&config.Config{Broker: "memory://", NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer server.Close()
	var mu sync.Mutex
	var ran []string
	if err := server.RegisterTask("render", func(page string) error {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, page)
		return nil
	}); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	send := func(page, tenant string, priority uint8) *result.AsyncResult {
		sig := &tasks.Signature{Name: "render", Args: []tasks.Arg{{Type: "string", Value: page}}, FairKey: tenant, Priority: priority}
		res, err := server.SendTaskWithContext(ctx, sig)
		if err != nil {
			panic(err)
		}
		return res
	}
	var results []*result.AsyncResult
	for _, page := range []string{"a1", "a2", "a3"} {
		results = append(results, send(page, "tenant-a", 0))
	}
	results = append(results, send("b1", "tenant-b", 0), send("b2", "tenant-b", 0), send("urgent", "tenant-b", 9))

	worker := server.NewWorker("worker-1", 1)
	errs := make(chan error, 1)
	worker.LaunchAsync(errs)
	defer func() { worker.Quit(); <-errs }()
	for _, r := range results {
		if _, err := r.GetWithContext(ctx, 5*time.Millisecond); err != nil {
			panic(err)
		}
	}
	fmt.Println(strings.Join(ran, " "))
	// Output: urgent a1 b1 a2 b2 a3
}
