package chaos_test

// Faults of a Redis Sentinel group: the master failed over by an operator
// (SENTINEL FAILOVER) and killed (the sentinels fail it over by
// themselves), while work is sent and run through the sentinels.

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestSentinelFailoverLosesNothing sends chains continuously to a Sentinel
// group (a master, a replica, three sentinels), through a Server and two
// workers, one in this process and one a process configured from the
// environment alone (BROKER and RESULT_BACKEND with the sentinels'
// addresses, REDIS_MASTER_NAME, REDIS_MIN_REPLICAS), and fails the master
// over: by SENTINEL FAILOVER, and by SIGKILL, after which the sentinels
// promote the replica by themselves (down after 2 s) and the killed server
// comes back as a replica. Every accepted send must finish, once.
//
// Redis replication is asynchronous, and SENTINEL FAILOVER neither waits
// for the replica to catch up nor stops the master: the replica is
// promoted while the master still takes writes, until the master's clients
// hear of the switch (+switch-master) and the master is made a replica of
// the new one, discarding what it took meanwhile. With Redis.MinReplicas 0
// (the default) that lost 13–151 of 600–810 accepted sends in each of 16
// runs, and ran callbacks of tasks whose run was discarded. So the group
// runs with MinReplicas 1: every write machinist counts on waits until the
// replica has it, and one the replica did not confirm is sent again.
func TestSentinelFailoverLosesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  []redistest.Option
		fault func(t *testing.T, g *redistest.Sentinel)
	}{
		{"manual", nil, func(t *testing.T, g *redistest.Sentinel) { g.Failover(t) }},
		{"master-killed", nil, func(t *testing.T, g *redistest.Sentinel) {
			killed := g.KillMaster(t)
			g.Restart(t, killed) // back as the new master's replica
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repeat(t, func(round int) { sentinelFailover(t, tc.opts, tc.fault) })
		})
	}
}

func sentinelFailover(t *testing.T, opts []redistest.Option, fault func(t *testing.T, g *redistest.Sentinel)) {
	ctx, cancel := context.WithTimeout(context.Background(), chaosTimeout)
	defer cancel()
	g := redistest.StartSentinel(t, opts...)
	url := g.URL()
	l := newLedger(t)
	s := l.newServer(t, url, "W", func(c *config.Config) {
		c.Redis.MasterName = redistest.SentinelMaster
		c.Redis.MinReplicas = 1
	})
	l.startWorker(t, s, 10)
	l.startProcess(t, "P", 10, "BROKER="+url, "RESULT_BACKEND="+url,
		"REDIS_MASTER_NAME="+redistest.SentinelMaster, "REDIS_MIN_REPLICAS=1")
	master, replica := g.Master(t), g.Replica(t)

	stopSending := l.sendEvery(ctx, s, 5*time.Millisecond)
	waitFor(t, 30*time.Second, "work to flow through both workers", func() bool {
		n, _ := l.counts()
		_, byProcess := l.runsBy(t, ctx, "P")
		return n >= 100 && byProcess > 0
	})

	roles := watchRoles(t, master, replica)
	faultAt := time.Now()
	fault(t, g) // returns once the group is whole again
	healedAt := time.Now()
	if now := g.Master(t); now != replica {
		t.Fatalf("master after the failover is %s, want the former replica %s", now.Addr(), replica.Addr())
	}
	promoted, lastMaster := roles()

	l.waitAccepted(t, 100, 30*time.Second, "after the failover")
	stopSending()
	rep := l.verify(t, ctx, s)

	// Both servers take writes from the promotion until the former master
	// becomes a replica; a killed master takes none.
	twoMasters := max(lastMaster.Sub(promoted), 0)
	// The figures need Redis even if verify used up ctx waiting.
	fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer fcancel()
	first := "(none)"
	if at := l.firstKeptAfter(t, fctx, s, promoted); !at.IsZero() {
		first = at.Sub(faultAt).Round(time.Millisecond).String()
	}
	t.Logf("master %s failed over to %s: promoted %v after the fault began, two masters for %v, group whole again after %v; "+
		"%v; first chain the new master keeps finished %v after the fault began",
		master.Addr(), replica.Addr(), promoted.Sub(faultAt).Round(10*time.Millisecond), twoMasters.Round(10*time.Millisecond),
		healedAt.Sub(faultAt).Round(10*time.Millisecond), rep, first)
}

// firstKeptAfter returns when the first chain finished, at or after since,
// whose outcome Redis kept: of the accepted chains whose callback's state
// is SUCCESS, the witnessed run of the callback that returned the result
// kept (the latest, if several did). A chain that finished on a former
// master, and was discarded with what it took, does not count. It returns
// the zero time if there is none.
func (l *ledger) firstKeptAfter(t *testing.T, ctx context.Context, s *machinery.Server, since time.Time) time.Time {
	t.Helper()
	_, after, _ := l.witnessed(t, ctx)
	l.mu.Lock()
	sends := slices.Clone(l.sends)
	l.mu.Unlock()
	var first time.Time
	for _, snd := range sends {
		if snd.err != nil {
			continue
		}
		st, err := s.GetBackend().(backends.ContextBackend).GetStateContext(ctx, snd.after.UUID)
		if err != nil || st.State != tasks.StateSuccess || len(st.Results) != 1 {
			continue
		}
		kept, _ := st.Results[0].Value.(string)
		var at time.Time
		for _, r := range after[snd.after.UUID] {
			if r.id == kept && r.started.After(at) {
				at = r.started
			}
		}
		if !at.Before(since) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first
}

// watchRoles polls the master and the replica (INFO replication) until
// the master reports itself a replica, and returns a function that returns
// when the replica first reported role:master and when the master last
// did (zero if it has not yet).
func watchRoles(t *testing.T, master, replica *redistest.Server) func() (promoted, lastMaster time.Time) {
	t.Helper()
	var promoted, lastMaster atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	// watch polls srv's role until stop returns true.
	watch := func(srv *redistest.Server, stop func(role string, at int64) bool) {
		// A client of its own that fails fast while srv is down.
		c := goredis.NewClient(&goredis.Options{
			Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond,
			ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		})
		wg.Go(func() {
			defer func() { _ = c.Close() }()
			ticker := time.NewTicker(5 * time.Millisecond)
			defer ticker.Stop()
			for {
				var role string
				if info, err := c.Info(ctx, "replication").Result(); err == nil {
					_, rest, _ := strings.Cut(info, "role:")
					role, _, _ = strings.Cut(rest, "\r\n")
				}
				if stop(role, time.Now().UnixNano()) {
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-ticker.C:
				}
			}
		})
	}
	watch(replica, func(role string, at int64) bool {
		if role == "master" {
			promoted.Store(at)
			return true
		}
		return false
	})
	watch(master, func(role string, at int64) bool {
		if role == "master" {
			lastMaster.Store(at)
		}
		return role == "slave"
	})
	at := func(ns int64) time.Time {
		if ns == 0 {
			return time.Time{}
		}
		return time.Unix(0, ns)
	}
	return func() (time.Time, time.Time) { return at(promoted.Load()), at(lastMaster.Load()) }
}
