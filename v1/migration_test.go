package machinery_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/machineryredis"
	"github.com/b6192125/machinist/v1/tasks"
)

// machinerySender is a Server that sends as machinery v1's does, on its
// Redis broker and backend: PENDING under the task's UUID, the message
// RPUSHed to the queue's list or, with an ETA, added to delayed_tasks.
func machinerySender(t *testing.T, srv *redistest.Server, queue string) *machinery.Server {
	t.Helper()
	cnf := (&config.Config{DefaultQueue: queue, Logger: slog.New(slog.DiscardHandler), NoUnixSignals: true}).WithDefaults()
	conn, err := rdb.DialMachinery(srv.URL(), rdb.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := machinery.NewServerWithBrokerBackendLock(cnf,
		machineryredis.NewBroker(conn, cnf), machineryredis.NewBackend(conn, cnf), nil)
	t.Cleanup(func() { s.Close(); conn.Close() })
	return s
}

// In the migration mode a machinist worker runs what a machinery program
// sends to machinery's queues (tasks, chains, chords, ETAs) and writes
// the results where machinery's clients read them, while it runs the
// tasks sent to machinist as before.
func TestMigrationModeRunsMachineryTasks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const queue = "machinery_tasks"
	sender := machinerySender(t, srv, queue)
	s := newServer(t, &config.Config{Broker: srv.URL(), DefaultQueue: queue,
		MachineryBroker: srv.URL(), NoUnixSignals: true,
		Redis: &config.RedisConfig{NormalTasksPollPeriod: 50, DelayedTasksPollPeriod: 20}})
	registerArithmetic(t, s, map[string]any{"now": func() (int64, error) { return time.Now().UnixNano(), nil }})
	w := s.NewWorker("migrating", 4)
	wait := launch(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sendWorkflows(ctx, t, sender)
	r, err := sender.SendTaskWithContext(ctx, add(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetWithContext(ctx, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var st tasks.TaskState
	raw, err := srv.Client(t).Get(ctx, r.Signature.UUID).Bytes()
	if err != nil || json.Unmarshal(raw, &st) != nil || st.State != tasks.StateSuccess || st.TaskName != "add" {
		t.Fatalf("machinery's state key %s holds %s (%v); want SUCCESS of add", r.Signature.UUID, raw, err)
	}

	// now returns when it ran.
	eta := time.Now().Add(100 * time.Millisecond)
	lr, err := sender.SendTaskWithContext(ctx, &tasks.Signature{Name: "now", ETA: &eta})
	if err != nil {
		t.Fatal(err)
	}
	got, err := lr.GetWithContext(ctx, 5*time.Millisecond)
	if err != nil {
		t.Fatalf("machinery task with an ETA: %v", err)
	}
	if ran := time.Unix(0, got[0].Int()); ran.Before(eta) {
		t.Fatalf("the task with an ETA ran at %v, %v before it", ran, eta.Sub(ran))
	}

	// A task sent to machinist runs as before, beside them.
	own, err := s.SendTaskWithContext(ctx, add(2, 3))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := own.GetWithContext(ctx, 5*time.Millisecond); err != nil || got[0].Int() != 5 {
		t.Fatalf("machinist task: %v, %v; want 5", got, err)
	}

	w.Quit()
	if err := wait(); err != nil {
		t.Fatalf("worker stopped with %v", err)
	}
	c := srv.Client(t)
	for _, key := range []string{queue, config.DefaultDelayedTasksKey} {
		if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Errorf("machinery's %s still holds tasks (%d, %v)", key, n, err)
		}
	}
}

// A machinery task whose name the migrating worker lacks goes back to
// machinery's queue for a worker that has it, as machinery's do; once the
// name is registered, it runs.
func TestMigrationModeLeavesUnknownTasks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const queue = "legacy"
	sender := machinerySender(t, srv, queue)
	s := newServer(t, &config.Config{Broker: srv.URL(), DefaultQueue: queue,
		MachineryBroker: srv.URL(), NoUnixSignals: true,
		Redis: &config.RedisConfig{NormalTasksPollPeriod: 20}})
	if err := s.RegisterTask("known", func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unknown, err := sender.SendTaskWithContext(ctx, &tasks.Signature{Name: "unknown"})
	if err != nil {
		t.Fatal(err)
	}
	known, err := sender.SendTaskWithContext(ctx, &tasks.Signature{Name: "known"})
	if err != nil {
		t.Fatal(err)
	}
	w := s.NewWorker("migrating", 1)
	wait := launch(t, w)
	if _, err := known.GetWithContext(ctx, 5*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	w.Quit()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	pending, err := sender.GetBroker().GetPendingTasks(queue)
	if err != nil || len(pending) != 1 || pending[0].UUID != unknown.Signature.UUID {
		t.Fatalf("machinery's queue holds %v (%v); want the unknown task back", pending, err)
	}
	if st, err := sender.GetBackend().GetState(unknown.Signature.UUID); err != nil || st.State != tasks.StatePending {
		t.Fatalf("the unknown task's state is %+v (%v); want PENDING", st, err)
	}

	w = s.NewWorker("migrating", 1)
	wait = launch(t, w)
	defer func() { w.Quit(); _ = wait() }()
	started(t, w)
	if err := s.RegisterTask("unknown", func() (string, error) { return "now known", nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := unknown.GetWithContext(ctx, 5*time.Millisecond); err != nil || got[0].String() != "now known" {
		t.Fatalf("the task once registered: %v, %v", got, err)
	}
}

// A MachineryBroker that is not Redis is refused, and a worker in the
// migration mode refuses a Redis Cluster.
func TestMigrationModeConfig(t *testing.T) {
	t.Parallel()
	_, err := machinery.NewServer(&config.Config{Broker: "memory://", MachineryBroker: "amqp://guest@localhost"})
	if err == nil {
		t.Fatal("a MachineryBroker that is not Redis was accepted")
	}
	s := newServer(t, &config.Config{Broker: "memory://", MachineryBroker: "redis://127.0.0.1:1",
		NoUnixSignals: true, Redis: &config.RedisConfig{ClusterMode: true}})
	err = s.NewWorker("w", 1).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Cluster") {
		t.Fatalf("a worker in the migration mode on a Cluster ran: %v", err)
	}
}

// A graceful stop cancels a machinery task still running after
// ShutdownTimeout and waits for it to write its outcome: here a retry,
// back in machinery's queue, before Quit returns.
func TestMigrationModeStopRetriesCancelledTasks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const queue = "legacy_stop"
	sender := machinerySender(t, srv, queue)
	s := newServer(t, &config.Config{Broker: srv.URL(), DefaultQueue: queue,
		MachineryBroker: srv.URL(), NoUnixSignals: true, ShutdownTimeout: 50 * time.Millisecond})
	running := make(chan struct{})
	if err := s.RegisterTask("slow", func(ctx context.Context) error {
		close(running)
		<-ctx.Done()
		return ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := s.NewWorker("migrating", 1)
	wait := launch(t, w)
	r, err := sender.SendTaskWithContext(ctx, &tasks.Signature{Name: "slow", RetryCount: 1, RetryTimeout: 60})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-running:
	case <-ctx.Done():
		t.Fatal("the slow task did not start")
	}
	w.Quit()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	delayed, err := sender.GetBroker().GetDelayedTasks()
	if err != nil || len(delayed) != 1 || delayed[0].UUID != r.Signature.UUID {
		t.Fatalf("machinery's delayed tasks after Quit: %v (%v); want the cancelled task's retry", delayed, err)
	}
}
