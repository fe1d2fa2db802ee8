package redisbroker_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	"github.com/b6192125/machinist/v1/tasks"
)

// replicatedBroker returns a broker on srv whose writes wait for one
// replica (Redis.MinReplicas 1), for at most 100 ms.
func replicatedBroker(t *testing.T, srv *redistest.Server) *redisbroker.Broker {
	t.Helper()
	client := srv.Client(t)
	cnf := (&config.Config{
		Broker:        srv.URL(),
		ResultBackend: srv.URL(),
		Redis:         &config.RedisConfig{MinReplicas: 1},
	}).WithDefaults()
	opts := dial.Options(cnf)
	opts.ReplicaTimeout = 100 * time.Millisecond
	store := rdb.New(client, opts, false)
	broker := redisbroker.NewOnStore(store, redisbroker.OptionsFrom(cnf))
	t.Cleanup(func() {
		_ = broker.Close()
		_ = store.Close()
	})
	return broker
}

// TestMinReplicasWritesReachTheReplica: with MinReplicas 1, what a send, a
// fetch and an acknowledgement wrote is on the replica when they return.
func TestMinReplicasWritesReachTheReplica(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	master := redistest.Start(t)
	_, port, _ := strings.Cut(master.Addr(), ":")
	replica := redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", port, "--repl-diskless-sync-delay", "0"))
	rc := replica.Client(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica is not in sync after 10 s: %v %s", err, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
	b := replicatedBroker(t, master)
	const n = 20
	for i := range n {
		sig := &tasks.Signature{UUID: "task_r" + strconv.Itoa(i), Name: "add", RoutingKey: "q"}
		if err := b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{sig}}); err != nil {
			t.Fatalf("PublishPending: %v", err)
		}
		// On the replica already: no wait between the reply and the read.
		if got, err := rc.Exists(ctx, "machinist:{q}:t:"+sig.UUID).Result(); err != nil || got != 1 {
			keys, _ := rc.Keys(ctx, "*").Result()
			t.Fatalf("task %s on the replica right after the send: %d, %v (keys %v)", sig.UUID, got, err, keys)
		}
	}
	ds, err := b.Fetch(ctx, []string{"q"}, n, nil)
	if err != nil || len(ds) != n {
		t.Fatalf("Fetch: %d deliveries, %v", len(ds), err)
	}
	if got, err := rc.ZCard(ctx, "machinist:{q}:lease").Result(); err != nil || got != n {
		t.Fatalf("leases on the replica right after the fetch: %d, %v; want %d", got, err, n)
	}
	for _, d := range ds {
		if err := b.Ack(ctx, d); err != nil {
			t.Fatalf("Ack: %v", err)
		}
	}
	if got, err := rc.ZCard(ctx, "machinist:{q}:lease").Result(); err != nil || got != 0 {
		t.Fatalf("leases on the replica right after the acknowledgements: %d, %v; want 0", got, err)
	}

	// A replica that stops answering holds the send back until it is
	// back: the send is not reported before the replica has it.
	heldBackByPausedReplica(t, replica, func() error {
		return b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{{UUID: "task_held", Name: "add", RoutingKey: "q"}}})
	})
}

// heldBackByPausedReplica pauses replica for 300 ms while send runs: send
// must not return before the replica is back, and must then succeed.
func heldBackByPausedReplica(t *testing.T, replica *redistest.Server, send func() error) {
	t.Helper()
	replica.Pause(t)
	done := make(chan error, 1)
	go func() { done <- send() }()
	time.Sleep(300 * time.Millisecond) // the fault: the replica paused for 300 ms
	select {
	case err := <-done:
		t.Fatalf("a send returned (%v) while the replica was paused", err)
	default:
	}
	replica.Resume(t)
	if err := <-done; err != nil {
		t.Fatalf("the send held back by the paused replica: %v, want success once it was back", err)
	}
}

// TestMinReplicasWithoutReplicaSaysSo: with MinReplicas 1 and no replica,
// a send fails with an error wrapping rdb.ErrNotReplicated, which says it
// may have happened (the master has it).
func TestMinReplicasWithoutReplicaSaysSo(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	srv := redistest.Start(t)
	b := replicatedBroker(t, srv)
	sig := &tasks.Signature{UUID: "task_lonely", Name: "add", RoutingKey: "q"}
	err := b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{sig}})
	if !errors.Is(err, rdb.ErrNotReplicated) {
		t.Fatalf("PublishPending with no replica: %v, want an error wrapping rdb.ErrNotReplicated", err)
	}
	if got, _ := srv.Client(t).Exists(context.Background(), "machinist:{q}:t:"+sig.UUID).Result(); got != 1 {
		t.Errorf("the master does not have the task: the error should not have said it may have happened")
	}
}

// TestMinReplicasOnCluster: on Redis Cluster each node's pipelines end with
// WAIT; a send whose slot's replica stops answering is held back until it
// is back.
func TestMinReplicasOnCluster(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	cluster := redistest.StartCluster(t, redistest.WithReplicas(1))
	cnf := (&config.Config{
		Broker:        cluster.URL(),
		ResultBackend: cluster.URL(),
		Redis:         &config.RedisConfig{MinReplicas: 1, ReadTimeout: 4},
	}).WithDefaults()
	b, err := redisbroker.Dial(cluster.URL(), cnf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if err := b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{{UUID: "task_c1", Name: "add", RoutingKey: "q"}}}); err != nil {
		t.Fatalf("PublishPending: %v", err)
	}
	heldBackByPausedReplica(t, cluster.ReplicasOf(t, "{q}")[0], func() error {
		return b.PublishPending(ctx, store.SendParams{Tasks: []*tasks.Signature{{UUID: "task_c2", Name: "add", RoutingKey: "q"}}})
	})
}
