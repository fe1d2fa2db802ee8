package integration_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// BenchmarkEndToEnd measures tasks per second through a Server and a
// Worker on one Redis, results stored and leases in force: b.N no-op tasks
// are sent first, then a worker runs them, timed until the b.N-th call.
func BenchmarkEndToEnd(b *testing.B) {
	for _, concurrency := range []int{10, 100} {
		b.Run(fmt.Sprintf("redis/concurrency=%d", concurrency), func(b *testing.B) {
			cnf, rdb := benchRedis(b)
			var before redisStats
			benchEndToEnd(b, cnf, concurrency, func() { before = readRedisStats(b, rdb) })
			reportRedisCost(b, rdb, before, b.N)
		})
	}
	b.Run("memory/concurrency=10", func(b *testing.B) {
		benchEndToEnd(b, &config.Config{Broker: "memory://", NoUnixSignals: true, Logger: slog.New(slog.DiscardHandler)}, 10, nil)
	})
}

// benchRedis starts a Redis of the benchmark's own and returns a config of
// broker and backend on it, and a client for reading its statistics.
func benchRedis(b *testing.B) (*config.Config, *goredis.Client) {
	srv := redistest.Start(b)
	cnf := redisConfig(srv.URL(), "bench:")
	cnf.NoUnixSignals = true
	cnf.Logger = slog.New(slog.DiscardHandler)
	return cnf, srv.Client(b)
}

// benchServer returns a Server on cnf, closed when the benchmark ends.
func benchServer(b *testing.B, cnf *config.Config) *machinery.Server {
	s, err := machinery.NewServer(cnf)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// reportRedisCost reports Redis commands and CPU per task since before.
func reportRedisCost(b *testing.B, rdb *goredis.Client, before redisStats, tasks int) {
	after := readRedisStats(b, rdb)
	b.ReportMetric(float64(after.calls-before.calls)/float64(tasks), "redis-cmds/task")
	b.ReportMetric((after.cpu-before.cpu)*1e6/float64(tasks), "redis-cpu-µs/task")
}

// redisStats are the counters of INFO that the benchmark reports per task.
type redisStats struct {
	calls int64   // commands run, those inside scripts included
	cpu   float64 // seconds of CPU, user and system
}

func readRedisStats(b *testing.B, rdb *goredis.Client) redisStats {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats", "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var s redisStats
	for _, line := range strings.Split(info, "\r\n") {
		switch {
		case strings.HasPrefix(line, "cmdstat_"):
			_, rest, _ := strings.Cut(line, ":calls=")
			n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
			s.calls += n
		case strings.HasPrefix(line, "used_cpu_sys:"), strings.HasPrefix(line, "used_cpu_user:"):
			_, v, _ := strings.Cut(line, ":")
			f, _ := strconv.ParseFloat(v, 64)
			s.cpu += f
		}
	}
	return s
}

// benchEndToEnd sends b.N no-op tasks, calls started (when not nil) just
// before the timed part, and runs them on a worker.
func benchEndToEnd(b *testing.B, cnf *config.Config, concurrency int, started func()) {
	s := benchServer(b, cnf)
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
	if started != nil {
		started()
	}
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

// BenchmarkSendGroup10000 is the bulk path: a group of 10,000 tasks sent
// with one SendGroup (states and tasks in batches of 1,000).
func BenchmarkSendGroup10000(b *testing.B) {
	cnf, rdb := benchRedis(b)
	s := benchServer(b, cnf)
	ctx := context.Background()
	const size = 10000
	before := readRedisStats(b, rdb)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sigs := make([]*tasks.Signature, size)
		for j := range sigs {
			sigs[j] = &tasks.Signature{Name: "noop", Args: []tasks.Arg{{Type: "int64", Value: j}}}
		}
		group, err := tasks.NewGroup(sigs...)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := s.SendGroupWithContext(ctx, group, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "tasks/s")
	reportRedisCost(b, rdb, before, b.N*size)
}

// BenchmarkSendTask sends tasks one at a time from one goroutine, results
// stored (the PENDING state and the task in one round trip).
func BenchmarkSendTask(b *testing.B) {
	cnf, _ := benchRedis(b)
	s := benchServer(b, cnf)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "noop"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}
