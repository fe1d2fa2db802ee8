package redistest_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
)

func TestStartWithTLS(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := redistest.Start(t, redistest.WithTLS())

	if want := "rediss://" + srv.Addr(); srv.URL() != want {
		t.Errorf("URL() = %q, want %q", srv.URL(), want)
	}
	_, port, _ := net.SplitHostPort(srv.Addr())
	rdb := srv.Client(t)
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET over TLS: %v", err)
	}
	for name, want := range map[string]string{"port": "0", "tls-port": port, "tls-auth-clients": "no"} {
		if got := configGet(t, rdb, name); got != want {
			t.Errorf("CONFIG GET %s = %q, want %q", name, got, want)
		}
	}

	// The CA file verifies the server's certificate, by IP and by name.
	roots := x509.NewCertPool()
	pem, err := os.ReadFile(srv.CACertFile())
	if err != nil || !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("CACertFile() %q: no PEM certificate (%v)", srv.CACertFile(), err)
	}
	for _, addr := range []string{srv.Addr(), net.JoinHostPort("localhost", port)} {
		c := redis.NewClient(&redis.Options{Addr: addr, TLSConfig: &tls.Config{RootCAs: roots}})
		if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
			t.Errorf("GET k through %s with the CA file = %q, %v; want \"v\"", addr, got, err)
		}
		_ = c.Close()
	}

	// go-redis takes the URL as it is, with TLSConfig for the CA.
	opts, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	opts.TLSConfig.RootCAs = srv.TLSConfig().RootCAs
	c := redis.NewClient(opts)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING through ParseURL(%q): %v", srv.URL(), err)
	}
	_ = c.Close()

	// Nobody else's CA, and no plain TCP.
	c = redis.NewClient(&redis.Options{Addr: srv.Addr(), TLSConfig: &tls.Config{}, MaxRetries: -1})
	var unknown x509.UnknownAuthorityError
	if err := c.Ping(ctx).Err(); !errors.As(err, &unknown) {
		t.Errorf("PING trusting only the system's CAs: %v, want x509.UnknownAuthorityError", err)
	}
	_ = c.Close()
	if reply, err := plainPing(srv.Addr()); err == nil {
		t.Errorf("PING in plain TCP got %q, want no answer", reply)
	}

	// Stop (SHUTDOWN over TLS) and Restart work as without TLS.
	srv.Stop(t)
	srv.Restart(t)
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Restart: %v", err)
	}
}

// plainPing sends PING in plain RESP and returns the first line of the reply.
func plainPing(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "-") {
		return "", fmt.Errorf("not a RESP reply: %q", line)
	}
	return line, nil
}

func TestStartClusterWithTLS(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opts     []redistest.Option
		nodes    int
		failover bool
	}{
		{name: "three masters", opts: []redistest.Option{redistest.WithTLS()}, nodes: 3},
		{name: "with replicas, failed over", opts: []redistest.Option{redistest.WithTLS(), redistest.WithReplicas(1)}, nodes: 6, failover: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			cluster := redistest.StartCluster(t, tt.opts...)

			if want := "rediss://" + strings.Join(cluster.Addrs(), ","); cluster.URL() != want || len(cluster.Addrs()) != tt.nodes {
				t.Errorf("URL() = %q, want %q with %d nodes", cluster.URL(), want, tt.nodes)
			}
			if cluster.CACertFile() == "" || cluster.TLSConfig() == nil {
				t.Fatalf("CACertFile() = %q, TLSConfig() = %v; want a CA", cluster.CACertFile(), cluster.TLSConfig())
			}
			for _, n := range cluster.Nodes() {
				rdb := n.Client(t)
				_, port, _ := net.SplitHostPort(n.Addr())
				want := map[string]string{"port": "0", "tls-port": port, "tls-cluster": "yes", "tls-replication": "yes"}
				for name, v := range want {
					if got := configGet(t, rdb, name); got != v {
						t.Errorf("%s: CONFIG GET %s = %q, want %q", n.Addr(), name, got, v)
					}
				}
			}

			rdb := cluster.Client(t)
			prefix := cluster.Prefix(t)
			for c := 'a'; c <= 'z'; c++ {
				key := fmt.Sprintf("%s{%c}:k", prefix, c)
				if err := rdb.Set(ctx, key, string(c), 0).Err(); err != nil {
					t.Fatalf("SET %s over TLS: %v", key, err)
				}
			}
			// The slots are announced with their TLS ports.
			shards, err := rdb.ClusterShards(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range shards {
				for _, n := range sh.Nodes {
					if n.Port != 0 || n.TLSPort == 0 {
						t.Errorf("CLUSTER SHARDS: node %s:%d has port %d, tls-port %d; want TLS only", n.IP, n.TLSPort, n.Port, n.TLSPort)
					}
				}
			}

			if !tt.failover {
				return
			}
			key := prefix + "{b}:k"
			replica := cluster.ReplicasOf(t, key)[0]
			if promoted := cluster.Failover(t, key); promoted != replica {
				t.Errorf("Failover promoted %s, want %s", promoted.Addr(), replica.Addr())
			}
			// The replica had every key, over TLS replication.
			if got, err := rdb.Get(ctx, key).Result(); err != nil || got != "b" {
				t.Errorf("GET %s after the failover = %q, %v; want \"b\"", key, got, err)
			}
		})
	}
}

// A redis-server built without TLS fails on --tls-port (up to 7.0: "Bad
// directive"); WithTLS says what is missing. Not parallel: it changes PATH.
func TestWithTLSWithoutTLSSupportSaysSo(t *testing.T) {
	dir := t.TempDir()
	fake := `#!/bin/sh
echo
echo "*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***"
echo "Reading the configuration file, at line 2"
echo ">>> 'tls-port \"6380\"'"
echo "Bad directive or wrong number of arguments"
exit 1
`
	if err := os.WriteFile(filepath.Join(dir, "redis-server"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	got := runFatal(t, func(tb testing.TB) { redistest.Start(tb, redistest.WithTLS()) })
	if !strings.Contains(got, "WithTLS needs redis-server and redis-cli built with TLS (BUILD_TLS=yes)") ||
		!strings.Contains(got, "Bad directive") {
		t.Errorf("Start(WithTLS()) with a redis-server without TLS failed with %q; want it to say TLS is not built in, and the server's output", got)
	}
}
