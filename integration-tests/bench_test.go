package integration_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/b6192125/machinist/internal/redistest"
	machinist "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// BenchmarkEndToEnd measures tasks per second through a Server and a
// Worker on one Redis, results stored and leases in force: b.N no-op tasks
// are sent first, then a worker runs them, timed until the b.N-th call.
func BenchmarkEndToEnd(b *testing.B) {
	for _, concurrency := range []int{10, 100} {
		b.Run(fmt.Sprintf("redis/concurrency=%d", concurrency), func(b *testing.B) {
			srv := redistest.Start(b)
			cnf := redisConfig(srv.URL(), "bench:")
			cnf.NoUnixSignals = true
			cnf.Logger = slog.New(slog.DiscardHandler)
			benchEndToEnd(b, cnf, concurrency)
		})
	}
	b.Run("memory/concurrency=10", func(b *testing.B) {
		benchEndToEnd(b, &config.Config{NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)}, 10)
	})
}

func benchEndToEnd(b *testing.B, cnf *config.Config, concurrency int) {
	s, err := machinist.NewServer(cnf)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var calls atomic.Int64
	done := make(chan struct{})
	n := int64(b.N)
	if err := s.RegisterTask("noop", func() error {
		if calls.Add(1) == n {
			close(done)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < b.N; i += 8 {
				if _, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "noop"}); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	w := s.NewWorker("bench", concurrency)
	b.ResetTimer()
	werrs := make(chan error, 1)
	w.LaunchAsync(werrs)
	<-done
	b.StopTimer()
	w.Quit()
	if err := <-werrs; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}
