package machinery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Many independent tasks in one call, an error per task that was not
// sent, in the order given.
func ExampleServer_SendTasks() {
	server, err := machinery.NewServer(&config.Config{Broker: "memory://", NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer server.Close()
	if err := server.RegisterTask("square", func(n int64) (int64, error) { return n * n, nil }); err != nil {
		panic(err)
	}
	worker := server.NewWorker("worker-1", 4)
	errs := make(chan error, 1)
	worker.LaunchAsync(errs)
	defer func() { worker.Quit(); <-errs }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var sigs []*tasks.Signature
	for n := range int64(4) {
		sig, err := tasks.NewSignatureOf("square", n)
		if err != nil {
			panic(err)
		}
		sigs = append(sigs, sig)
	}
	twice := *sigs[1] // the same UUID again: refused on its own
	sigs = append(sigs, &twice)

	results, err := server.SendTasks(ctx, sigs)
	var batch *machinery.SendTasksError
	if errors.As(err, &batch) {
		for i, err := range batch.Errs {
			if err != nil {
				fmt.Printf("task %d not sent: duplicate %t\n", i, errors.Is(err, brokers.ErrDuplicateTask))
			}
		}
	}
	for _, r := range results[:4] {
		n, err := result.Get1[int64](ctx, r)
		if err != nil {
			panic(err)
		}
		fmt.Print(n, " ")
	}
	fmt.Println()
	// Output:
	// task 4 not sent: duplicate true
	// 0 1 4 9
}
