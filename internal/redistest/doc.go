// Package redistest starts real Redis servers for tests, so that no test
// depends on a server someone left running (nor touches one: a Redis on
// 127.0.0.1:6379 is never used).
//
// Every server is a redis-server process of the test's own, on a free
// loopback port and in a temporary directory, shut down and removed when
// the test (or the test binary) ends. redis-server and redis-cli must be on
// PATH: `make test` installs them (scripts/ensure-redis.sh), and a test run
// without them fails saying what to install. No test skips.
//
// # A server per test
//
// Start gives a test a server nobody else uses. It is the choice for tests
// that stop, kill or reconfigure the server, and costs a few milliseconds:
//
//	func TestRecoversAfterCrash(t *testing.T) {
//		t.Parallel()
//		srv := redistest.Start(t, redistest.WithAOF())
//		rdb := srv.Client(t)
//		if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
//			t.Fatal(err)
//		}
//		srv.Kill(t)    // SIGKILL, as a crash
//		srv.Restart(t) // same port and directory: the AOF is reloaded
//		// rdb reconnects; "k" is still there.
//	}
//
// By default nothing is written to disk (`--save "" --appendonly no`).
// WithAOF makes every acknowledged write survive Kill; WithArgs passes any
// other redis-server argument. Stop shuts the server down gracefully
// (SHUTDOWN); Restart starts it again where it was; Pause and Resume
// freeze and thaw it (SIGSTOP, SIGCONT), as a hung server.
//
// # Network faults
//
// StartProxy puts a TCP proxy in front of a server: LoseNextReply (or
// LoseReplyTo, for the next command containing a text) lets a command
// reach Redis and loses its reply; HoldCommandTo holds the next command
// containing a text back, on its connection alone, until its Release
// (Replied says when it has run); SetDelay slows every chunk each way;
// Stall holds all traffic until Unstall; CutAll closes every connection.
//
// # One server per test binary
//
// Most tests only read and write keys. They share one server, started on
// first use by Shared, and isolate themselves with Prefix: a key prefix of
// the test's own ("t<counter>-<random>:") whose keys are deleted (SCAN
// MATCH prefix* and UNLINK) when the test finishes. So they run in parallel
// and leave the server empty. The package's TestMain must call RunMain,
// which stops the shared servers after the last test:
//
//	func TestMain(m *testing.M) {
//		os.Exit(redistest.RunMain(m))
//	}
//
//	func TestEnqueue(t *testing.T) {
//		t.Parallel()
//		srv := redistest.Shared(t)
//		rdb := srv.Client(t)
//		prefix := srv.Prefix(t)
//		// Every key the test (or the code under test) uses starts with
//		// prefix, e.g. prefix+"{default}:pending".
//	}
//
// A test on a shared server must not Stop, Kill or Restart it, nor run
// commands that reach beyond its own keys (FLUSHALL, FLUSHDB, CONFIG SET,
// KEYS or SCAN without its prefix): those tests use Start.
//
// # Redis Cluster
//
// StartCluster starts three masters, creates the cluster with
// `redis-cli --cluster create`, and returns once every slot is served;
// SharedCluster is its shared form (three masters, no replicas).
// Cluster.Client returns a go-redis ClusterClient and Cluster.URL a
// "redis://host:port,host:port,..." URL with every node. Cluster.Prefix
// deletes the test's keys from every master. Keys that a command or script
// uses together need a common hash tag after the prefix:
// prefix+"{queue}:pending", prefix+"{queue}:active".
//
// WithReplicas(1) gives each master a replica, with a node timeout of 1 s
// so that failovers take seconds; StartCluster then also waits for every
// replica to be in sync. MasterOf and ReplicasOf say which nodes serve a
// key's slot ("{queue}" names every key of a queue). Failover hands the
// slot over to the replica as an operator would (CLUSTER FAILOVER: the
// replica first catches up, so no acknowledged write is lost); KillMaster
// SIGKILLs the master and waits for the cluster to promote the replica;
// Restart brings a killed node back, as a replica:
//
//	cluster := redistest.StartCluster(t, redistest.WithReplicas(1))
//	// ... traffic on queue q ...
//	cluster.Failover(t, "{q}")            // or:
//	killed := cluster.KillMaster(t, "{q}") // the replica is promoted
//	cluster.Restart(t, killed)             // back as its replica
//
// Each returns once every node agrees on the slots' masters and every
// slot is served. A go-redis ClusterClient follows MOVED after a Failover,
// but after KillMaster it keeps trying the dead master until it reloads
// its slot map (ReloadState, or by itself every 60 s).
//
// # TLS
//
// WithTLS starts a server (or, with StartCluster, every node, the cluster
// bus and replication included) that speaks TLS only: --tls-port on its
// port, --port 0. Its certificate, for 127.0.0.1, ::1 and localhost, is
// signed by a CA the test binary generates (ECDSA P-256, written to the
// server's directory). URL then starts with "rediss://", Client speaks
// TLS, CACertFile is the CA's PEM file (machinist's Redis.CACertFile,
// REDIS_CA_CERT_FILE) and TLSConfig a client configuration that trusts it.
// Clients need no certificate of their own (--tls-auth-clients no). It
// needs a redis-server built with TLS, as Debian's is; with another, the
// test fails saying so.
//
// # Redis Sentinel
//
// StartSentinel starts a master, a replica and three sentinels that
// monitor them under the name SentinelMaster ("mymaster", quorum 2), and
// returns once the replica is in sync and every sentinel knows the master,
// the replica and the other two sentinels. Sentinel.URL is the
// "redis://s1,s2,s3" URL of the sentinels, for a configuration whose
// Redis.MasterName is SentinelMaster; Client returns a go-redis failover
// client. Master and Replica ask the sentinels which server is which.
// Failover fails the master over as an operator would (SENTINEL FAILOVER);
// KillMaster SIGKILLs it and waits for the sentinels to promote the
// replica by themselves; Restart brings the killed server back, as a
// replica:
//
//	g := redistest.StartSentinel(t)
//	// ... traffic through g.URL() with MasterName redistest.SentinelMaster ...
//	g.Failover(t)             // the replica is the master, the master its replica; or:
//	killed := g.KillMaster(t) // the replica is promoted (about 2 s)
//	g.Restart(t, killed)      // back as its replica
//
// Each returns once every sentinel agrees on the new master and it reports
// role:master; Failover and Restart also wait for the former master to be
// a replica in sync. Neither kind of failover waits for the replica to
// catch up, and SENTINEL FAILOVER does not stop the master's clients:
// writes the former master acknowledged after the promotion, until its
// clients heard of the switch (go-redis listens for +switch-master), are
// discarded when it becomes a replica (machinist's Redis.MinReplicas makes
// its writes wait for the replica, so that none it counts on is lost).
//
// The sentinels run with short timeouts so that a failover takes seconds:
// down-after-milliseconds 2000, failover-timeout 4000, and (SENTINEL
// DEBUG, Redis 7.0 or later) INFO every second, PING every 200 ms, hello
// messages every 250 ms and TILT mode for 5 s only.
//
// # Goroutines
//
// A running server holds one goroutine that waits for its process; clients
// returned by Client are closed at cleanup. A package that checks for
// leaked goroutines does so after RunMain:
//
//	func TestMain(m *testing.M) {
//		code := redistest.RunMain(m)
//		if code == 0 {
//			if err := goleak.Find(); err != nil {
//				fmt.Fprintln(os.Stderr, err)
//				code = 1
//			}
//		}
//		os.Exit(code)
//	}
//
// On Linux a server is killed by the kernel if the test binary dies without
// running its cleanups (a panic, a -timeout).
package redistest
