package chaos_test

// Faults of a Redis Cluster: the master serving the queue failed over by
// an operator (CLUSTER FAILOVER) and killed (the cluster fails it over by
// itself), while work is sent and run; and machinist on a cluster that
// speaks TLS only.

import (
	"context"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestClusterFailoverLosesNothing sends chains continuously to a cluster of
// three masters with a replica each, through a Server and a worker that
// know every node, and fails over the master that serves the default
// queue's keys (they share its {hash tag}, so one master holds the whole
// queue):
//
//   - manual: CLUSTER FAILOVER, which hands over only once the replica has
//     every acknowledged write; clients of the old master get MOVED;
//   - master-killed-restarted: SIGKILL; the cluster promotes the replica
//     by itself (node timeout 1 s), and the killed node comes back as the
//     new master's replica.
//
// Every accepted send must finish, and work must flow again within 30 s of
// the cluster serving every slot. Replication is asynchronous: a killed
// master takes with it the writes it acknowledged but had not passed on
// (42 accepted chains in one run under load), so the Server runs with
// Redis.MinReplicas 1, and its writes wait for the replica. With the
// killed node left down, the promoted master has no replica: sends then
// fail, saying they may have happened, until one is back.
func TestClusterFailoverLosesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(t *testing.T, c *redistest.Cluster, key string)
	}{
		{"manual", func(t *testing.T, c *redistest.Cluster, key string) { c.Failover(t, key) }},
		{"master-killed-restarted", func(t *testing.T, c *redistest.Cluster, key string) {
			killed := c.KillMaster(t, key)
			c.Restart(t, killed)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repeat(t, func(round int) { clusterFailover(t, tc.fault) })
		})
	}
}

func clusterFailover(t *testing.T, fault func(t *testing.T, c *redistest.Cluster, key string)) {
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	cluster := redistest.StartCluster(t, redistest.WithReplicas(1))
	l := newLedger(t)
	s := l.newServer(t, cluster.URL(), "W", func(c *config.Config) { c.Redis.MinReplicas = 1 })
	l.startWorker(t, s, 10)
	key := "{" + s.GetConfig().DefaultQueue + "}" // the slot of every key of the queue
	master := cluster.MasterOf(t, key)

	stopSending := l.sendEvery(ctx, s, 5*time.Millisecond)
	defer stopSending()
	l.waitAccepted(t, 100, 30*time.Second, "before the fault")

	faultAt := time.Now()
	fault(t, cluster, key) // returns once the cluster serves every slot again
	healedAt := time.Now()
	promoted := cluster.MasterOf(t, key)
	if promoted == master {
		t.Fatalf("the queue's slot is still served by %s after the failover", master.Addr())
	}

	l.waitAccepted(t, 100, 30*time.Second, "after the failover")
	stopSending()
	rep := l.verify(t, ctx, s)

	t.Logf("queue's master %s failed over to %s in %v: %v; first chain finished %v after the cluster was whole again",
		master.Addr(), promoted.Addr(), healedAt.Sub(faultAt).Round(10*time.Millisecond), rep,
		l.firstCallbackAfter(t, ctx, healedAt))
}

// TestClusterOverTLS runs machinist on a cluster that speaks TLS only
// (clients, cluster bus, replication), with the URL
// "rediss://a,b,c" and the test CA in Redis.CACertFile: first a worker
// process configured from the environment alone (BROKER, RESULT_BACKEND,
// REDIS_CA_CERT_FILE) runs chains sent by this process; then, with a worker
// in this process too, a group and a chord.
func TestClusterOverTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	cluster := redistest.StartCluster(t, redistest.WithTLS())
	url, ca := cluster.URL(), cluster.CACertFile()
	l := newLedger(t)
	s := l.newServer(t, url, "parent", func(c *config.Config) { c.Redis.CACertFile = ca })

	// The worker process alone: every chain it runs went through TLS both
	// ways.
	const chains = 20
	l.startProcess(t, "child", 4, "BROKER="+url, "RESULT_BACKEND="+url, "REDIS_CA_CERT_FILE="+ca)
	for range chains {
		if err := l.send(ctx, s); err != nil {
			t.Fatalf("send a chain over TLS: %v", err)
		}
	}
	waitFor(t, 30*time.Second, "the worker process to run every chain", func() bool {
		_, finished := l.runsBy(t, ctx, "child")
		return finished >= chains
	})

	// Both workers: a group, and a chord whose callback runs once every
	// member has finished.
	l.startWorker(t, s, 4)
	group := workGroup(t, 6)
	groupResults, err := s.SendGroupWithContext(ctx, group, 0)
	if err != nil {
		t.Fatalf("send a group over TLS: %v", err)
	}
	for i, r := range groupResults {
		if _, err := r.GetWithContext(ctx, 10*time.Millisecond); err != nil {
			t.Errorf("group member %d (%s): %v", i, group.Tasks[i].UUID, err)
		}
	}
	chordGroup := workGroup(t, 6)
	// The callback is a run of work too (Immutable: the members' results
	// are not its arguments): the ledger's tasks are what both workers
	// have registered.
	callback := &tasks.Signature{Name: workTask, Immutable: true, Args: []tasks.Arg{
		{Type: "int64", Value: l.next.Add(1)}, {Type: "int64", Value: int64(1)},
	}}
	chord, err := tasks.NewChord(chordGroup, callback)
	if err != nil {
		t.Fatal(err)
	}
	chordResult, err := s.SendChordWithContext(ctx, chord, 0)
	if err != nil {
		t.Fatalf("send a chord over TLS: %v", err)
	}
	if _, err := chordResult.GetWithContext(ctx, 10*time.Millisecond); err != nil {
		t.Errorf("chord callback %s: %v", callback.UUID, err)
	}
	checkChordOrder(t, ctx, l, chordGroup, callback)

	rep := l.verify(t, ctx, s)
	_, byChild := l.runsBy(t, ctx, "child")
	_, byParent := l.runsBy(t, ctx, "parent")
	t.Logf("TLS cluster %s: %v; group of %d and chord of %d finished; runs by the worker process %d, in-process %d",
		url, rep, len(group.Tasks), len(chordGroup.Tasks), byChild, byParent)
}

// workGroup returns a group of n runs of work.
func workGroup(t *testing.T, n int) *tasks.Group {
	t.Helper()
	sigs := make([]*tasks.Signature, n)
	for i := range sigs {
		sigs[i] = &tasks.Signature{Name: workTask, Args: []tasks.Arg{
			{Type: "int64", Value: int64(1000 + i)}, {Type: "int64", Value: int64(5)},
		}}
	}
	g, err := tasks.NewGroup(sigs...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checkChordOrder checks, on the witness, that the chord's callback ran
// once, and only after every member had finished.
func checkChordOrder(t *testing.T, ctx context.Context, l *ledger, group *tasks.Group, callback *tasks.Signature) {
	t.Helper()
	work, _, _ := l.witnessed(t, ctx)
	cb := work[callback.UUID]
	if len(cb) != 1 {
		t.Errorf("chord callback %s ran %d times, want once", callback.UUID, len(cb))
		return
	}
	for _, m := range group.Tasks {
		runs := work[m.UUID]
		if len(runs) == 0 || runs[0].done.IsZero() {
			t.Errorf("chord member %s has no finished run", m.UUID)
			continue
		}
		// The witness keeps milliseconds: equal times are in order.
		if cb[0].started.Before(runs[0].done) {
			t.Errorf("chord callback started at %v, before member %s finished at %v",
				cb[0].started.Format(time.StampMilli), m.UUID, runs[0].done.Format(time.StampMilli))
		}
	}
}
