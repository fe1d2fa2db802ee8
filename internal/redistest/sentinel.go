package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name under which the sentinels of StartSentinel
// monitor their master: the MasterName of a client of the group.
const SentinelMaster = "mymaster"

const (
	// sentinelCount is the number of sentinels of a group, and
	// sentinelQuorum how many of them must agree that the master is down.
	sentinelCount  = 3
	sentinelQuorum = 2
	// sentinelDownAfter is how long the master may fail to answer before a
	// sentinel thinks it down (down-after-milliseconds). Shorter, and a
	// loaded machine (a busy CI runner, -race) has a healthy master failed
	// over now and then.
	sentinelDownAfter = 2 * time.Second
	// sentinelFailoverTimeout is Sentinel's failover-timeout: how long the
	// promoted replica has to report itself a master before the failover is
	// aborted, and half the pause before a sentinel tries again to fail
	// over a master it voted not to fail over itself.
	sentinelFailoverTimeout = 4 * time.Second
	// sentinelInfoPeriod is how often a sentinel sends INFO to the servers
	// it monitors (SENTINEL DEBUG info-period; 10 s by default). A former
	// master that comes back as a master is turned into a replica only when
	// a sentinel has read its INFO: at the default period a failover would
	// take more than ten seconds to end.
	sentinelInfoPeriod = time.Second
	// sentinelPublishPeriod is how often a sentinel publishes its hello
	// message (SENTINEL DEBUG publish-period; 2 s by default), by which the
	// sentinels find each other. A sentinel also waits four periods after a
	// former master came back as a master before making it a replica: 8 s
	// at the default period.
	sentinelPublishPeriod = 250 * time.Millisecond
	// sentinelPingPeriod is how often a sentinel PINGs the servers
	// (SENTINEL DEBUG ping-period; 1 s by default). It must be well below
	// sentinelDownAfter: a sentinel that has just switched to a new master
	// sends it its first PING one period later, and finds it down if the
	// reply has not come within sentinelDownAfter of the switch (with both
	// at 1 s, a loaded machine had new masters failed over again).
	sentinelPingPeriod = 200 * time.Millisecond
	// sentinelTiltPeriod is how long a sentinel stays in TILT mode, taking
	// no action, after its timer ran more than 2 s late (SENTINEL DEBUG
	// tilt-period; 30 s by default). A loaded machine stalls processes
	// that long now and then.
	sentinelTiltPeriod = 5 * time.Second
	// sentinelReadyTimeout bounds the wait for a new group to be in sync
	// and known by every sentinel.
	sentinelReadyTimeout = 20 * time.Second
	// failoverWait bounds the wait for a failover (manual or automatic)
	// to end with the former master in sync as a replica.
	failoverWait = 30 * time.Second
	// sentinelPollInterval is how often the group's state is polled.
	sentinelPollInterval = 20 * time.Millisecond

	sentinelConfFile = "sentinel.conf"
)

// Sentinel is a Redis Sentinel group started for tests: a master, one
// replica and three sentinels monitoring them under SentinelMaster. Which
// of the two servers is the master changes with Failover and KillMaster;
// Master and Replica ask the sentinels. Only the test that started a group
// should fail it over.
type Sentinel struct {
	servers   []*Server // the two data servers; the first was the master at start
	sentinels []*Server // redis-servers in sentinel mode
}

// StartSentinel starts a master and a replica (redis-servers on free
// loopback ports, as Start does; opts, WithAOF or WithArgs, apply to both)
// and three sentinels monitoring them under SentinelMaster with a quorum
// of 2, a down-after-milliseconds of 2 s and a failover-timeout of 4 s, so
// that a failover ends within seconds. It returns once the replica is in
// sync (master_link_status:up) and every sentinel knows the master, the
// replica and the two other sentinels. Everything is shut down when the
// test finishes, the sentinels first.
//
// If redis-server is not installed, the test fails saying how to install it.
func StartSentinel(tb testing.TB, opts ...Option) *Sentinel {
	tb.Helper()
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.tls || cfg.replicas != 0 {
		tb.Fatal("redistest: StartSentinel takes WithAOF and WithArgs; WithTLS and WithReplicas are not supported")
	}
	s, err := startSentinel(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// Addrs returns the addresses of the three sentinels.
func (s *Sentinel) Addrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, p := range s.sentinels {
		addrs[i] = p.Addr()
	}
	return addrs
}

// URL returns the sentinels' URL, "redis://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3",
// for a configuration whose Redis.MasterName is SentinelMaster.
func (s *Sentinel) URL() string {
	return "redis://" + strings.Join(s.Addrs(), ",")
}

// Client returns a go-redis failover client of the group (one that asks the
// sentinels for the master and follows failovers), closed when the test
// finishes.
func (s *Sentinel) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    SentinelMaster,
		SentinelAddrs: s.Addrs(),
	})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Master returns the server the sentinels report as the master. It waits,
// up to 30 s, until all three agree.
func (s *Sentinel) Master(tb testing.TB) *Server {
	tb.Helper()
	master, _ := s.roles(tb)
	return master
}

// Replica returns the server that is not the master (see Master).
func (s *Sentinel) Replica(tb testing.TB) *Server {
	tb.Helper()
	_, replica := s.roles(tb)
	return replica
}

func (s *Sentinel) roles(tb testing.TB) (master, replica *Server) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failoverWait)
	defer cancel()
	err := poll(ctx, func() (err error) {
		master, replica, err = s.current(ctx)
		return err
	})
	if err != nil {
		tb.Fatalf("redistest: sentinels %s: no agreed master after %v: %v", s.URL(), failoverWait, err)
	}
	return master, replica
}

// Failover makes the replica the master with SENTINEL FAILOVER, as an
// operator would, and returns it once every sentinel reports it as the
// master, it reports role:master, and the former master has become its
// replica and is in sync. Sentinel neither pauses the master's clients nor
// waits for the replica to catch up: writes the master acknowledges after
// the replica's promotion, until its clients learn of the switch, are lost
// when it becomes a replica. Should the failover be aborted, or undone by
// the sentinels, Failover asks again. The group must be whole when
// Failover is called (as StartSentinel, Failover and Restart leave it);
// Failover waits for that first.
func (s *Sentinel) Failover(tb testing.TB) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*failoverWait)
	defer cancel()
	master, replica := s.roles(tb)
	if err := s.waitSettled(ctx, master, replica); err != nil {
		tb.Fatalf("redistest: failover: %v", err)
	}
	// A sentinel refuses while a failover is still in progress (INPROG) or
	// it has not read the replica's INFO recently enough (NOGOODSLAVE). A
	// failover can also fail: aborted because the replica took longer than
	// failover-timeout to report itself a master, or undone by a second,
	// automatic one because the new master was slow to answer. So, while
	// the group is whole with the former master, ask again.
	var refused error
	err := poll(ctx, func() error {
		err := s.settled(ctx, replica, master)
		if err == nil {
			return nil
		}
		if s.settled(ctx, master, replica) == nil {
			_, refused = query(ctx, s.sentinels[0].Addr(), "SENTINEL", "FAILOVER", SentinelMaster)
		}
		return err
	})
	if err != nil {
		tb.Fatalf("redistest: failover from %s to %s (SENTINEL FAILOVER %s on %s: %v): %v\n%s",
			master.Addr(), replica.Addr(), SentinelMaster, s.sentinels[0].Addr(), refused, err, s.sentinels[0].logTail())
	}
	return replica
}

// KillMaster kills the master with SIGKILL, as a crash would, and returns
// it once the sentinels have found it down and promoted the replica: every
// sentinel reports the replica as the master and it reports role:master
// (about 2 s after the kill). Writes the replica had not received when the
// master died are lost. The group has no replica until Restart brings the
// killed server back.
func (s *Sentinel) KillMaster(tb testing.TB) *Server {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*failoverWait)
	defer cancel()
	master, replica := s.roles(tb)
	if err := s.waitSettled(ctx, master, replica); err != nil {
		tb.Fatalf("redistest: kill master: %v", err)
	}
	master.Kill(tb)
	if err := poll(ctx, func() error { return s.promoted(ctx, replica) }); err != nil {
		tb.Fatalf("redistest: %s not promoted after its master %s was killed: %v\n%s",
			replica.Addr(), master.Addr(), err, s.sentinels[0].logTail())
	}
	return master
}

// Restart starts a server killed by KillMaster again, empty, as a replica
// of the current master (never as a master, even for a moment), and waits
// until it is in sync and every sentinel knows it as the replica.
func (s *Sentinel) Restart(tb testing.TB, killed *Server) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), failoverWait)
	defer cancel()
	master, replica := s.roles(tb)
	if replica != killed {
		tb.Fatalf("redistest: restart %s: it is the master, not the killed server", killed.Addr())
	}
	if err := killed.restartAsReplica(master); err != nil {
		tb.Fatalf("redistest: restart %s as a replica of %s: %v", killed.Addr(), master.Addr(), err)
	}
	if err := s.waitSettled(ctx, master, killed); err != nil {
		tb.Fatalf("redistest: restart %s: %v", killed.Addr(), err)
	}
}

// startSentinel starts the two data servers, then the sentinels, and waits
// until the group is settled.
func startSentinel(cfg config) (_ *Sentinel, err error) {
	s := &Sentinel{}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
		}
	}()

	// No delay before a full resynchronisation (5 s by default): the former
	// master resynchronises from the new one at the end of every failover.
	cfg.args = append([]string{"--repl-diskless-sync-delay", "0"}, cfg.args...)
	master, err := start(cfg)
	if err != nil {
		return nil, err
	}
	s.servers = append(s.servers, master)
	replicaCfg := cfg
	replicaCfg.args = append(slices.Clip(cfg.args), "--replicaof", "127.0.0.1", strconv.Itoa(master.port))
	replica, err := start(replicaCfg)
	if err != nil {
		return nil, err
	}
	s.servers = append(s.servers, replica)

	ctx, cancel := context.WithTimeout(context.Background(), sentinelReadyTimeout)
	defer cancel()
	for range sentinelCount {
		p, err := start(config{sentinelOf: master.port})
		if err != nil {
			return nil, err
		}
		s.sentinels = append(s.sentinels, p)
		if err := shortenTimers(ctx, p); err != nil {
			return nil, err
		}
	}

	if err := s.waitSettled(ctx, master, replica); err != nil {
		return nil, err
	}
	return s, nil
}

// waitSettled polls until master and replica are in place and in sync and
// every sentinel agrees (see settled).
func (s *Sentinel) waitSettled(ctx context.Context, master, replica *Server) error {
	err := poll(ctx, func() error { return s.settled(ctx, master, replica) })
	if err != nil {
		return fmt.Errorf("sentinel group %s (master %s, replica %s) not settled: %w\n%s",
			s.URL(), master.Addr(), replica.Addr(), err, s.sentinels[0].logTail())
	}
	return nil
}

// settled returns nil if master reports role:master, replica reports
// role:slave of master with master_link_status:up, and every sentinel
// reports master as the master, not down, with replica as its one replica
// (link ok, not down) and the two other sentinels.
func (s *Sentinel) settled(ctx context.Context, master, replica *Server) error {
	if err := s.promoted(ctx, master); err != nil {
		return err
	}
	replies, err := probe(ctx, replica.Addr(), []string{"INFO", "replication"})
	if err != nil {
		return fmt.Errorf("replica %s: %w", replica.Addr(), err)
	}
	f := infoFields(replies[0])
	if f["role"] != "slave" || f["master_port"] != strconv.Itoa(master.port) || f["master_link_status"] != "up" {
		return fmt.Errorf("replica %s: role:%s master_port:%s master_link_status:%s",
			replica.Addr(), f["role"], f["master_port"], f["master_link_status"])
	}
	for _, p := range s.sentinels {
		m, err := sentinelMap(ctx, p.Addr(), "SENTINEL", "MASTER", SentinelMaster)
		if err != nil {
			return fmt.Errorf("sentinel %s: SENTINEL MASTER: %w", p.Addr(), err)
		}
		if m["flags"] != "master" || m["num-slaves"] != "1" ||
			m["num-other-sentinels"] != strconv.Itoa(sentinelCount-1) {
			return fmt.Errorf("sentinel %s: master flags:%s num-slaves:%s num-other-sentinels:%s",
				p.Addr(), m["flags"], m["num-slaves"], m["num-other-sentinels"])
		}
		reply, err := query(ctx, p.Addr(), "SENTINEL", "REPLICAS", SentinelMaster)
		if err != nil {
			return fmt.Errorf("sentinel %s: SENTINEL REPLICAS: %w", p.Addr(), err)
		}
		list, _ := reply.([]any)
		if len(list) != 1 {
			return fmt.Errorf("sentinel %s: %d replicas, want 1", p.Addr(), len(list))
		}
		r := pairs(list[0])
		if r["name"] != replica.Addr() || r["flags"] != "slave" || r["master-link-status"] != "ok" ||
			r["master-port"] != strconv.Itoa(master.port) {
			return fmt.Errorf("sentinel %s: replica %s flags:%s master-port:%s master-link-status:%s",
				p.Addr(), r["name"], r["flags"], r["master-port"], r["master-link-status"])
		}
	}
	return nil
}

// promoted returns nil if every sentinel reports srv as the master and srv
// reports role:master.
func (s *Sentinel) promoted(ctx context.Context, srv *Server) error {
	for _, p := range s.sentinels {
		addr, err := masterAddr(ctx, p.Addr())
		if err != nil {
			return fmt.Errorf("sentinel %s: %w", p.Addr(), err)
		}
		if addr != srv.Addr() {
			return fmt.Errorf("sentinel %s reports master %s, not %s", p.Addr(), addr, srv.Addr())
		}
	}
	replies, err := probe(ctx, srv.Addr(), []string{"INFO", "replication"})
	if err != nil {
		return fmt.Errorf("master %s: %w", srv.Addr(), err)
	}
	if role := infoFields(replies[0])["role"]; role != "master" {
		return fmt.Errorf("master %s: role:%s", srv.Addr(), role)
	}
	return nil
}

// current returns the server all sentinels report as the master, and the
// other one.
func (s *Sentinel) current(ctx context.Context) (master, replica *Server, err error) {
	var agreed string
	for _, p := range s.sentinels {
		addr, err := masterAddr(ctx, p.Addr())
		if err != nil {
			return nil, nil, fmt.Errorf("sentinel %s: %w", p.Addr(), err)
		}
		if agreed != "" && addr != agreed {
			return nil, nil, fmt.Errorf("sentinels disagree: %s and %s", agreed, addr)
		}
		agreed = addr
	}
	for i, srv := range s.servers {
		if srv.Addr() == agreed {
			return srv, s.servers[1-i], nil
		}
	}
	return nil, nil, fmt.Errorf("sentinels report master %s, which is none of %s and %s",
		agreed, s.servers[0].Addr(), s.servers[1].Addr())
}

// close shuts the sentinels down first, so that they do not fail over a
// server going away, then the two servers.
func (s *Sentinel) close() error {
	errs := make([]error, len(s.sentinels)+len(s.servers))
	var wg sync.WaitGroup
	for i, p := range s.sentinels {
		wg.Go(func() { errs[i] = p.close() })
	}
	wg.Wait()
	for i, srv := range s.servers {
		wg.Go(func() { errs[len(s.sentinels)+i] = srv.close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// restartAsReplica starts the server again, as a replica of master: a
// former master that comes back must not serve its own (empty or stale)
// data as a master, even for a moment.
func (srv *Server) restartAsReplica(master *Server) error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.closed {
		return errors.New("the server has been cleaned up")
	}
	if srv.proc != nil {
		if err := srv.stopLocked(); err != nil {
			return err
		}
	}
	// Later arguments override earlier ones: an older --replicaof is replaced.
	srv.args = append(slices.Clip(srv.args), "--replicaof", "127.0.0.1", strconv.Itoa(master.port))
	return srv.launch()
}

// sentinelArgs writes the configuration file of a sentinel on port, in
// dir, monitoring the master on masterPort (the sentinel rewrites the file
// as it learns the group), and returns the sentinel's command line.
func sentinelArgs(port int, dir string, masterPort int) ([]string, error) {
	name := SentinelMaster
	conf := fmt.Sprintf(`port %d
bind 127.0.0.1
daemonize no
dir %s
logfile %s
sentinel resolve-hostnames no
sentinel announce-ip 127.0.0.1
sentinel monitor %s 127.0.0.1 %d %d
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s %d
sentinel parallel-syncs %s 1
`, port, dir, filepath.Join(dir, logFile),
		name, masterPort, sentinelQuorum,
		name, sentinelDownAfter.Milliseconds(),
		name, sentinelFailoverTimeout.Milliseconds(),
		name)
	path := filepath.Join(dir, sentinelConfFile)
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	return []string{path, "--sentinel"}, nil
}

// shortenTimers shortens a sentinel's periods (sentinelInfoPeriod,
// sentinelPublishPeriod, sentinelPingPeriod, sentinelTiltPeriod).
func shortenTimers(ctx context.Context, p *Server) error {
	for _, set := range []struct {
		name  string
		value time.Duration
	}{
		{"info-period", sentinelInfoPeriod},
		{"publish-period", sentinelPublishPeriod},
		{"ping-period", sentinelPingPeriod},
		{"tilt-period", sentinelTiltPeriod},
	} {
		value := strconv.FormatInt(set.value.Milliseconds(), 10)
		if _, err := query(ctx, p.Addr(), "SENTINEL", "DEBUG", set.name, value); err != nil {
			return fmt.Errorf("redistest: sentinel %s: SENTINEL DEBUG %s %s (Redis 7.0 or later is needed): %w", p.Addr(), set.name, value, err)
		}
	}
	return nil
}

// poll calls cond every sentinelPollInterval until it returns nil or ctx
// ends, and returns its last error.
func poll(ctx context.Context, cond func() error) error {
	return pollUntil(ctx, nil, cond)
}

// pollUntil is poll that also gives up when stop is closed.
func pollUntil(ctx context.Context, stop <-chan struct{}, cond func() error) error {
	ticker := time.NewTicker(sentinelPollInterval)
	defer ticker.Stop()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-stop:
			return fmt.Errorf("exited before it was ready: %w", err)
		case <-ctx.Done():
			return err
		case <-ticker.C:
		}
	}
}

// masterAddr asks the sentinel at addr for the master's address.
func masterAddr(ctx context.Context, addr string) (string, error) {
	reply, err := query(ctx, addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
	if err != nil {
		return "", err
	}
	hostPort, _ := reply.([]any)
	if len(hostPort) != 2 {
		return "", fmt.Errorf("GET-MASTER-ADDR-BY-NAME: unexpected reply %v", reply)
	}
	host, _ := hostPort[0].(string)
	port, _ := hostPort[1].(string)
	return net.JoinHostPort(host, port), nil
}

// sentinelMap runs a command whose reply is a flat array of names and
// values, such as SENTINEL MASTER, and returns it as a map.
func sentinelMap(ctx context.Context, addr string, args ...string) (map[string]string, error) {
	reply, err := query(ctx, addr, args...)
	if err != nil {
		return nil, err
	}
	return pairs(reply), nil
}

// pairs turns a flat array reply of names and values into a map.
func pairs(reply any) map[string]string {
	list, _ := reply.([]any)
	m := make(map[string]string, len(list)/2)
	for i := 0; i+1 < len(list); i += 2 {
		name, _ := list[i].(string)
		value, _ := list[i+1].(string)
		m[name] = value
	}
	return m
}
