package integration_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/backends/result"
	"github.com/b6192125/machinist/v1/tasks"
)

// A key limited to 3 at once, with 20 worker slots in 4 processes: the
// tasks themselves count how many of them run at once, and it is never
// more than 3 (and 3 is reached: the first three hold until all three
// run). Tasks over the limit are not failures: every one succeeds once.
func TestLimitConcurrencyAcrossProcesses(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 5)
		sender, workers := s[0], s[1:]
		const total, limit = 40, 3
		var running, peak, runs atomic.Int32
		gate := make(chan struct{})
		for _, w := range workers {
			if err := w.RegisterTask("call", func(ctx context.Context, i int64) (int64, error) {
				n := running.Add(1)
				defer running.Add(-1)
				runs.Add(1)
				for old := peak.Load(); n > old && !peak.CompareAndSwap(old, n); old = peak.Load() {
				}
				select {
				case <-gate:
				case <-ctx.Done():
					return 0, ctx.Err()
				}
				return i, nil
			}); err != nil {
				t.Fatal(err)
			}
			launch(t, w.NewWorker("w", 5))
		}
		ctx := testCtx(t)
		results := make([]*result.AsyncResult, total)
		for i := range total {
			sig := sig("call", i64(int64(i)))
			sig.Limit = &tasks.Limit{Key: "api.example.com", Concurrency: limit}
			r, err := sender.SendTaskWithContext(ctx, sig)
			if err != nil {
				t.Fatal(err)
			}
			results[i] = r
		}
		waitFor(t, "three tasks of the key to run at once", func() bool { return running.Load() == limit })
		close(gate)
		for i, r := range results {
			out, err := r.GetWithContext(ctx, poll)
			if err != nil || out[0].Int() != int64(i) {
				t.Fatalf("task %d: %v, %v", i, out, err)
			}
		}
		if got := peak.Load(); got != limit {
			t.Fatalf("at most %d tasks of the key ran at once, want %d", got, limit)
		}
		if got := runs.Load(); got != total {
			t.Fatalf("%d runs, want %d (a task over the limit is not retried or failed)", got, total)
		}
	})
}

// A key limited to 5 starts per 500 ms, across 3 processes: 10 tasks
// start one every 100 ms, so the last starts at least 900 ms after the
// first (less what the worker's own latency took from the first start).
func TestLimitRateAcrossProcesses(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := processes(t, p, 3)
		sender, workers := s[0], s[1:]
		var mu sync.Mutex
		var starts []time.Time
		for _, w := range workers {
			if err := w.RegisterTask("call", func() error {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			launch(t, w.NewWorker("w", 4))
		}
		ctx := testCtx(t)
		var last *result.AsyncResult
		for range 10 {
			sig := sig("call")
			sig.Limit = &tasks.Limit{Key: "mail", Rate: 5, Per: 500 * time.Millisecond}
			r, err := sender.SendTaskWithContext(ctx, sig)
			if err != nil {
				t.Fatal(err)
			}
			last = r
		}
		if _, err := last.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "every task to start", func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) == 10 })
		mu.Lock()
		defer mu.Unlock()
		slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
		if span := starts[9].Sub(starts[0]); span < 800*time.Millisecond {
			t.Fatalf("10 tasks limited to 5 per 500 ms started within %v", span)
		}
	})
}

// A limit that cannot be applied is refused at send time.
func TestBadLimitIsRefused(t *testing.T) {
	s := bareServer(t, pairs()[0])
	for _, l := range []tasks.Limit{
		{Concurrency: 1},
		{Key: "k"},
		{Key: "k", Concurrency: -1},
		{Key: "k", Rate: -1, Per: time.Second},
		{Key: "k", Rate: 1},
		{Key: "k", Concurrency: 1, Per: time.Second},
	} {
		sig := sig("call")
		sig.Limit = &l
		if _, err := s.SendTask(sig); !errors.Is(err, tasks.ErrBadLimit) {
			t.Errorf("SendTask with limit %+v: %v, want ErrBadLimit", l, err)
		}
	}
}
