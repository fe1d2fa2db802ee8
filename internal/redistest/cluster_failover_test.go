package redistest_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
)

// failoverKey is the key the failover tests write and fail over; {b} is in
// the first master's slots (3300).
const failoverKey = "counter:{b}"

func TestClusterWithReplicas(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.StartCluster(t, redistest.WithReplicas(1))

	nodes := cluster.Nodes()
	if len(nodes) != 6 || len(cluster.Addrs()) != 6 {
		t.Fatalf("%d nodes, %d addresses; want 3 masters and 3 replicas", len(nodes), len(cluster.Addrs()))
	}
	masters, replicas := 0, 0
	for _, n := range nodes {
		rdb := n.Client(t)
		fields := clusterInfo(t, rdb)
		if fields["cluster_state"] != "ok" || fields["cluster_slots_ok"] != "16384" || fields["cluster_known_nodes"] != "6" {
			t.Errorf("%s: cluster_state:%s cluster_slots_ok:%s cluster_known_nodes:%s; want ok, 16384, 6",
				n.Addr(), fields["cluster_state"], fields["cluster_slots_ok"], fields["cluster_known_nodes"])
		}
		if got := configGet(t, rdb, "cluster-node-timeout"); got != "1000" {
			t.Errorf("%s: cluster-node-timeout %s, want 1000", n.Addr(), got)
		}
		repl := info(t, rdb, "replication")
		switch repl["role"] {
		case "master":
			masters++
			if repl["connected_slaves"] != "1" {
				t.Errorf("master %s: connected_slaves:%s, want 1", n.Addr(), repl["connected_slaves"])
			}
		case "slave":
			replicas++
			if repl["master_link_status"] != "up" || repl["master_sync_in_progress"] != "0" {
				t.Errorf("replica %s: master_link_status:%s master_sync_in_progress:%s; want in sync",
					n.Addr(), repl["master_link_status"], repl["master_sync_in_progress"])
			}
		}
	}
	if masters != 3 || replicas != 3 {
		t.Errorf("%d masters and %d replicas, want 3 and 3", masters, replicas)
	}

	// The accessors agree with the cluster itself.
	rdb := cluster.Client(t)
	for _, key := range []string{"{a}", "{b}", "{c}"} {
		master := cluster.MasterOf(t, key)
		rs := cluster.ReplicasOf(t, key)
		if len(rs) != 1 || rs[0] == master {
			t.Fatalf("ReplicasOf(%q) = %v, want one node other than the master %s", key, addrs(rs), master.Addr())
		}
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := slotOwner(t, rdb, int(slot)); got != master.Addr() {
			t.Errorf("MasterOf(%q) = %s, CLUSTER SHARDS says %s", key, master.Addr(), got)
		}
		if got := info(t, rs[0].Client(t), "replication")["master_port"]; master.Addr() != "127.0.0.1:"+got {
			t.Errorf("ReplicasOf(%q)[0] = %s replicates port %s, want %s", key, rs[0].Addr(), got, master.Addr())
		}
	}
}

func TestStartRefusesReplicas(t *testing.T) {
	t.Parallel()
	got := runFatal(t, func(tb testing.TB) { redistest.Start(tb, redistest.WithReplicas(1)) })
	if want := "redistest: WithReplicas is an option of StartCluster, not of Start"; got != want {
		t.Errorf("Start(WithReplicas(1)) failed with %q, want %q", got, want)
	}
}

// counterWriter INCRs a key as fast as it can until stopped, and records
// how many INCRs were acknowledged and how many failed (which may or may not
// have been applied).
type counterWriter struct {
	acked, failed int
	lastErr       error
	stop          context.CancelFunc
	done          chan struct{}
	mu            sync.Mutex
}

func startCounterWriter(t *testing.T, rdb *redis.ClusterClient, key string) *counterWriter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &counterWriter{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			err := rdb.Incr(ctx, key).Err()
			if ctx.Err() != nil && err != nil {
				w.mu.Lock()
				w.failed++ // cut by stop: unknown
				w.mu.Unlock()
				return
			}
			w.mu.Lock()
			if err != nil {
				w.failed++
				w.lastErr = err
			} else {
				w.acked++
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.halt)
	return w
}

func (w *counterWriter) counts() (acked, failed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked, w.failed
}

// waitAcked waits until n more INCRs have been acknowledged than now.
func (w *counterWriter) waitAcked(t *testing.T, n int) {
	t.Helper()
	from, _ := w.counts()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if acked, _ := w.counts(); acked >= from+n {
			return
		}
		if time.Now().After(deadline) {
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Fatalf("fewer than %d INCRs acknowledged in 10 s (acked %d, failed %d, last error %v)", n, w.acked-from, w.failed, w.lastErr)
		}
		select {
		case <-w.done:
			t.Fatal("the writer stopped")
		case <-time.After(time.Millisecond):
		}
	}
}

func (w *counterWriter) halt() {
	w.stop()
	<-w.done
}

func TestClusterFailoverKeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.StartCluster(t, redistest.WithReplicas(1))
	rdb := cluster.Client(t)
	key := cluster.Prefix(t) + failoverKey

	old := cluster.MasterOf(t, key)
	replica := cluster.ReplicasOf(t, key)[0]
	w := startCounterWriter(t, rdb, key)
	w.waitAcked(t, 100)

	promoted := cluster.Failover(t, key)

	if promoted != replica {
		t.Errorf("Failover promoted %s, want the replica %s", promoted.Addr(), replica.Addr())
	}
	if got := cluster.MasterOf(t, key); got != promoted {
		t.Errorf("after Failover, MasterOf = %s, want the promoted %s", got.Addr(), promoted.Addr())
	}
	if got := cluster.ReplicasOf(t, key); !slices.Equal(got, []*redistest.Server{old}) {
		t.Errorf("after Failover, ReplicasOf = %v, want the old master %s", addrs(got), old.Addr())
	}
	if role := info(t, promoted.Client(t), "replication")["role"]; role != "master" {
		t.Errorf("promoted %s has role %s", promoted.Addr(), role)
	}
	w.waitAcked(t, 100) // writes go on, through MOVED, to the new master
	w.halt()

	acked, failed := w.counts()
	got, err := rdb.Get(ctx, key).Int()
	if err != nil {
		t.Fatal(err)
	}
	// A coordinated failover loses no acknowledged write; a failed INCR
	// may or may not have been applied.
	if got < acked || got > acked+failed {
		t.Errorf("counter = %d after %d acknowledged and %d failed INCRs; want %d to %d", got, acked, failed, acked, acked+failed)
	}
	t.Logf("failover %s → %s: %d INCRs acknowledged, %d failed, counter %d", old.Addr(), promoted.Addr(), acked, failed, got)
}

func TestClusterKillMasterPromotesReplica(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.StartCluster(t, redistest.WithReplicas(1))
	rdb := cluster.Client(t)
	key := cluster.Prefix(t) + failoverKey

	master := cluster.MasterOf(t, key)
	replica := cluster.ReplicasOf(t, key)[0]
	// WAIT: the replica has the key before the crash, so that it must
	// survive the failover.
	if err := rdb.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := master.Client(t).Wait(ctx, 1, 5000).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v; want the replica to acknowledge", n, err)
	}

	killed := cluster.KillMaster(t, key)

	if killed != master {
		t.Errorf("KillMaster killed %s, want the master %s", killed.Addr(), master.Addr())
	}
	if got := cluster.MasterOf(t, key); got != replica {
		t.Errorf("after KillMaster, MasterOf = %s, want the replica %s", got.Addr(), replica.Addr())
	}
	// A new client: rdb still routes the slot to the dead master (go-redis
	// reloads its slot map on MOVED, or every 60 s, not on a refused
	// connection).
	rdb = cluster.Client(t)
	if got, err := rdb.Get(ctx, key).Result(); err != nil || got != "before" {
		t.Errorf("GET after the failover = %q, %v; want \"before\"", got, err)
	}
	if err := rdb.Set(ctx, key, "after", 0).Err(); err != nil {
		t.Errorf("SET after the failover: %v", err)
	}

	// Back from the dead, the old master is the new one's replica.
	cluster.Restart(t, killed)
	if got := cluster.ReplicasOf(t, key); !slices.Equal(got, []*redistest.Server{killed}) {
		t.Errorf("after Restart, ReplicasOf = %v, want the restarted %s", addrs(got), killed.Addr())
	}
	repl := info(t, killed.Client(t), "replication")
	if repl["role"] != "slave" || "127.0.0.1:"+repl["master_port"] != replica.Addr() || repl["master_link_status"] != "up" {
		t.Errorf("restarted %s: role:%s master_port:%s master_link_status:%s; want a replica of %s, in sync",
			killed.Addr(), repl["role"], repl["master_port"], repl["master_link_status"], replica.Addr())
	}
	if got, err := rdb.Get(ctx, key).Result(); err != nil || got != "after" {
		t.Errorf("GET after the restart = %q, %v; want \"after\"", got, err)
	}
}

func TestFailoverNeedsReplicas(t *testing.T) {
	t.Parallel()
	cluster := redistest.SharedCluster(t)
	for name, fn := range map[string]func(testing.TB){
		"Failover":   func(tb testing.TB) { cluster.Failover(tb, "{a}") },
		"KillMaster": func(tb testing.TB) { cluster.KillMaster(tb, "{a}") },
	} {
		got := runFatal(t, fn)
		if want := "redistest: " + name + " needs a cluster started WithReplicas"; got != want {
			t.Errorf("%s on a cluster without replicas failed with %q, want %q", name, got, want)
		}
	}
}

func configGet(t testing.TB, rdb *redis.Client, name string) string {
	t.Helper()
	got, err := rdb.ConfigGet(context.Background(), name).Result()
	if err != nil {
		t.Fatalf("CONFIG GET %s: %v", name, err)
	}
	return got[name]
}

// slotOwner returns the address of the master that CLUSTER SHARDS says
// serves slot.
func slotOwner(t testing.TB, rdb *redis.ClusterClient, slot int) string {
	t.Helper()
	shards, err := rdb.ClusterShards(context.Background()).Result()
	if err != nil {
		t.Fatalf("CLUSTER SHARDS: %v", err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if int(r.Start) <= slot && slot <= int(r.End) {
				for _, n := range sh.Nodes {
					if n.Role == "master" {
						return n.IP + ":" + strconv.Itoa(int(max(n.Port, n.TLSPort)))
					}
				}
			}
		}
	}
	t.Fatalf("CLUSTER SHARDS: no master serves slot %d", slot)
	return ""
}

func addrs(nodes []*redistest.Server) []string {
	var a []string
	for _, n := range nodes {
		a = append(a, n.Addr())
	}
	return a
}
