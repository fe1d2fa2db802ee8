package machinery_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Tasks sent with an AggregationKey are held until their group is due, then
// run as one task that the registered aggregator builds: here, one digest
// per recipient for each batch of notifications.
func ExampleServer_RegisterAggregator() {
	server, err := machinery.NewServer(&config.Config{Broker: "memory://", NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer server.Close()

	// The task that runs once per batch.
	server.RegisterTask("send_digest", func(to string, lines []string) (string, error) {
		return fmt.Sprintf("to %s: %s", to, strings.Join(lines, "; ")), nil
	})
	// A group of "notify" members is released at 3 members, or a second
	// after its newest member joined.
	err = server.RegisterAggregator("notify", machinery.AggregationPolicy{MaxSize: 3, GracePeriod: time.Second},
		func(ctx context.Context, recipient string, members []*tasks.Signature) (*tasks.Signature, error) {
			lines := make([]string, len(members))
			for i, m := range members {
				lines[i] = m.Args[0].Value.(string)
			}
			return &tasks.Signature{Name: "send_digest", Args: []tasks.Arg{
				{Type: "string", Value: recipient},
				{Type: "[]string", Value: lines},
			}}, nil
		})
	if err != nil {
		panic(err)
	}
	worker := server.NewWorker("digests", 2)
	errs := make(chan error, 1)
	worker.LaunchAsync(errs)
	defer func() { worker.Quit(); <-errs }()
	<-worker.Started() // members are accepted once a worker aggregates them

	var last *result.AsyncResult
	for _, text := range []string{"build passed", "review requested", "deploy done"} {
		last, err = server.SendTask(&tasks.Signature{Name: "notify", AggregationKey: "alice@example.com",
			Args: []tasks.Arg{{Type: "string", Value: text}}})
		if err != nil {
			panic(err)
		}
	}
	// A member's result is its aggregate's.
	out, err := last.Get(time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println(tasks.HumanReadableResults(out))
	// Output: to alice@example.com: build passed; review requested; deploy done
}
