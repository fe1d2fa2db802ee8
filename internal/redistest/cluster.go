package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
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
	// clusterCreateTimeout bounds `redis-cli --cluster create`, which
	// waits for the nodes to agree over their cluster bus: seconds, and
	// more than 30 on a loaded 2-core machine.
	clusterCreateTimeout = 90 * time.Second
	// clusterReadyTimeout bounds the wait for a created (or restarted)
	// cluster to serve every slot with every replica in sync.
	clusterReadyTimeout = 20 * time.Second
	// failoverTimeout bounds the wait for a failover, manual or after a
	// master was killed, to complete. With a node timeout of 1 s, a
	// killed master is replaced in 2 to 3 s.
	failoverTimeout = 30 * time.Second
	// clusterPollInterval is how often cluster readiness is polled.
	clusterPollInterval = 20 * time.Millisecond
	// allSlots is the number of slots of a Redis Cluster.
	allSlots = 16384
)

// replicaArgs are the redis-server arguments of the nodes of a cluster with
// replicas: a node is deemed failed after 1 s without an answer (rather
// than 5), a replica takes over however long its link to the master has
// been down (validity factor 0: a test kills masters on purpose), and a
// full synchronisation starts at once rather than after the default 5 s.
var replicaArgs = []string{
	"--cluster-node-timeout", replicaNodeTimeout,
	"--cluster-replica-validity-factor", "0",
	"--repl-diskless-sync-delay", "0",
}

// The cluster-node-timeout of the nodes of a cluster with replicas (ms),
// and the one they have while they meet, when created.
const (
	replicaNodeTimeout = "1000"
	joinNodeTimeout    = "5000"
)

// readyKeys are written through a ClusterClient to check that every master
// serves its slots. Their hash tags fall in the three slot ranges that
// `redis-cli --cluster create` gives three masters: {b} is slot 3300
// (0-5460), {c} 7365 (5461-10922), {a} 15495 (10923-16383).
var readyKeys = []string{"redistest:ready:{a}", "redistest:ready:{b}", "redistest:ready:{c}"}

// WithReplicas gives each of the three masters of a cluster started by
// StartCluster n replicas (n ≥ 1), for tests that fail masters over. The
// nodes of such a cluster deem a node failed after 1 s without an answer
// (cluster-node-timeout 1000), so that a killed master is replaced within
// seconds. Start refuses it.
func WithReplicas(n int) Option {
	return func(c *config) { c.replicas = n }
}

// Cluster is a Redis Cluster of three masters, with the replicas asked for
// by WithReplicas, each node a redis-server process started for tests.
type Cluster struct {
	nodes    []*Server
	replicas int // per master
}

// StartCluster starts a Redis Cluster of three masters: cluster-enabled
// redis-servers on free loopback ports, joined with
// `redis-cli --cluster create`. It waits until every node reports
// cluster_state:ok, the nodes agree on which master serves each slot, a
// ClusterClient can write a key to each master, and every replica is in
// sync with its master. The servers are shut down when the test finishes.
//
// Options apply to every node: WithReplicas adds replicas, WithTLS makes
// the cluster speak TLS only (clients, cluster bus and replication),
// WithAOF and WithArgs are as for Start.
//
// If redis-server or redis-cli is not installed, the test fails saying how
// to install it.
func StartCluster(tb testing.TB, opts ...Option) *Cluster {
	tb.Helper()
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.replicas < 0 {
		tb.Fatalf("redistest: WithReplicas(%d): want 1 or more", cfg.replicas)
	}
	c, err := newCluster(cfg)
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

// Nodes returns every node, masters and replicas, running or not, in the
// order they were started.
func (c *Cluster) Nodes() []*Server {
	return slices.Clone(c.nodes)
}

// Addrs returns the addresses of every node, masters and replicas.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URL returns the cluster's URL with the address of every node,
// "redis://127.0.0.1:P1,127.0.0.1:P2,...", or "rediss://..." for a cluster
// started WithTLS.
func (c *Cluster) URL() string {
	scheme := "redis://"
	if c.nodes[0].tlsConf != nil {
		scheme = "rediss://"
	}
	return scheme + strings.Join(c.Addrs(), ",")
}

// Client returns a go-redis cluster client, closed when the test finishes.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), TLSConfig: c.TLSConfig()})
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
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.runningAddrs(), TLSConfig: c.TLSConfig()})
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

// MasterOf returns the node that serves key's slot, as the cluster sees it
// now (after Failover or KillMaster has returned: the promoted replica).
// Keys with the same hash tag have the same master: MasterOf(tb, "{q}")
// is the master of every key of queue q.
func (c *Cluster) MasterOf(tb testing.TB, key string) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	st, slot, err := c.slotView(ctx, key)
	if err != nil {
		tb.Fatalf("redistest: master of %q: %v", key, err)
	}
	master, ok := st.owner(slot)
	if !ok {
		tb.Fatalf("redistest: master of %q: no node serves slot %d", key, slot)
	}
	return c.node(tb, master)
}

// ReplicasOf returns the replicas of the master that serves key's slot, as
// the cluster sees it now, whether they are running or not.
func (c *Cluster) ReplicasOf(tb testing.TB, key string) []*Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	// The node asked may not have heard of every replica yet (gossip):
	// look again until it lists as many as the cluster was started with.
	for {
		st, slot, err := c.slotView(ctx, key)
		if err != nil {
			tb.Fatalf("redistest: replicas of %q: %v", key, err)
		}
		master, ok := st.owner(slot)
		if !ok {
			tb.Fatalf("redistest: replicas of %q: no node serves slot %d", key, slot)
		}
		var replicas []*Server
		for _, n := range st.replicasOf(master.id) {
			replicas = append(replicas, c.node(tb, n))
		}
		if len(replicas) >= c.replicas {
			return replicas
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("redistest: replicas of %q: %d listed after %v, want %d", key, len(replicas), clusterReadyTimeout, c.replicas)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Failover fails the master serving key's slot over to its replica, as an
// operator would: CLUSTER FAILOVER on the replica, a coordinated failover in
// which the master stops accepting writes, the replica catches up with
// every write the master acknowledged, and only then takes over, so that no
// acknowledged write is lost. Clients of the old master get MOVED to the
// new one. Failover first waits for the replica to be in sync, and returns
// the promoted replica once every node agrees it serves the slot, the old
// master has become its replica and is in sync, and every slot is served.
// The cluster must have been started WithReplicas.
func (c *Cluster) Failover(tb testing.TB, key string) *Server {
	tb.Helper()
	if c.replicas == 0 {
		tb.Fatal("redistest: Failover needs a cluster started WithReplicas")
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout+failoverTimeout)
	defer cancel()
	st, err := c.waitHealthy(ctx, c.replicas, nil)
	if err != nil {
		tb.Fatalf("redistest: failover of %q: %v", key, err)
	}
	slot, err := c.keySlot(ctx, key)
	if err != nil {
		tb.Fatalf("redistest: failover of %q: %v", key, err)
	}
	master, _ := st.owner(slot) // a healthy cluster serves every slot
	var replica *Server
	for _, n := range st.replicasOf(master.id) {
		if s := c.node(tb, n); s.running() {
			replica = s
			break
		}
	}
	if replica == nil {
		tb.Fatalf("redistest: failover of %q: master %s has no running replica", key, master.addr)
	}
	if _, err := replica.probe(ctx, []string{"CLUSTER", "FAILOVER"}); err != nil {
		tb.Fatalf("redistest: CLUSTER FAILOVER on %s (replica of %s): %v", replica.Addr(), master.addr, err)
	}
	_, err = c.waitHealthy(ctx, c.replicas, func(st clusterState) error {
		if now, _ := st.owner(slot); now.addr != replica.Addr() {
			return fmt.Errorf("slot %d is still served by %s", slot, now.addr)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("redistest: failover of %q from %s to %s: %v\n%s%s",
			key, master.addr, replica.Addr(), err, replica.logTail(), c.node(tb, master).logTail())
	}
	return replica
}

// KillMaster kills the master serving key's slot with SIGKILL, as a crash
// would, and waits until the cluster has promoted one of its replicas and
// serves every slot again. Writes the master acknowledged but had not yet
// sent to its replica are lost, as they are in production (replication is
// asynchronous). KillMaster first waits for the replicas to be in sync, and
// returns the killed node: Restart brings it back, as a replica.
// The cluster must have been started WithReplicas.
//
// A go-redis ClusterClient that loaded the slots before the kill keeps
// sending that slot's commands to the dead master, failing to connect,
// until it reloads them: on a MOVED or READONLY reply, or after
// ClusterStateReloadInterval (60 s by default), not on a refused
// connection. Use a new client, or call its ReloadState, to see the
// promoted replica at once.
func (c *Cluster) KillMaster(tb testing.TB, key string) *Server {
	tb.Helper()
	if c.replicas == 0 {
		tb.Fatal("redistest: KillMaster needs a cluster started WithReplicas")
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout+failoverTimeout)
	defer cancel()
	st, err := c.waitHealthy(ctx, c.replicas, nil)
	if err != nil {
		tb.Fatalf("redistest: kill the master of %q: %v", key, err)
	}
	slot, err := c.keySlot(ctx, key)
	if err != nil {
		tb.Fatalf("redistest: kill the master of %q: %v", key, err)
	}
	owner, _ := st.owner(slot)
	master := c.node(tb, owner)
	master.Kill(tb)
	// The promoted replica has no replica of its own until the killed
	// node comes back: wait for every slot to be served, not for replicas.
	_, err = c.waitHealthy(ctx, 0, func(st clusterState) error {
		if now, _ := st.owner(slot); now.addr == master.Addr() {
			return fmt.Errorf("slot %d is still served by the killed %s", slot, now.addr)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("redistest: after killing the master %s of %q: %v", master.Addr(), key, err)
	}
	return master
}

// Restart restarts a node of the cluster that was stopped or killed (by
// KillMaster, say), in the same directory and with the same cluster
// configuration, and waits until the cluster is whole again: every slot
// served and every replica in sync. A master that was replaced while it
// was down comes back as a replica of the node that replaced it.
func (c *Cluster) Restart(tb testing.TB, node *Server) {
	tb.Helper()
	if !slices.Contains(c.nodes, node) {
		tb.Fatalf("redistest: restart %s: not a node of cluster %s", node.Addr(), c.URL())
	}
	node.Restart(tb)
	ctx, cancel := context.WithTimeout(context.Background(), failoverTimeout)
	defer cancel()
	if _, err := c.waitHealthy(ctx, c.replicas, nil); err != nil {
		tb.Fatalf("redistest: after restarting %s: %v\n%s", node.Addr(), err, node.logTail())
	}
}

// WaitHealthy waits until the cluster serves every slot, its running nodes
// agree on which master serves each, and, unless a node is down, every
// master has its replicas in sync.
func (c *Cluster) WaitHealthy(tb testing.TB) {
	tb.Helper()
	want := c.replicas
	if len(c.runningNodes()) < len(c.nodes) {
		want = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), failoverTimeout)
	defer cancel()
	if _, err := c.waitHealthy(ctx, want, nil); err != nil {
		tb.Fatal(err)
	}
}

// startCluster starts a cluster of three masters without replicas, for
// SharedCluster.
func startCluster() (*Cluster, error) {
	return newCluster(config{})
}

func newCluster(cfg config) (*Cluster, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, errServerNotFound
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, errCLINotFound
	}
	cfg.cluster = true

	c := &Cluster{replicas: cfg.replicas}
	for range clusterSize * (1 + cfg.replicas) {
		s, err := start(cfg)
		if err != nil {
			return nil, errors.Join(err, c.close())
		}
		c.nodes = append(c.nodes, s)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	// A node forgets a node it is meeting if their handshake takes more
	// than its node timeout (1 s at least), and redis-cli meets each node
	// once: with the 1 s of a cluster with replicas, a loaded machine could
	// leave the cluster never joined. The nodes meet with the default 5 s.
	if cfg.replicas > 0 {
		if err := c.setNodeTimeout(ctx, joinNodeTimeout); err != nil {
			return nil, errors.Join(err, c.close())
		}
	}
	var args []string
	if cfg.tls {
		args = append(args, "--tls", "--cacert", c.CACertFile())
	}
	args = append(args, "--cluster", "create")
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(cfg.replicas), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		err = fmt.Errorf("redistest: redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
		if cfg.tls && strings.Contains(string(out), "--tls") {
			err = fmt.Errorf("%w: %w", errTLSUnsupported, err)
		}
		return nil, errors.Join(err, c.close())
	}

	ctx, cancel = context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	if _, err := c.waitHealthy(ctx, c.replicas, nil); err != nil {
		return nil, errors.Join(err, c.close())
	}
	if cfg.replicas > 0 {
		if err := c.setNodeTimeout(ctx, replicaNodeTimeout); err != nil {
			return nil, errors.Join(err, c.close())
		}
	}
	return c, nil
}

// setNodeTimeout sets cluster-node-timeout on every node.
func (c *Cluster) setNodeTimeout(ctx context.Context, ms string) error {
	for _, n := range c.nodes {
		if _, err := n.probe(ctx, []string{"CONFIG", "SET", "cluster-node-timeout", ms}); err != nil {
			return fmt.Errorf("redistest: %s: CONFIG SET cluster-node-timeout %s: %w", n.Addr(), ms, err)
		}
	}
	return nil
}

// waitHealthy polls the cluster until check passes with wantReplicas, and
// extra too if it is not nil, and returns the cluster's state as it was
// then. It fails when ctx is done, with the last reason the cluster was not
// healthy.
func (c *Cluster) waitHealthy(ctx context.Context, wantReplicas int, extra func(clusterState) error) (clusterState, error) {
	start := time.Now()
	ticker := time.NewTicker(clusterPollInterval)
	defer ticker.Stop()
	for {
		st, err := c.check(ctx, wantReplicas)
		if err == nil && extra != nil {
			err = extra(st)
		}
		if err == nil {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return clusterState{}, fmt.Errorf("redistest: cluster %s not healthy after %v: %w",
				c.URL(), time.Since(start).Round(time.Millisecond), err)
		case <-ticker.C:
		}
	}
}

// check returns the cluster's state if it is healthy:
//
//   - every running node reports cluster_state:ok, every slot ok, and knows
//     every node of the cluster;
//   - the running nodes agree on which master serves each slot, and each of
//     those masters is running and not flagged as failing;
//   - every running replica's link to its master is up and not in a full
//     synchronisation, and every master that serves slots has at least
//     wantReplicas replicas online;
//   - a new ClusterClient writes and reads a key on every master.
func (c *Cluster) check(ctx context.Context, wantReplicas int) (clusterState, error) {
	var ref clusterState
	var refFrom string
	for _, n := range c.runningNodes() {
		replies, err := n.probe(ctx, []string{"CLUSTER", "INFO"}, []string{"CLUSTER", "NODES"}, []string{"INFO", "replication"})
		if err != nil {
			return clusterState{}, fmt.Errorf("%s: %w", n.Addr(), err)
		}
		info := infoFields(replies[0])
		if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != strconv.Itoa(allSlots) ||
			info["cluster_known_nodes"] != strconv.Itoa(len(c.nodes)) {
			return clusterState{}, fmt.Errorf("%s: cluster_state:%s cluster_slots_ok:%s cluster_known_nodes:%s",
				n.Addr(), info["cluster_state"], info["cluster_slots_ok"], info["cluster_known_nodes"])
		}
		st, err := parseClusterNodes(replies[1])
		if err != nil {
			return clusterState{}, fmt.Errorf("%s: CLUSTER NODES: %w", n.Addr(), err)
		}
		if refFrom == "" {
			ref, refFrom = st, n.Addr()
		} else if a, b := ref.slotMap(), st.slotMap(); a != b {
			return clusterState{}, fmt.Errorf("%s and %s disagree on the slots' masters: %s; %s", refFrom, n.Addr(), a, b)
		}

		me, ok := st.myself()
		if !ok {
			return clusterState{}, fmt.Errorf("%s: CLUSTER NODES has no myself line", n.Addr())
		}
		repl := infoFields(replies[2])
		switch {
		case me.master != "":
			if repl["role"] != "slave" || repl["master_link_status"] != "up" || repl["master_sync_in_progress"] != "0" {
				return clusterState{}, fmt.Errorf("replica %s: role:%s master_link_status:%s master_sync_in_progress:%s",
					n.Addr(), repl["role"], repl["master_link_status"], repl["master_sync_in_progress"])
			}
		case len(me.slots) > 0:
			if online := onlineReplicas(repl); online < wantReplicas {
				return clusterState{}, fmt.Errorf("master %s: %d replicas online, want %d", n.Addr(), online, wantReplicas)
			}
		}
	}
	if refFrom == "" {
		return clusterState{}, errors.New("no node is running")
	}
	for _, m := range ref.masters() {
		if m.has("fail") || m.has("fail?") {
			return clusterState{}, fmt.Errorf("master %s (%s) is flagged %s", m.addr, strings.Join(m.slots, ","), m.flags)
		}
		if s := c.byAddr(m.addr); s == nil || !s.running() {
			return clusterState{}, fmt.Errorf("master %s (%s) is not running", m.addr, strings.Join(m.slots, ","))
		}
	}
	if err := c.writeReadyKeys(ctx); err != nil {
		return clusterState{}, err
	}
	return ref, nil
}

// writeReadyKeys writes and reads a key on every master through a
// ClusterClient of its own, so that it loads the slots as they are now.
func (c *Cluster) writeReadyKeys(ctx context.Context) error {
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:      c.runningAddrs(),
		TLSConfig:  c.TLSConfig(),
		MaxRetries: -1,
	})
	defer func() { _ = cc.Close() }()
	for _, key := range readyKeys {
		if err := cc.Set(ctx, key, "1", 0).Err(); err != nil {
			return fmt.Errorf("SET %s: %w", key, err)
		}
		if err := cc.Get(ctx, key).Err(); err != nil {
			return fmt.Errorf("GET %s: %w", key, err)
		}
		if err := cc.Del(ctx, key).Err(); err != nil {
			return fmt.Errorf("DEL %s: %w", key, err)
		}
	}
	return nil
}

// onlineReplicas counts the replicas a master's INFO replication lists as
// online ("slave0:ip=...,port=...,state=online,...").
func onlineReplicas(repl map[string]string) int {
	n := 0
	for name, value := range repl {
		idx, ok := strings.CutPrefix(name, "slave")
		if _, err := strconv.Atoi(idx); ok && err == nil && strings.Contains(value, "state=online") {
			n++
		}
	}
	return n
}

// slotView returns the cluster's state as the first running node sees it
// and the slot of key.
func (c *Cluster) slotView(ctx context.Context, key string) (clusterState, int, error) {
	for _, n := range c.runningNodes() {
		replies, err := n.probe(ctx, []string{"CLUSTER", "KEYSLOT", key}, []string{"CLUSTER", "NODES"})
		if err != nil {
			return clusterState{}, 0, fmt.Errorf("%s: %w", n.Addr(), err)
		}
		slot, err := strconv.Atoi(replies[0])
		if err != nil {
			return clusterState{}, 0, fmt.Errorf("%s: CLUSTER KEYSLOT: %w", n.Addr(), err)
		}
		st, err := parseClusterNodes(replies[1])
		if err != nil {
			return clusterState{}, 0, fmt.Errorf("%s: CLUSTER NODES: %w", n.Addr(), err)
		}
		return st, slot, nil
	}
	return clusterState{}, 0, errors.New("no node is running")
}

// keySlot returns the slot of key.
func (c *Cluster) keySlot(ctx context.Context, key string) (int, error) {
	_, slot, err := c.slotView(ctx, key)
	return slot, err
}

// node returns the Server of a node of the cluster.
func (c *Cluster) node(tb testing.TB, n clusterNode) *Server {
	tb.Helper()
	s := c.byAddr(n.addr)
	if s == nil {
		tb.Fatalf("redistest: cluster node %s (%s) is none of %s", n.addr, n.id, c.URL())
	}
	return s
}

func (c *Cluster) byAddr(addr string) *Server {
	for _, s := range c.nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

func (c *Cluster) runningNodes() []*Server {
	var running []*Server
	for _, s := range c.nodes {
		if s.running() {
			running = append(running, s)
		}
	}
	return running
}

func (c *Cluster) runningAddrs() []string {
	var addrs []string
	for _, s := range c.runningNodes() {
		addrs = append(addrs, s.Addr())
	}
	return addrs
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

// clusterState is the cluster as one node sees it: its CLUSTER NODES.
type clusterState struct {
	nodes []clusterNode
}

// clusterNode is a line of CLUSTER NODES:
//
//	<id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state> <slot> ...
type clusterNode struct {
	id     string
	addr   string // ip:port, without the bus port
	flags  string // comma-separated: myself, master, slave, fail?, fail, ...
	master string // the id of its master; "" for a master
	slots  []string
}

func (n clusterNode) has(flag string) bool {
	return slices.Contains(strings.Split(n.flags, ","), flag)
}

func parseClusterNodes(s string) (clusterState, error) {
	var st clusterState
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return clusterState{}, fmt.Errorf("line %q has %d fields, want 8 or more", line, len(f))
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: addr, flags: f[2]}
		if f[3] != "-" {
			n.master = f[3]
		}
		for _, slot := range f[8:] {
			if !strings.HasPrefix(slot, "[") { // a slot being migrated or imported
				n.slots = append(n.slots, slot)
			}
		}
		st.nodes = append(st.nodes, n)
	}
	return st, nil
}

func (st clusterState) myself() (clusterNode, bool) {
	for _, n := range st.nodes {
		if n.has("myself") {
			return n, true
		}
	}
	return clusterNode{}, false
}

// masters returns the nodes that serve slots.
func (st clusterState) masters() []clusterNode {
	var masters []clusterNode
	for _, n := range st.nodes {
		if len(n.slots) > 0 {
			masters = append(masters, n)
		}
	}
	return masters
}

// slotMap returns which node serves which slots, in a canonical form:
// "0-5460=127.0.0.1:30001 5461-10922=...".
func (st clusterState) slotMap() string {
	var parts []string
	for _, m := range st.masters() {
		for _, r := range m.slots {
			parts = append(parts, r+"="+m.addr)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// owner returns the node that serves slot.
func (st clusterState) owner(slot int) (clusterNode, bool) {
	for _, m := range st.masters() {
		for _, r := range m.slots {
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && l <= slot && slot <= h {
				return m, true
			}
		}
	}
	return clusterNode{}, false
}

// replicasOf returns the replicas of the master whose id is id.
func (st clusterState) replicasOf(id string) []clusterNode {
	var replicas []clusterNode
	for _, n := range st.nodes {
		if n.master == id {
			replicas = append(replicas, n)
		}
	}
	return replicas
}
