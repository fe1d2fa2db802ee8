package redistest_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
)

func TestStartSentinel(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := redistest.StartSentinel(t)

	addrs := g.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs() = %v, want 3 addresses", addrs)
	}
	for _, a := range addrs {
		if host, port, err := net.SplitHostPort(a); err != nil || host != "127.0.0.1" || port == "26379" {
			t.Errorf("sentinel address %q: want 127.0.0.1 and a port other than 26379", a)
		}
	}
	if want := "redis://" + strings.Join(addrs, ","); g.URL() != want {
		t.Errorf("URL() = %q, want %q", g.URL(), want)
	}

	master, replica := g.Master(t), g.Replica(t)
	if master == replica {
		t.Fatalf("Master() and Replica() are the same server, %s", master.Addr())
	}
	if got := info(t, master.Client(t), "replication"); got["role"] != "master" || got["connected_slaves"] != "1" {
		t.Errorf("master %s: role:%s connected_slaves:%s, want master and 1", master.Addr(), got["role"], got["connected_slaves"])
	}
	if got := info(t, replica.Client(t), "replication"); got["role"] != "slave" ||
		got["master_port"] != port(t, master.Addr()) || got["master_link_status"] != "up" {
		t.Errorf("replica %s: role:%s master_port:%s master_link_status:%s, want a replica of %s in sync",
			replica.Addr(), got["role"], got["master_port"], got["master_link_status"], master.Addr())
	}
	for _, a := range addrs {
		sc := redis.NewSentinelClient(&redis.Options{Addr: a})
		m, err := sc.Master(ctx, redistest.SentinelMaster).Result()
		_ = sc.Close()
		if err != nil {
			t.Fatalf("sentinel %s: SENTINEL MASTER %s: %v", a, redistest.SentinelMaster, err)
		}
		if m["num-other-sentinels"] != "2" || m["num-slaves"] != "1" || m["quorum"] != "2" ||
			net.JoinHostPort(m["ip"], m["port"]) != master.Addr() {
			t.Errorf("sentinel %s: SENTINEL MASTER = %v, want master %s, 1 replica, 2 other sentinels, quorum 2",
				a, m, master.Addr())
		}
	}

	// A client that knows only the sentinels writes to the master, and
	// the write reaches the replica.
	rdb := g.Client(t)
	writeAndRead(t, rdb, "k", "v")
	if n, err := rdb.Wait(ctx, 1, 0).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 0 = %d, %v; want 1 replica", n, err)
	}
	if got, err := replica.Client(t).Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("GET k on the replica = %q, %v; want \"v\"", got, err)
	}
}

func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := redistest.StartSentinel(t)
	rdb := g.Client(t)

	// Fail over twice: to the replica, and back to the first master.
	for round := range 2 {
		before, replica := g.Master(t), g.Replica(t)
		key := fmt.Sprintf("before-%d", round)
		writeAndRead(t, rdb, key, "v")
		// Make sure the replica has it: a failover loses what the replica
		// has not received.
		if n, err := rdb.Wait(ctx, 1, 0).Result(); err != nil || n != 1 {
			t.Fatalf("WAIT 1 0 = %d, %v; want 1 replica", n, err)
		}

		after := g.Failover(t)
		if after != replica || g.Master(t) != replica {
			t.Fatalf("round %d: master after Failover = %s, want the former replica %s", round, after.Addr(), replica.Addr())
		}
		if g.Replica(t) != before {
			t.Fatalf("round %d: replica after Failover = %s, want the former master %s", round, g.Replica(t).Addr(), before.Addr())
		}
		if got := info(t, after.Client(t), "replication")["role"]; got != "master" {
			t.Errorf("round %d: new master %s: role:%s", round, after.Addr(), got)
		}
		if got := info(t, before.Client(t), "replication"); got["role"] != "slave" ||
			got["master_port"] != port(t, after.Addr()) || got["master_link_status"] != "up" {
			t.Errorf("round %d: former master %s: role:%s master_port:%s master_link_status:%s, want a replica of %s in sync",
				round, before.Addr(), got["role"], got["master_port"], got["master_link_status"], after.Addr())
		}
		if got, err := rdb.Get(ctx, key).Result(); err != nil || got != "v" {
			t.Errorf("round %d: GET %s after the failover = %q, %v; want \"v\"", round, key, got, err)
		}
		// The failover client follows: it writes to the new master.
		writeAndRead(t, rdb, fmt.Sprintf("after-%d", round), "w")
		if got, err := after.Client(t).Get(ctx, fmt.Sprintf("after-%d", round)).Result(); err != nil || got != "w" {
			t.Errorf("round %d: GET after-%d on the new master = %q, %v; want \"w\"", round, round, got, err)
		}
	}
}

func TestSentinelKillMaster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	g := redistest.StartSentinel(t)
	rdb := g.Client(t)
	before, replica := g.Master(t), g.Replica(t)
	writeAndRead(t, rdb, "k", "v")
	if n, err := rdb.Wait(ctx, 1, 0).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 0 = %d, %v; want 1 replica", n, err)
	}

	start := time.Now()
	killed := g.KillMaster(t)
	t.Logf("replica promoted %v after the master was killed", time.Since(start).Round(time.Millisecond))
	if killed != before {
		t.Fatalf("KillMaster killed %s, want the master %s", killed.Addr(), before.Addr())
	}
	if after := g.Master(t); after != replica {
		t.Fatalf("master after KillMaster = %s, want the former replica %s", after.Addr(), replica.Addr())
	}
	if got := info(t, replica.Client(t), "replication")["role"]; got != "master" {
		t.Errorf("promoted replica %s: role:%s", replica.Addr(), got)
	}
	// The failover client follows the promotion.
	writeAndRead(t, rdb, "promoted", "p")

	g.Restart(t, killed)
	if got := info(t, before.Client(t), "replication"); got["role"] != "slave" ||
		got["master_port"] != port(t, replica.Addr()) || got["master_link_status"] != "up" {
		t.Errorf("killed master %s: role:%s master_port:%s master_link_status:%s, want a replica of %s in sync",
			before.Addr(), got["role"], got["master_port"], got["master_link_status"], replica.Addr())
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("GET k after the failover = %q, %v; want \"v\"", got, err)
	}
	writeAndRead(t, rdb, "after", "w")
	// The restarted server replicates the new master.
	if n, err := rdb.Wait(ctx, 1, 0).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 0 = %d, %v; want 1 replica", n, err)
	}
	if got, err := before.Client(t).Get(ctx, "after").Result(); err != nil || got != "w" {
		t.Errorf("GET after on the restarted server = %q, %v; want \"w\"", got, err)
	}
}

// writeAndRead sets key to value through rdb and reads it back.
func writeAndRead(t *testing.T, rdb *redis.Client, key, value string) {
	t.Helper()
	ctx := t.Context()
	if err := rdb.Set(ctx, key, value, 0).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
	if got, err := rdb.Get(ctx, key).Result(); err != nil || got != value {
		t.Fatalf("GET %s = %q, %v; want %q", key, got, err, value)
	}
}

// port returns the port of addr.
func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
