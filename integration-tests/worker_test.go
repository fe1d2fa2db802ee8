package integration_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// forEachQueuedPair runs test on the pairs that queue tasks for workers.
// (eager pairs queue nothing: tasks run inside Send).
func forEachQueuedPair(t *testing.T, test func(t *testing.T, p pair)) {
	t.Helper()
	var queued []pair
	for _, p := range pairs() {
		if !p.eager {
			queued = append(queued, p)
		}
	}
	forPairs(t, queued, test)
}

// bareServer returns a Server with no worker and no tasks registered.
func bareServer(t *testing.T, p pair, mutate ...func(*config.Config)) *machinery.Server {
	t.Helper()
	cnf := p.config(t)
	cnf.NoUnixSignals = true
	cnf.Logger = slog.New(slog.DiscardHandler)
	for _, m := range mutate {
		m(cnf)
	}
	s, err := machinery.NewServer(cnf)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func launch(t *testing.T, w *machinery.Worker) (stop func() error) {
	t.Helper()
	errs := make(chan error, 1)
	w.LaunchAsync(errs)
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			w.Quit()
			err = <-errs
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// sharedPair returns a pair whose Servers all share p's broker and backend,
// as processes share a Redis: on memory, a named in-process broker.
func sharedPair(t *testing.T, p pair) pair {
	base := p.config(t)
	if base.Broker == "memory://" {
		name := "memory://" + strings.ReplaceAll(t.Name(), "/", "-")
		base.Broker, base.ResultBackend = name, name
	}
	return pair{name: p.name, config: func(*testing.T) *config.Config { c := *base; return &c }}
}

// processes returns n Servers that share p's broker and backend, as n
// processes share a Redis, each configured by mutate.
func processes(t *testing.T, p pair, n int, mutate ...func(*config.Config)) []*machinery.Server {
	t.Helper()
	shared := sharedPair(t, p)
	out := make([]*machinery.Server, n)
	for i := range out {
		out[i] = bareServer(t, shared, mutate...)
	}
	return out
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestConcurrencyHonouredExactly(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		const concurrency, total = 4, 24
		var running, peak atomic.Int32
		release := make(chan struct{})
		s.RegisterTask("hold", func() error {
			n := running.Add(1)
			for {
				old := peak.Load()
				if n <= old || peak.CompareAndSwap(old, n) {
					break
				}
			}
			<-release
			running.Add(-1)
			return nil
		})
		launch(t, s.NewWorker("w", concurrency))
		ctx := testCtx(t)
		var results []*result.AsyncResult
		for i := 0; i < total; i++ {
			r, err := s.SendTaskWithContext(ctx, sig("hold"))
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, r)
		}
		waitFor(t, "the worker to fill its slots", func() bool { return running.Load() == concurrency })
		close(release)
		for _, r := range results {
			if _, err := r.GetWithContext(ctx, poll); err != nil {
				t.Fatal(err)
			}
		}
		if got := peak.Load(); got != concurrency {
			t.Fatalf("peak concurrency %d, want exactly %d", got, concurrency)
		}
	})
}

func TestSeveralWorkersOnOneServer(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		var mu sync.Mutex
		byWorker := map[string]int{}
		gate := make(chan struct{})
		var started atomic.Int32
		s.RegisterTask("who", func(ctx context.Context) error {
			started.Add(1)
			<-gate
			return nil
		})
		for _, tag := range []string{"a", "b"} {
			w := s.NewWorker(tag, 1)
			tag := tag
			w.SetPreTaskHandler(func(*tasks.Signature) {
				mu.Lock()
				byWorker[tag]++
				mu.Unlock()
			})
			launch(t, w)
		}
		ctx := testCtx(t)
		var rs []*result.AsyncResult
		for i := 0; i < 2; i++ {
			r, err := s.SendTaskWithContext(ctx, sig("who"))
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		// Each worker has one slot, so both tasks run only if both workers do.
		waitFor(t, "both workers to take a task", func() bool { return started.Load() == 2 })
		close(gate)
		for _, r := range rs {
			if _, err := r.GetWithContext(ctx, poll); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if byWorker["a"] != 1 || byWorker["b"] != 1 {
			t.Fatalf("tasks per worker %v, want one each", byWorker)
		}
	})
}

func TestQuitIsSafe(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)

		// Quit before Launch: the worker never runs, Launch returns nil.
		w := s.NewWorker("before", 1)
		w.Quit()
		if err := w.Launch(); err != nil {
			t.Fatalf("Launch after Quit: %v", err)
		}

		// Quit right after LaunchAsync, then twice more.
		w = s.NewWorker("after", 1)
		errs := make(chan error, 1)
		w.LaunchAsync(errs)
		w.Quit()
		w.Quit()
		if err := <-errs; err != nil {
			t.Fatalf("LaunchAsync after a graceful Quit sent %v, want nil", err)
		}
		w.Quit()

		// Launching the same worker twice is refused.
		w = s.NewWorker("twice", 1)
		stop := launch(t, w)
		if err := w.Launch(); !errors.Is(err, machinery.ErrWorkerLaunched) {
			t.Fatalf("second Launch: %v, want ErrWorkerLaunched", err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestGracefulShutdownRequeuesUnfinished(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p, func(c *config.Config) { c.ShutdownTimeout = 50 * time.Millisecond })
		started := make(chan struct{}, 1)
		cancelled := make(chan struct{})
		var runs atomic.Int32
		s.RegisterTask("long", func(ctx context.Context) (string, error) {
			if runs.Add(1) > 1 {
				return "second run", nil
			}
			started <- struct{}{}
			<-ctx.Done()
			close(cancelled)
			return "", ctx.Err()
		})
		ctx := testCtx(t)
		r, err := s.SendTaskWithContext(ctx, sig("long"))
		if err != nil {
			t.Fatal(err)
		}
		stop := launch(t, s.NewWorker("first", 1))
		<-started
		if err := stop(); err != nil {
			t.Fatalf("graceful stop: %v", err)
		}
		// Quit returns once the task is cancelled and requeued; the task's
		// goroutine sees the cancellation in its own time.
		select {
		case <-cancelled:
		case <-time.After(10 * time.Second):
			t.Fatal("the unfinished task's context was not cancelled after ShutdownTimeout")
		}
		pending, err := s.GetBroker().GetPendingTasks("")
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != 1 || pending[0].UUID != r.Signature.UUID {
			t.Fatalf("pending after shutdown: %d tasks, want the unfinished one", len(pending))
		}
		if st := r.GetState(); st.IsCompleted() {
			t.Fatalf("the abandoned run wrote state %s", st.State)
		}
		launch(t, s.NewWorker("second", 1))
		out, err := r.GetWithContext(ctx, poll)
		if err != nil || tasks.HumanReadableResults(out) != "second run" {
			t.Fatalf("after requeue: %v, %v", out, err)
		}
	})
}

func TestUnregisteredTaskFailsOnceWithReason(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p, func(c *config.Config) {
			c.UnregisteredTaskTries = 3
			c.UnregisteredTaskDelay = 10 * time.Millisecond
		})
		var handed atomic.Int32
		w := s.NewWorker("w", 1)
		w.SetPreConsumeHandler(func(*machinery.Worker) bool { handed.Add(1); return true })
		launch(t, w)
		ctx := testCtx(t)
		r, err := s.SendTaskWithContext(ctx, sig("nobody_has_this"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.GetWithContext(ctx, poll)
		if err == nil || !strings.Contains(err.Error(), `"nobody_has_this" is not registered`) || !strings.Contains(err.Error(), "3 tries") {
			t.Fatalf("got %v, want a failure naming the task and the tries", err)
		}
		// FAILURE is written before the task is settled in the archive.
		waitFor(t, "the task in the archive", func() bool {
			archived, err := s.GetBroker().(brokers.Inspector).ListTasks(ctx, config.DefaultQueueName, brokers.StatusArchived, 0, 10)
			return err == nil && len(archived) == 1 && archived[0].Signature.UUID == r.Signature.UUID
		})
		// Handed back with a delay, not in a hot loop.
		if n := handed.Load(); n > 10 {
			t.Fatalf("the worker fetched %d times for 3 tries", n)
		}
	})
}

func TestUnregisteredTaskIgnored(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		s.RegisterTask("noop", func() error { return nil })
		launch(t, s.NewWorker("w", 1))
		ctx := testCtx(t)
		ignored := sig("nobody_has_this")
		ignored.IgnoreWhenTaskNotRegistered = true
		if _, err := s.SendTaskWithContext(ctx, ignored); err != nil {
			t.Fatal(err)
		}
		// A task sent after it completing shows the worker got past it.
		r, err := s.SendTaskWithContext(ctx, sig("noop"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		// noop's acknowledgement follows its SUCCESS state.
		waitFor(t, "an empty queue (the ignored task dropped, not kept)", func() bool {
			info, err := s.GetBroker().(brokers.Inspector).QueueInfo(ctx, config.DefaultQueueName)
			if err != nil {
				t.Fatal(err)
			}
			return info.Pending+info.Active+info.Retry+info.Scheduled+info.Archived == 0
		})
	})
}

func TestGetOnMissingStateReturnsError(t *testing.T) {
	forEachPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		r := result.NewAsyncResult(&tasks.Signature{UUID: "task_never_sent", Name: "x"}, s.GetBackend())
		done := make(chan error, 1)
		go func() {
			_, err := r.Get(poll)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, backends.ErrStateNotFound) {
				t.Fatalf("Get: %v, want ErrStateNotFound", err)
			}
		case <-time.After(waitTimeout):
			t.Fatal("Get on a missing state is still polling")
		}
	})
}

func TestGetWithTimeout(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p) // no worker: the task stays pending
		r, err := s.SendTask(sig("add"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetWithTimeout(20*time.Millisecond, poll); !errors.Is(err, result.ErrTimeoutReached) {
			t.Fatalf("GetWithTimeout: %v, want ErrTimeoutReached", err)
		}
	})
}

func TestHandlers(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		s.RegisterTask("fail", func() error { return errors.New("handled") })
		var pre, post, published atomic.Int32
		handled := make(chan error, 1)
		s.SetPreTaskHandler(func(*tasks.Signature) { published.Add(1) })
		w := s.NewWorker("w", 1)
		w.SetPreTaskHandler(func(*tasks.Signature) { pre.Add(1) })
		w.SetPostTaskHandler(func(*tasks.Signature) { post.Add(1) })
		w.SetErrorHandler(func(err error) { handled <- err })
		launch(t, w)
		r, err := s.SendTask(sig("fail"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetWithContext(testCtx(t), poll); err == nil {
			t.Fatal("want the task's error")
		}
		if err := <-handled; err.Error() != "handled" {
			t.Fatalf("error handler got %v", err)
		}
		if published.Load() != 1 || pre.Load() != 1 || post.Load() != 1 {
			t.Fatalf("handlers ran publish=%d pre=%d post=%d, want 1 each", published.Load(), pre.Load(), post.Load())
		}
	})
}

func TestPeriodicTaskFiresOncePerTickAcrossServers(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		shared := sharedPair(t, p)
		var mu sync.Mutex
		var fires []string // the UUIDs of the tasks run, one per tick
		var servers []*machinery.Server
		for i := 0; i < 2; i++ {
			s := bareServer(t, shared)
			s.RegisterTask("tick", func(ctx context.Context) error {
				mu.Lock()
				fires = append(fires, tasks.SignatureFromContext(ctx).UUID)
				mu.Unlock()
				return nil
			})
			if err := s.RegisterPeriodicTask("@every 1s", "ticker", sig("tick")); err != nil {
				t.Fatal(err)
			}
			servers = append(servers, s)
		}
		launch(t, servers[0].NewWorker("w", 2))
		waitFor(t, "three ticks", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(fires) >= 3
		})
		mu.Lock()
		defer mu.Unlock()
		// Both Servers schedule every second, and derive a tick's task
		// UUID from the tick: a tick sent by both would run its UUID twice.
		seen := map[string]bool{}
		for i, id := range fires {
			if seen[id] {
				t.Fatalf("tick task %s ran twice (run %d of %q): a tick fired twice", id, i, fires)
			}
			seen[id] = true
		}
		if err := servers[1].RegisterPeriodicTask("not a spec", "bad", sig("tick")); err == nil {
			t.Fatal("a bad cron spec was accepted")
		}
	})
}

// runOrder sends n "which" tasks to each of queues before any worker
// runs, then launches worker and returns the queues in the order the tasks
// ran.
func runOrder(t *testing.T, s *machinery.Server, worker *machinery.Worker, n int, queues ...string) []string {
	t.Helper()
	var mu sync.Mutex
	var order []string
	s.RegisterTask("which", func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, tasks.SignatureFromContext(ctx).RoutingKey)
		return nil
	})
	ctx := testCtx(t)
	var results []*result.AsyncResult
	for _, q := range queues {
		for i := 0; i < n; i++ {
			r, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "which", RoutingKey: q})
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, r)
		}
	}
	launch(t, worker)
	for _, r := range results {
		if _, err := r.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), order...)
}

func TestStrictPriorityQueues(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		w := s.NewQueuesWorker("strict", 1, map[string]int{"high": 2, "low": 1}, true)
		order := runOrder(t, s, w, 5, "low", "high")
		want := []string{"high", "high", "high", "high", "high", "low", "low", "low", "low", "low"}
		if !reflect.DeepEqual(order, want) {
			t.Fatalf("ran in queue order %v, want every high task first", order)
		}
	})
}

func TestWeightedQueuesDoNotStarve(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		w := s.NewQueuesWorker("weighted", 1, map[string]int{"heavy": 3, "light": 1}, false)
		order := runOrder(t, s, w, 40, "heavy", "light")
		if len(order) != 80 {
			t.Fatalf("%d tasks ran, want 80", len(order))
		}
		// Under strict priority light would wait for all 40 heavy tasks;
		// weighted, it comes first a quarter of the time (the chance of no
		// light task among the first 40 is 0.75^40, about 1e-5).
		firstLight := -1
		heavyInFirst40 := 0
		for i, q := range order {
			if q == "light" && firstLight < 0 {
				firstLight = i
			}
			if i < 40 && q == "heavy" {
				heavyInFirst40++
			}
		}
		if firstLight < 0 || firstLight >= 40 {
			t.Fatalf("first light task ran at %d: light was starved", firstLight)
		}
		if heavyInFirst40 < 18 {
			t.Fatalf("only %d of the first 40 tasks were heavy, want about 30", heavyInFirst40)
		}
	})
}

func TestUnstorableResultFailsOnce(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		var runs atomic.Int32
		s.RegisterTask("nan", func() (float64, error) {
			runs.Add(1)
			return math.NaN(), nil
		})
		launch(t, s.NewWorker("w", 1))
		ctx := testCtx(t)
		r, err := s.SendTaskWithContext(ctx, sig("nan"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.GetWithContext(ctx, poll)
		if err == nil || !strings.Contains(err.Error(), "task results cannot be stored") {
			t.Fatalf("got %v, want a failure saying the results cannot be stored", err)
		}
		waitFor(t, "the task in the archive", func() bool {
			archived, err := s.GetBroker().(brokers.Inspector).ListTasks(ctx, config.DefaultQueueName, brokers.StatusArchived, 0, 10)
			return err == nil && len(archived) == 1
		})
		if n := runs.Load(); n != 1 {
			t.Fatalf("the task ran %d times, want once", n)
		}
	})
}

func TestPeriodicTicksAreTasksOfTheirOwn(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		var mu sync.Mutex
		seen := map[string]bool{}
		s.RegisterTask("tick", func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			seen[tasks.SignatureFromContext(ctx).UUID] = true
			return nil
		})
		// A signature with a UUID set (tasks.NewSignature sets one): every
		// tick must still be a task of its own.
		tick, err := tasks.NewSignature("tick", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterPeriodicTask("@every 1s", "ticks", tick); err != nil {
			t.Fatal(err)
		}
		launch(t, s.NewWorker("w", 1))
		waitFor(t, "two ticks with distinct UUIDs", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen) >= 2
		})
		mu.Lock()
		defer mu.Unlock()
		if seen[tick.UUID] {
			t.Fatal("a tick reused the registered signature's UUID")
		}
	})
}

// A message that cannot be decoded (written by another program) fails
// once: its state becomes FAILURE with the decoding error (it was left
// PENDING), it is archived with that reason, and the error handler hears
// of it.
func TestUndecodableMessageFailsWithTheReason(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	prefix := strings.TrimSuffix(srv.Prefix(t), ":")
	s := bareServer(t, pair{config: func(*testing.T) *config.Config { return redisConfig(srv.URL(), prefix) }})
	ctx := testCtx(t)
	client := srv.Client(t)
	queue := config.DefaultQueueName
	if err := client.HSet(ctx, prefix+":{"+queue+"}:t:task_bad", "msg", "{not json", "state", "pending").Err(); err != nil {
		t.Fatal(err)
	}
	if err := client.RPush(ctx, prefix+":{"+queue+"}:pending", "task_bad").Err(); err != nil {
		t.Fatal(err)
	}
	handled := make(chan error, 4)
	w := s.NewWorker("undecodable", 1)
	w.SetErrorHandler(func(err error) { handled <- err })
	launch(t, w)

	select {
	case err := <-handled:
		if !strings.Contains(err.Error(), "task_bad") || !strings.Contains(err.Error(), "cannot decode") {
			t.Fatalf("error handler got %v, want the task and the decoding error", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the error handler never heard of the undecodable task")
	}
	waitFor(t, "the undecodable task's state to be FAILURE", func() bool {
		st, err := s.GetBackend().(backends.ContextBackend).GetStateContext(ctx, "task_bad")
		return err == nil && st.State == tasks.StateFailure && strings.Contains(st.Error, "cannot decode")
	})
	// The state is written before the task is archived: wait for both.
	waitFor(t, "the undecodable task archived with the decoding error", func() bool {
		archived, err := s.GetBroker().(brokers.Inspector).ListTasks(ctx, queue, brokers.StatusArchived, 0, 10)
		return err == nil && len(archived) == 1 && archived[0].Signature.UUID == "task_bad" &&
			strings.Contains(archived[0].LastError, "cannot decode")
	})
}

// Workers that register different tasks share a queue, as in machinery's
// TestWorkerOnlyConsumesRegisteredTaskRedis: each task reaches a worker
// that has it, rerouted at once by one that does not; none waits for the
// hand-back delay (a minute here, longer than the test may take).
func TestWorkersWithDifferentTasksShareAQueue(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		shared := sharedPair(t, p)
		slow := func(c *config.Config) { c.UnregisteredTaskDelay = time.Minute }
		adder, multiplier := bareServer(t, shared, slow), bareServer(t, shared, slow)
		adder.RegisterTask("add", func(a, b int64) (int64, error) { return a + b, nil })
		multiplier.RegisterTask("multiply", func(a, b int64) (int64, error) { return a * b, nil })
		ctx := testCtx(t)

		// The adder runs (it announced its tasks before its first fetch)
		// before the multiplier starts.
		launch(t, adder.NewWorker("adder", 4))
		r, err := adder.SendTaskWithContext(ctx, sig("add", int64Arg(1), int64Arg(1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetWithContext(ctx, poll); err != nil {
			t.Fatal(err)
		}
		// Started: the multiplier has announced its tasks; a task taken
		// by the adder before then would wait the hand-back delay.
		m := multiplier.NewWorker("multiplier", 4)
		launch(t, m)
		<-m.Started()

		var results []*result.AsyncResult
		var want []int64
		for i := int64(1); i <= 20; i++ {
			group, err := tasks.NewGroup(sig("multiply", int64Arg(i), int64Arg(5)), sig("add", int64Arg(i), int64Arg(3)))
			if err != nil {
				t.Fatal(err)
			}
			rs, err := adder.SendGroupWithContext(ctx, group, 10)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, rs...)
			want = append(want, i*5, i+3)
		}
		for i, r := range results {
			out, err := r.GetWithContext(ctx, poll)
			if err != nil {
				t.Fatalf("%s: %v", r.Signature.Name, err)
			}
			if got := out[0].Int(); got != want[i] {
				t.Fatalf("%s = %d, want %d", r.Signature.Name, got, want[i])
			}
		}
	})
}
