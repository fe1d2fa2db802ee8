package machinery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// A chain is cancelled while its first step runs, by the UUID of a step
// that has not been sent yet: the running step's context ends, and no
// later step runs.
func ExampleServer_CancelWorkflow() {
	server, err := machinery.NewServer(&config.Config{Broker: "memory://", NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer server.Close()
	running := make(chan struct{})
	server.RegisterTask("crawl", func(ctx context.Context, url string) (string, error) {
		close(running)
		<-ctx.Done() // a long crawl, until cancelled
		return "", ctx.Err()
	})
	server.RegisterTask("index", func(page string) error {
		fmt.Println("indexed", page) // never printed
		return nil
	})
	worker := server.NewWorker("crawler", 2)
	errs := make(chan error, 1)
	worker.LaunchAsync(errs)
	defer func() { worker.Quit(); <-errs }()

	crawl := &tasks.Signature{Name: "crawl", Args: []tasks.Arg{{Type: "string", Value: "https://example.com"}}}
	index := &tasks.Signature{Name: "index"}
	chain, err := tasks.NewChain(crawl, index)
	if err != nil {
		panic(err)
	}
	r, err := server.SendChain(chain)
	if err != nil {
		panic(err)
	}
	<-running
	if err := server.CancelWorkflow(context.Background(), index.UUID); err != nil {
		panic(err)
	}
	_, err = r.Get(time.Millisecond)
	fmt.Println("chain cancelled:", errors.Is(err, tasks.ErrTaskCancelled))
	state, err := server.GetBackend().GetState(index.UUID)
	if err != nil {
		panic(err)
	}
	fmt.Println("index:", state.State)
	// Output:
	// chain cancelled: true
	// index: FAILURE
}
