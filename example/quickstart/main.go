// Command quickstart shows machinist end to end with no Redis: it registers
// tasks, starts a worker, and sends a task, a chain, a group, a chord, a task
// that is retried, and a delayed task, printing each result.
//
//	go run ./example/quickstart
//
// The same program runs on Redis when BROKER and RESULT_BACKEND say so
// (e.g. BROKER=redis://localhost:6379), because the config comes from the
// environment; with BROKER unset it chooses the in-process memory broker.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	cnf, err := config.NewFromEnvironment()
	if err != nil {
		return err
	}
	if cnf.Broker == "" {
		// NewServer refuses an unset Broker; this program runs whole in
		// one process, so the in-process broker serves it.
		cnf.Broker = "memory://"
	}
	cnf.NoUnixSignals = true
	cnf.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	server, err := machinery.NewServer(cnf)
	if err != nil {
		return err
	}
	defer server.Close()

	var flakyCalls atomic.Int32
	err = server.RegisterTasks(map[string]interface{}{
		"add": func(args ...int64) (int64, error) {
			var sum int64
			for _, a := range args {
				sum += a
			}
			return sum, nil
		},
		"multiply": func(args ...int64) (int64, error) {
			product := int64(1)
			for _, a := range args {
				product *= a
			}
			return product, nil
		},
		"upper": func(ctx context.Context, s string) (string, error) {
			return strings.ToUpper(s), nil
		},
		// flaky fails twice, then succeeds: ErrRetryTaskLater asks for a
		// retry after a delay.
		"flaky": func() (string, error) {
			if n := flakyCalls.Add(1); n < 3 {
				return "", tasks.NewErrRetryTaskLater(fmt.Sprintf("attempt %d failed", n), 100*time.Millisecond)
			}
			return "succeeded on attempt 3", nil
		},
		"now": func() (string, error) { return time.Now().Format("15:04:05.000"), nil },
		// sum_all adds up an aggregated batch of numbers.
		"sum_all": func(key string, numbers []int64) (string, error) {
			var sum int64
			for _, n := range numbers {
				sum += n
			}
			return fmt.Sprintf("%s: %d numbers, sum %d", key, len(numbers), sum), nil
		},
	})
	if err != nil {
		return err
	}
	// Members of "count" sent with the same AggregationKey run as one
	// sum_all, 5 at a time (or 200ms after the last one joined).
	err = server.RegisterAggregator("count", machinery.AggregationPolicy{MaxSize: 5, GracePeriod: 200 * time.Millisecond},
		func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
			numbers := make([]int64, len(members))
			for i, m := range members {
				// On Redis, values arrive as JSON decodes them (numbers as
				// json.Number): ReflectValue converts to the Arg's Type.
				v, err := tasks.ReflectValue(m.Args[0].Type, m.Args[0].Value)
				if err != nil {
					return nil, err
				}
				numbers[i] = v.Int()
			}
			return &tasks.Signature{Name: "sum_all", Args: []tasks.Arg{{Type: "string", Value: key}, {Type: "[]int64", Value: numbers}}}, nil
		})
	if err != nil {
		return err
	}

	worker := server.NewWorker("quickstart", 10)
	errs := make(chan error, 1)
	worker.LaunchAsync(errs)
	defer func() {
		worker.Quit()
		if err := <-errs; err != nil {
			log.Print(err)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const poll = 5 * time.Millisecond

	// A task.
	add := &tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}}}
	res, err := server.SendTaskWithContext(ctx, add)
	if err != nil {
		return err
	}
	out, err := res.GetWithContext(ctx, poll)
	if err != nil {
		return err
	}
	fmt.Printf("task:    add(1, 2) = %v\n", tasks.HumanReadableResults(out))

	// A chain: add(1, 1), then add(5, 5, <2>), then multiply(4, <12>).
	chain, err := tasks.NewChain(
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 1}}},
		&tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: 5}, {Type: "int64", Value: 5}}},
		&tasks.Signature{Name: "multiply", Args: []tasks.Arg{{Type: "int64", Value: 4}}},
	)
	if err != nil {
		return err
	}
	chainRes, err := server.SendChainWithContext(ctx, chain)
	if err != nil {
		return err
	}
	if out, err = chainRes.GetWithContext(ctx, poll); err != nil {
		return err
	}
	fmt.Printf("chain:   multiply(4, add(5, 5, add(1, 1))) = %v\n", tasks.HumanReadableResults(out))

	// A group: three tasks in parallel.
	group, err := tasks.NewGroup(
		&tasks.Signature{Name: "upper", Args: []tasks.Arg{{Type: "string", Value: "machinist"}}},
		&tasks.Signature{Name: "upper", Args: []tasks.Arg{{Type: "string", Value: "runs"}}},
		&tasks.Signature{Name: "upper", Args: []tasks.Arg{{Type: "string", Value: "groups"}}},
	)
	if err != nil {
		return err
	}
	groupRes, err := server.SendGroupWithContext(ctx, group, 0)
	if err != nil {
		return err
	}
	var words []string
	for _, r := range groupRes {
		out, err := r.GetWithContext(ctx, poll)
		if err != nil {
			return err
		}
		words = append(words, tasks.HumanReadableResults(out))
	}
	fmt.Printf("group:   %s\n", strings.Join(words, " "))

	// A chord: add(1..10) in parallel, then sum them with add.
	var members []*tasks.Signature
	for i := int64(1); i <= 10; i++ {
		members = append(members, &tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "int64", Value: i}, {Type: "int64", Value: i}}})
	}
	chordGroup, err := tasks.NewGroup(members...)
	if err != nil {
		return err
	}
	chord, err := tasks.NewChord(chordGroup, &tasks.Signature{Name: "add"})
	if err != nil {
		return err
	}
	chordRes, err := server.SendChordWithContext(ctx, chord, 0)
	if err != nil {
		return err
	}
	if out, err = chordRes.GetWithContext(ctx, poll); err != nil {
		return err
	}
	fmt.Printf("chord:   add(2, 4, ..., 20) = %v\n", tasks.HumanReadableResults(out))

	// A task that fails twice and is retried.
	res, err = server.SendTaskWithContext(ctx, &tasks.Signature{Name: "flaky"})
	if err != nil {
		return err
	}
	if out, err = res.GetWithContext(ctx, poll); err != nil {
		return err
	}
	fmt.Printf("retry:   flaky() = %v\n", tasks.HumanReadableResults(out))

	// A task delayed by 500ms: it never runs before its ETA.
	sentAt := time.Now()
	eta := sentAt.Add(500 * time.Millisecond)
	res, err = server.SendTaskWithContext(ctx, &tasks.Signature{Name: "now", ETA: &eta})
	if err != nil {
		return err
	}
	if out, err = res.GetWithContext(ctx, poll); err != nil {
		return err
	}
	fmt.Printf("delayed: sent at %s with ETA %s, ran at %v\n",
		sentAt.Format("15:04:05.000"), eta.Format("15:04:05.000"), tasks.HumanReadableResults(out))

	// Aggregation: five small tasks run as one, once a worker has told
	// the broker it aggregates them.
	<-worker.Started()
	var last *result.AsyncResult
	for i := int64(1); i <= 5; i++ {
		sig := &tasks.Signature{Name: "count", AggregationKey: "visits", Args: []tasks.Arg{{Type: "int64", Value: i}}}
		if last, err = server.SendTaskWithContext(ctx, sig); err != nil {
			return err
		}
	}
	if out, err = last.GetWithContext(ctx, poll); err != nil {
		return err
	}
	fmt.Printf("batch:   %v\n", tasks.HumanReadableResults(out))

	// Arguments that do not fit the function fail the task with a reason
	// (and archive it) instead of panicking or hanging.
	res, err = server.SendTaskWithContext(ctx, &tasks.Signature{Name: "add", Args: []tasks.Arg{{Type: "string", Value: "one"}}})
	if err != nil {
		return err
	}
	if _, err = res.GetWithContext(ctx, poll); err == nil {
		return errors.New("add(\"one\") should have failed")
	}
	fmt.Printf("failure: add(\"one\") failed: %v\n", err)
	return nil
}
