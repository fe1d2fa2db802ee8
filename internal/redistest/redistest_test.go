package redistest_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
)

func TestStart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []redistest.Option
		want map[string]string // CONFIG GET name -> value
	}{
		{
			name: "defaults write nothing to disk",
			want: map[string]string{"save": "", "appendonly": "no", "bind": "127.0.0.1", "daemonize": "no"},
		},
		{
			name: "WithAOF",
			opts: []redistest.Option{redistest.WithAOF()},
			want: map[string]string{"appendonly": "yes", "appendfsync": "always"},
		},
		{
			name: "WithArgs",
			opts: []redistest.Option{redistest.WithArgs("--maxmemory", "10mb")},
			want: map[string]string{"maxmemory": "10485760", "appendonly": "no"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv := redistest.Start(t, tt.opts...)

			host, port, err := net.SplitHostPort(srv.Addr())
			if err != nil || host != "127.0.0.1" || port == "6379" {
				t.Fatalf("Addr() = %q, want 127.0.0.1 and a port other than 6379", srv.Addr())
			}
			if want := "redis://" + srv.Addr(); srv.URL() != want {
				t.Errorf("URL() = %q, want %q", srv.URL(), want)
			}

			rdb := srv.Client(t)
			if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
				t.Fatalf("GET k = %q, %v; want \"v\"", got, err)
			}
			if got := info(t, rdb, "server")["tcp_port"]; got != port {
				t.Errorf("INFO tcp_port = %s, want %s", got, port)
			}
			for name, want := range tt.want {
				got, err := rdb.ConfigGet(ctx, name).Result()
				if err != nil {
					t.Fatalf("CONFIG GET %s: %v", name, err)
				}
				if got[name] != want {
					t.Errorf("CONFIG GET %s = %q, want %q", name, got[name], want)
				}
			}
		})
	}
}

// fatalTB records the first Fatal of a helper under test and ends the
// goroutine it runs on, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// runFatal runs fn with a fatalTB on a goroutine of its own and returns the
// message it failed with, or "" if it returned.
func runFatal(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	return tb.msg
}

// Not parallel: it changes PATH.
func TestWithoutRedisOnPathFailsSayingWhatToInstall(t *testing.T) {
	serverBin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	serverOnly := t.TempDir()
	if err := os.Symlink(serverBin, filepath.Join(serverOnly, "redis-server")); err != nil {
		t.Fatal(err)
	}

	const hint = "install it with `apt-get install -y redis-server` (or run `make test`, which installs it)"
	tests := []struct {
		name string
		path string
		fn   func(tb testing.TB)
		want string
	}{
		{"Start", empty, func(tb testing.TB) { redistest.Start(tb) }, "redis-server not found: " + hint},
		{"StartCluster", empty, func(tb testing.TB) { redistest.StartCluster(tb) }, "redis-server not found: " + hint},
		{"StartCluster without redis-cli", serverOnly, func(tb testing.TB) { redistest.StartCluster(tb) }, "redis-cli not found: " + hint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			if got := runFatal(t, tt.fn); got != tt.want {
				t.Errorf("failed with %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPrefixCleanupRemovesOnlyPrefixedKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := redistest.Start(t)
	rdb := srv.Client(t)

	others := []string{"other", "t-other:k", "x{tag}:k"}
	for _, k := range others {
		if err := rdb.Set(ctx, k, "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	var prefix, sibling string
	t.Run("test", func(t *testing.T) {
		prefix = srv.Prefix(t)
		sibling = srv.Prefix(t)
		if sibling == prefix {
			t.Fatalf("two calls to Prefix returned %q", prefix)
		}
		for _, k := range []string{"a", "b:c", "{queue}:pending", "*"} {
			if err := rdb.Set(ctx, prefix+k, "1", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// Many keys: the deletion must follow the SCAN cursor.
		pipe := rdb.Pipeline()
		for i := range 2500 {
			pipe.Set(ctx, fmt.Sprintf("%sbulk:%d", prefix, i), i, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	})
	// The subtest's cleanups have run; the prefix's keys are gone.
	if !regexp.MustCompile(`^t[0-9]+-[0-9a-f]{8}:$`).MatchString(prefix) {
		t.Errorf("Prefix() = %q, want t<counter>-<8 hex digits>:", prefix)
	}
	if keys := scanAll(t, rdb, prefix+"*"); len(keys) != 0 {
		t.Errorf("%d keys left under %s, such as %q", len(keys), prefix, keys[0])
	}
	for _, k := range others {
		if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("EXISTS %s = %d, %v; want the key kept", k, n, err)
		}
	}
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != int64(len(others)) {
		t.Errorf("DBSIZE = %d, %v; want %d", n, err, len(others))
	}
}

func TestSharedServerPrefixesIsolateParallelTests(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	prefixes := make([]string, 4)
	t.Run("group", func(t *testing.T) {
		for i := range prefixes {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				if got := redistest.Shared(t); got != srv {
					t.Fatalf("Shared() = %s, want the shared %s", got.Addr(), srv.Addr())
				}
				prefix := srv.Prefix(t)
				prefixes[i] = prefix
				for range 50 {
					if err := rdb.Incr(ctx, prefix+"counter").Err(); err != nil {
						t.Fatal(err)
					}
				}
				if got, err := rdb.Get(ctx, prefix+"counter").Int(); err != nil || got != 50 {
					t.Errorf("counter = %d, %v; want 50 (another test wrote to it)", got, err)
				}
			})
		}
	})
	for _, prefix := range prefixes {
		if keys := scanAll(t, rdb, prefix+"*"); len(keys) != 0 {
			t.Errorf("keys left under %s: %q", prefix, keys)
		}
	}
}

func TestRestart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opts     []redistest.Option
		down     func(*redistest.Server, testing.TB)
		wantKept bool
	}{
		{"AOF keeps a key written before Kill", []redistest.Option{redistest.WithAOF()}, (*redistest.Server).Kill, true},
		{"AOF keeps a key written before Stop", []redistest.Option{redistest.WithAOF()}, (*redistest.Server).Stop, true},
		{"without persistence Kill loses the key", nil, (*redistest.Server).Kill, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			srv := redistest.Start(t, tt.opts...)
			rdb := srv.Client(t)
			addr := srv.Addr()
			if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}

			tt.down(srv, t)
			if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				_ = conn.Close()
				t.Fatalf("%s accepts connections after the server went down", addr)
			}

			srv.Restart(t)
			if srv.Addr() != addr {
				t.Errorf("restarted on %s, want %s", srv.Addr(), addr)
			}
			got, err := rdb.Get(ctx, "k").Result()
			switch {
			case tt.wantKept && (err != nil || got != "v"):
				t.Errorf("after restart GET k = %q, %v; want \"v\"", got, err)
			case !tt.wantKept && err != redis.Nil:
				t.Errorf("after restart GET k = %q, %v; want no key", got, err)
			}
			if loading := info(t, rdb, "persistence")["loading"]; loading != "0" {
				t.Errorf("loading:%s after Restart, want 0", loading)
			}
		})
	}
}

func TestParallelStartsGetDistinctServers(t *testing.T) {
	t.Parallel()
	type started struct{ addr, runID string }
	var (
		mu  sync.Mutex
		all []started
	)
	t.Run("group", func(t *testing.T) {
		for i := range 8 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				for range 2 {
					srv := redistest.Start(t)
					rdb := srv.Client(t)
					fields := info(t, rdb, "server")
					if _, port, _ := net.SplitHostPort(srv.Addr()); fields["tcp_port"] != port {
						t.Errorf("server at %s says tcp_port:%s", srv.Addr(), fields["tcp_port"])
					}
					mu.Lock()
					all = append(all, started{srv.Addr(), fields["run_id"]})
					mu.Unlock()
				}
			})
		}
	})
	// By run_id, which each redis-server process draws at random: an
	// address may come round again once the server that had it stopped
	// (a subtest that ended before another began).
	runIDs := make(map[string]string)
	for _, s := range all {
		if addr, seen := runIDs[s.runID]; seen {
			t.Errorf("two tests got one server (run_id %s), at %s and at %s", s.runID, addr, s.addr)
		}
		runIDs[s.runID] = s.addr
	}
	if len(all) != 16 {
		t.Errorf("started %d servers, want 16", len(all))
	}
}

func TestClusterServesEverySlot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.StartCluster(t)

	addrs := cluster.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs() = %q, want 3 nodes", addrs)
	}
	if want := "redis://" + strings.Join(addrs, ","); cluster.URL() != want {
		t.Errorf("URL() = %q, want %q", cluster.URL(), want)
	}
	for _, addr := range addrs {
		node := redis.NewClient(&redis.Options{Addr: addr})
		fields := clusterInfo(t, node)
		_ = node.Close()
		if fields["cluster_state"] != "ok" || fields["cluster_slots_ok"] != "16384" || fields["cluster_known_nodes"] != "3" {
			t.Errorf("%s: cluster_state:%s cluster_slots_ok:%s cluster_known_nodes:%s; want ok, 16384, 3",
				addr, fields["cluster_state"], fields["cluster_slots_ok"], fields["cluster_known_nodes"])
		}
	}

	rdb := cluster.Client(t)
	prefix := cluster.Prefix(t)
	slots := make(map[int64]bool)
	for c := 'a'; c <= 'z'; c++ {
		key := fmt.Sprintf("%s{%c}:k", prefix, c)
		if err := rdb.Set(ctx, key, string(c), 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		if got, err := rdb.Get(ctx, key).Result(); err != nil || got != string(c) {
			t.Fatalf("GET %s = %q, %v; want %q", key, got, err, string(c))
		}
		slot, err := rdb.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
	}
	if len(slots) < 3 {
		t.Errorf("the keys fell in %d slots, want several", len(slots))
	}

	// Every master took some of the keys.
	var mu sync.Mutex
	perMaster := make(map[string]int)
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		keys := scanAll(t, node, prefix+"*")
		mu.Lock()
		perMaster[node.Options().Addr] = len(keys)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(perMaster) != 3 {
		t.Errorf("ForEachMaster visited %d masters, want 3", len(perMaster))
	}
	for addr, n := range perMaster {
		if n == 0 {
			t.Errorf("master %s holds none of the keys", addr)
		}
	}
}

func TestSharedClusterPrefixCleanupCoversEveryMaster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cluster := redistest.SharedCluster(t)
	if again := redistest.SharedCluster(t); again != cluster {
		t.Fatalf("SharedCluster returned %s, then %s; want one cluster", cluster.URL(), again.URL())
	}
	rdb := cluster.Client(t)
	kept := cluster.Prefix(t)

	var prefix string
	t.Run("test", func(t *testing.T) {
		prefix = cluster.Prefix(t)
		for c := 'a'; c <= 'z'; c++ {
			for _, p := range []string{prefix, kept} {
				key := fmt.Sprintf("%s{%c}:k", p, c)
				if err := rdb.Set(ctx, key, "1", 0).Err(); err != nil {
					t.Fatalf("SET %s: %v", key, err)
				}
			}
		}
	})

	var mu sync.Mutex
	left, keptN := 0, 0
	err := rdb.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		l, k := len(scanAll(t, node, prefix+"*")), len(scanAll(t, node, kept+"*"))
		mu.Lock()
		left, keptN = left+l, keptN+k
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d keys left under %s", left, prefix)
	}
	if keptN != 26 {
		t.Errorf("%d keys under %s, want the 26 of the other prefix kept", keptN, kept)
	}
}

// info returns the fields of INFO section.
func info(t testing.TB, rdb *redis.Client, section string) map[string]string {
	t.Helper()
	s, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	return fields(s)
}

func clusterInfo(t testing.TB, rdb *redis.Client) map[string]string {
	t.Helper()
	s, err := rdb.ClusterInfo(context.Background()).Result()
	if err != nil {
		t.Fatalf("CLUSTER INFO: %v", err)
	}
	return fields(s)
}

func fields(s string) map[string]string {
	m := make(map[string]string)
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// scanAll returns the keys of one server that match pattern.
func scanAll(t testing.TB, rdb *redis.Client, pattern string) []string {
	t.Helper()
	var keys []string
	iter := rdb.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("SCAN %s: %v", pattern, err)
	}
	return keys
}

// TestProxyHoldsACommandUntilReleased: a command HoldCommandTo names waits
// while other connections' commands pass; its client times out and
// closes the connection, and once released the command still runs, after
// the others, and Replied says when.
func TestProxyHoldsACommandUntilReleased(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := redistest.Shared(t)
	key := srv.Prefix(t) + "k"
	proxy := redistest.StartProxy(t, srv.Addr())
	held := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ReadTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = held.Close() })
	direct := srv.Client(t)

	hold := proxy.HoldCommandTo("rpush", key, "first")
	if err := held.RPush(ctx, key, "first").Err(); err == nil {
		t.Fatal("the held RPUSH returned no error before its release")
	}
	select {
	case <-hold.Held():
	default:
		t.Fatal("the RPUSH was not held")
	}
	if err := held.RPush(ctx, key, "second").Err(); err != nil { // a new connection passes
		t.Fatalf("RPUSH on another connection: %v", err)
	}
	hold.Release()
	select {
	case <-hold.Replied():
	case <-ctx.Done():
		t.Fatal("the released RPUSH got no reply")
	}
	if got, err := direct.LRange(ctx, key, 0, -1).Result(); err != nil || strings.Join(got, " ") != "second first" {
		t.Fatalf("list after the release: %q, %v; want the held RPUSH run last", got, err)
	}
}
