package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

const (
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// clusterReadyTimeout bounds the wait for a new cluster's nodes to
	// meet and agree on the slots.
	clusterReadyTimeout = 20 * time.Second
	// clusterNodeStartTimeout bounds the wait for one node to answer PING.
	clusterNodeStartTimeout = 10 * time.Second
)

// redisCluster is a Redis Cluster of masters without replicas that the
// scale workload starts for itself: cluster-enabled redis-servers on free
// 127.0.0.1 ports (persistence off), master i serving the i-th of
// len(nodes) even ranges of the slots (slotRange). Like the bench's own
// redis-server, every node is in its own process group, dies with this
// program (Pdeathsig on Linux) and is killed by killChildren on Ctrl-C.
type redisCluster struct {
	dir   string // one directory for every node's nodes-<port>.conf and log
	nodes []*clusterNode
}

// clusterNode is one master of a redisCluster; its client is to this node
// alone (INFO, FLUSHALL, CLUSTER …).
type clusterNode struct {
	*redisProc
	busPort int
	lo, hi  int // the slots it serves, inclusive
}

// slotRange returns the slots master i of masters serves: an even share,
// the lowest slots to master 0.
func slotRange(i, masters int) (lo, hi int) {
	return i * clusterSlots / masters, (i+1)*clusterSlots/masters - 1
}

// startCluster starts a cluster of the given number of masters, assigns
// each its slots (CLUSTER ADDSLOTSRANGE), has the first meet the others
// (CLUSTER MEET) and waits until every node says cluster_state:ok and sees
// every master with the slots it was given. On an error it stops what it
// started.
func startCluster(ctx context.Context, masters int) (_ *redisCluster, err error) {
	if masters < 1 {
		return nil, fmt.Errorf("a cluster of %d masters", masters)
	}
	bin, err := redisServerBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "machinist-bench-cluster-")
	if err != nil {
		return nil, err
	}
	c := &redisCluster{dir: dir}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()
	for i := 0; i < masters; i++ {
		n, err := startClusterNode(ctx, bin, dir)
		if err != nil {
			return nil, err
		}
		n.lo, n.hi = slotRange(i, masters)
		c.nodes = append(c.nodes, n)
	}
	for i, n := range c.nodes {
		// Distinct config epochs, as redis-cli --cluster create sets them,
		// so that the masters need not settle a collision first.
		if err := n.client.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return nil, fmt.Errorf("%s: CLUSTER SET-CONFIG-EPOCH: %w", n.addr, err)
		}
		if err := n.client.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", n.lo, n.hi).Err(); err != nil {
			return nil, fmt.Errorf("%s: CLUSTER ADDSLOTSRANGE %d %d: %w", n.addr, n.lo, n.hi, err)
		}
	}
	for _, n := range c.nodes[1:] {
		if err := c.nodes[0].client.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.port, n.busPort).Err(); err != nil {
			return nil, fmt.Errorf("%s: CLUSTER MEET %s: %w", c.nodes[0].addr, n.addr, err)
		}
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// startClusterNode starts one cluster-enabled redis-server in dir on free
// ports (client and cluster bus) and waits until it answers PING; it tries
// new ports up to five times, in case another process took one meanwhile.
func startClusterNode(ctx context.Context, bin, dir string) (*clusterNode, error) {
	var busPort int
	p, err := startRedisProc(ctx, "cluster node redis-server", bin, dir, 2, clusterNodeStartTimeout, func(port int) ([]string, error) {
		for busPort = port; busPort == port; {
			var err error
			if busPort, err = freePort(); err != nil {
				return nil, err
			}
		}
		return []string{
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes-" + strconv.Itoa(port) + ".conf",
			"--cluster-port", strconv.Itoa(busPort),
			// A node that has met no other does not know its own address
			// and lists itself as ":<port>" (CLUSTER NODES, CLUSTER SLOTS):
			// a cluster of one master would send its clients nowhere.
			"--cluster-announce-ip", "127.0.0.1",
		}, nil
	})
	if err != nil {
		return nil, err
	}
	return &clusterNode{redisProc: p, busPort: busPort}, nil
}

// waitReady polls every node until it reports cluster_state:ok with every
// slot served and every node known, and lists each master with exactly the
// slots it was given.
func (c *redisCluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
	defer cancel()
	start := time.Now()
	for {
		err := c.check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s not ready after %s: %w", c.url(), time.Since(start).Round(time.Millisecond), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *redisCluster) check(ctx context.Context) error {
	want := map[string]string{} // addr → its slots as CLUSTER NODES lists them
	for _, n := range c.nodes {
		want[n.addr] = fmt.Sprintf("%d-%d", n.lo, n.hi)
	}
	for _, n := range c.nodes {
		s, err := n.client.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", n.addr, err)
		}
		f := infoMap(s)
		if f["cluster_state"] != "ok" || f["cluster_slots_ok"] != strconv.Itoa(clusterSlots) ||
			f["cluster_known_nodes"] != strconv.Itoa(len(c.nodes)) {
			return fmt.Errorf("%s: cluster_state:%s cluster_slots_ok:%s cluster_known_nodes:%s",
				n.addr, f["cluster_state"], f["cluster_slots_ok"], f["cluster_known_nodes"])
		}
		s, err = n.client.ClusterNodes(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER NODES: %w", n.addr, err)
		}
		// <id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot> ...
		seen := 0
		for _, line := range strings.Split(s, "\n") {
			fl := strings.Fields(line)
			if len(fl) < 8 {
				continue
			}
			addr, _, _ := strings.Cut(fl[1], "@")
			slots := strings.Join(fl[8:], " ")
			if w, ok := want[addr]; !ok || slots != w || !strings.Contains(fl[2], "master") ||
				strings.Contains(fl[2], "fail") || fl[7] != "connected" {
				return fmt.Errorf("%s sees %s as %s %s serving %q", n.addr, addr, fl[2], fl[7], slots)
			}
			seen++
		}
		if seen != len(c.nodes) {
			return fmt.Errorf("%s sees %d masters, want %d", n.addr, seen, len(c.nodes))
		}
	}
	return nil
}

// infoMap parses the "key:value" lines of INFO or CLUSTER INFO.
func infoMap(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}

// url is the cluster's URL as machinist takes it, with every master's
// address: "redis://127.0.0.1:P1,127.0.0.1:P2,…".
func (c *redisCluster) url() string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr
	}
	return "redis://" + strings.Join(addrs, ",")
}

// masterOf returns the index of the master serving slot.
func (c *redisCluster) masterOf(slot int) int {
	for i, n := range c.nodes {
		if n.lo <= slot && slot <= n.hi {
			return i
		}
	}
	return -1
}

// checkSlot asks the cluster for key's slot (CLUSTER KEYSLOT) and fails if
// keySlot computes another.
func (c *redisCluster) checkSlot(ctx context.Context, key string) error {
	got, err := c.nodes[0].client.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("CLUSTER KEYSLOT %s: %w", key, err)
	}
	if int(got) != keySlot(key) {
		return fmt.Errorf("CLUSTER KEYSLOT %s is %d; keySlot computed %d", key, got, keySlot(key))
	}
	return nil
}

// shards returns the shards of queue that machinist recorded in c (the
// queue, then queue{k for each suffix k of the record's field).
func (c *redisCluster) shards(ctx context.Context, queue string) ([]string, error) {
	const record = "machinist:shards"
	raw, err := c.nodes[c.masterOf(keySlot(record))].client.HGet(ctx, record, queue).Result()
	if err != nil {
		return nil, fmt.Errorf("read the shards of %s: %w", queue, err)
	}
	names := []string{queue}
	for _, k := range strings.Fields(raw) {
		names = append(names, queue+"{"+k)
	}
	return names, nil
}

// reset empties every master and its statistics: FLUSHALL and CONFIG
// RESETSTAT on each.
func (c *redisCluster) reset(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := n.client.FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("%s: FLUSHALL: %w", n.addr, err)
		}
		if err := n.client.ConfigResetStat(ctx).Err(); err != nil {
			return fmt.Errorf("%s: CONFIG RESETSTAT: %w", n.addr, err)
		}
	}
	return nil
}

// cpuSeconds returns each master's used_cpu_sys + used_cpu_user (INFO cpu),
// in the order of nodes.
func (c *redisCluster) cpuSeconds(ctx context.Context) ([]float64, error) {
	out := make([]float64, len(c.nodes))
	for i, n := range c.nodes {
		s, err := n.client.Info(ctx, "cpu").Result()
		if err != nil {
			return nil, fmt.Errorf("%s: INFO cpu: %w", n.addr, err)
		}
		f := infoMap(s)
		sys, err1 := strconv.ParseFloat(f["used_cpu_sys"], 64)
		user, err2 := strconv.ParseFloat(f["used_cpu_user"], 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: INFO cpu without used_cpu_sys and used_cpu_user", n.addr)
		}
		out[i] = sys + user
	}
	return out, nil
}

// ticks returns the CPU time of every node together, in clock ticks
// (/proc/<pid>/stat); ok is false where /proc is not available.
func (c *redisCluster) ticks() (int64, bool) {
	var sum int64
	for _, n := range c.nodes {
		t, ok := procTicks(strconv.Itoa(n.cmd.Process.Pid), false)
		if !ok {
			return 0, false
		}
		sum += t
	}
	return sum, true
}

// stop kills every node and removes the cluster's directory. Safe to call
// twice and on a cluster only partly started.
func (c *redisCluster) stop() {
	if c == nil {
		return
	}
	for _, n := range c.nodes {
		n.stop()
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
		c.dir = ""
	}
}

// keySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) mod 16384
// of its hash tag — what lies between the first '{' and the next '}', if
// that is not empty — or of the whole key. machinist tags every key of a
// queue {<queue>}, so a queue's slot is keySlot of its name (without
// braces in it).
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % clusterSlots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the one
// Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
