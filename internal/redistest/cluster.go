package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterSize is the number of masters of a test cluster.
	clusterSize = 3
	// clusterCreateTimeout bounds `redis-cli --cluster create`.
	clusterCreateTimeout = 30 * time.Second
	// clusterReadyTimeout bounds the wait for the created cluster to serve
	// every slot.
	clusterReadyTimeout = 10 * time.Second
	// clusterPollInterval is how often cluster readiness is polled.
	clusterPollInterval = 20 * time.Millisecond
)

// readyKeys are written through a ClusterClient to check that every master
// serves its slots. Their hash tags fall in the three slot ranges that
// `redis-cli --cluster create` gives three masters: {b} is slot 3300
// (0-5460), {c} 7365 (5461-10922), {a} 15495 (10923-16383).
var readyKeys = []string{"redistest:ready:{a}", "redistest:ready:{b}", "redistest:ready:{c}"}

// Cluster is a Redis Cluster of three masters without replicas, each a
// redis-server process started for tests.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts three cluster-enabled redis-servers on free loopback
// ports, joins them with `redis-cli --cluster create`, and waits until
// every node reports cluster_state:ok and a ClusterClient can write a key
// to each master. The servers are shut down when the test finishes.
//
// If redis-server or redis-cli is not installed, the test fails saying how
// to install it.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := startCluster()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.close(); err != nil {
			tb.Error(err)
		}
	})
	return c
}

// Addrs returns the addresses of the three nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URL returns the cluster's URL, "redis://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3".
func (c *Cluster) URL() string {
	return "redis://" + strings.Join(c.Addrs(), ",")
}

// Client returns a go-redis cluster client, closed when the test finishes.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Prefix returns a key prefix of the test's own, like (*Server).Prefix, and
// deletes every key that starts with it from every master when the test
// finishes. The prefix carries no hash tag: put one after it, as in
// prefix+"{queue}:pending", to keep related keys in one slot.
func (c *Cluster) Prefix(tb testing.TB) string {
	tb.Helper()
	prefix := newPrefix()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
		defer func() { _ = cc.Close() }()
		err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return deletePrefix(ctx, node, prefix)
		})
		if err != nil {
			tb.Errorf("redistest: delete keys %s* on cluster %s: %v", prefix, c.URL(), err)
		}
	})
	return prefix
}

func startCluster() (*Cluster, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errServerNotFound
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, errCLINotFound
	}

	c := &Cluster{}
	for range clusterSize {
		s, err := start(config{cluster: true})
		if err != nil {
			return nil, errors.Join(err, c.close())
		}
		c.nodes = append(c.nodes, s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		err = fmt.Errorf("redistest: redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
		return nil, errors.Join(err, c.close())
	}

	if err := c.waitReady(); err != nil {
		return nil, errors.Join(err, c.close())
	}
	return c, nil
}

// waitReady polls the cluster until it serves every slot.
func (c *Cluster) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	ticker := time.NewTicker(clusterPollInterval)
	defer ticker.Stop()
	for {
		err := c.probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster %s not ready after %v: %w", c.URL(), clusterReadyTimeout, err)
		case <-ticker.C:
		}
	}
}

// probe returns nil if every node reports cluster_state:ok and knows all
// the others, and a new ClusterClient writes and reads a key on every
// master.
func (c *Cluster) probe(ctx context.Context) error {
	for _, n := range c.nodes {
		replies, err := probe(ctx, n.Addr(), []string{"CLUSTER", "INFO"})
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr(), err)
		}
		fields := infoFields(replies[0])
		if fields["cluster_state"] != "ok" || fields["cluster_known_nodes"] != strconv.Itoa(clusterSize) {
			return fmt.Errorf("%s: cluster_state:%s cluster_known_nodes:%s",
				n.Addr(), fields["cluster_state"], fields["cluster_known_nodes"])
		}
	}

	// A client of its own, so that it loads the slots as they are now.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRetries: -1})
	defer func() { _ = cc.Close() }()
	for _, key := range readyKeys {
		if err := cc.Set(ctx, key, "1", 0).Err(); err != nil {
			return fmt.Errorf("SET %s: %w", key, err)
		}
		if err := cc.Get(ctx, key).Err(); err != nil {
			return fmt.Errorf("GET %s: %w", key, err)
		}
	}
	for _, n := range c.nodes {
		replies, err := probe(ctx, n.Addr(), []string{"DBSIZE"})
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr(), err)
		}
		if replies[0] == "0" {
			return fmt.Errorf("no ready key landed on %s", n.Addr())
		}
	}
	for _, key := range readyKeys {
		if err := cc.Del(ctx, key).Err(); err != nil {
			return fmt.Errorf("DEL %s: %w", key, err)
		}
	}
	return nil
}

// close shuts down every node, all at once.
func (c *Cluster) close() error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = n.close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
