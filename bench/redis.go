package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// redisServer is the redis-server this program starts for itself.
type redisServer struct {
	*redisProc
	dir string
}

// redisProc is a redis-server process this program started, and a client
// to it alone. It is in children until it exits, so that killChildren
// (Ctrl-C) kills it, and dies with this program (setChildAttrs).
type redisProc struct {
	addr   string
	port   int
	cmd    *exec.Cmd
	exited <-chan struct{}
	client *goredis.Client
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startRedis starts redis-server on a free 127.0.0.1 port with persistence
// off, and waits until it answers PING.
func startRedis(ctx context.Context) (*redisServer, error) {
	bin, err := redisServerBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "machinist-bench-redis-")
	if err != nil {
		return nil, err
	}
	p, err := startRedisProc(ctx, "redis-server", bin, dir, 4, 10*time.Second, nil)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &redisServer{redisProc: p, dir: dir}, nil
}

// redisServerBin finds redis-server in PATH.
func redisServerBin() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("redis-server not found in PATH: install it (apt-get install redis-server, brew install redis)")
	}
	return bin, nil
}

// startRedisProc starts redis-server bin on a free 127.0.0.1 port with
// persistence off, its files in dir and its log in dir/redis-<port>.log,
// with the arguments extra returns for the port (nil: none), a client of
// poolSize connections, and waits up to timeout until it answers PING. It
// tries five ports; what names it in errors.
func startRedisProc(ctx context.Context, what, bin, dir string, poolSize int, timeout time.Duration, extra func(port int) ([]string, error)) (*redisProc, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		p := strconv.Itoa(port)
		logFile := filepath.Join(dir, "redis-"+p+".log")
		args := []string{"--port", p, "--bind", "127.0.0.1"}
		if extra != nil {
			more, err := extra(port)
			if err != nil {
				return nil, err
			}
			args = append(args, more...)
		}
		args = append(args, "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", logFile,
			"--daemonize", "no", "--protected-mode", "yes")
		cmd := exec.Command(bin, args...)
		setChildAttrs(cmd)
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", what, err)
		}
		rp := &redisProc{addr: "127.0.0.1:" + p, port: port, cmd: cmd, exited: track(cmd)}
		rp.client = goredis.NewClient(&goredis.Options{Addr: rp.addr, PoolSize: poolSize})
		if lastErr = answers(ctx, rp.client, rp.exited, timeout); lastErr == nil {
			return rp, nil
		}
		if ctx.Err() != nil {
			rp.stop()
			return nil, ctx.Err()
		}
		log, _ := os.ReadFile(logFile)
		lastErr = fmt.Errorf("%s on port %d did not start: %v\n%s", what, port, lastErr, log)
		rp.stop()
	}
	return nil, lastErr
}

// stop kills the process and waits (up to 5 s) until it has exited. Safe
// to call twice.
func (p *redisProc) stop() {
	if p == nil || p.cmd == nil {
		return
	}
	if p.client != nil {
		p.client.Close()
	}
	p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
	p.cmd = nil
}

// stop kills redis-server and removes its directory. Safe to call twice.
func (r *redisServer) stop() {
	if r == nil {
		return
	}
	r.redisProc.stop()
	if r.dir != "" {
		os.RemoveAll(r.dir)
		r.dir = ""
	}
}

// reset empties the server and its statistics: FLUSHALL and CONFIG RESETSTAT.
func (r *redisServer) reset(ctx context.Context) error {
	if err := r.client.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	return r.resetStat(ctx)
}

func (r *redisServer) resetStat(ctx context.Context) error {
	if err := r.client.ConfigResetStat(ctx).Err(); err != nil {
		return fmt.Errorf("CONFIG RESETSTAT: %w", err)
	}
	return nil
}

// info is a snapshot of the INFO figures the cost workload uses.
type info struct {
	calls      int64   // sum of commandstats calls, since the last RESETSTAT
	cpuSeconds float64 // used_cpu_sys + used_cpu_user, since the start
	usedMemory int64   // used_memory
	version    string
}

var cmdstatCalls = regexp.MustCompile(`^cmdstat_([^:]+):calls=(\d+)`)

func (r *redisServer) info(ctx context.Context) (info, error) {
	s, err := r.client.Info(ctx, "commandstats", "cpu", "memory", "server").Result()
	if err != nil {
		return info{}, fmt.Errorf("INFO: %w", err)
	}
	var in info
	var sys, user float64
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := cmdstatCalls.FindStringSubmatch(line); m != nil {
			// INFO and CONFIG are the benchmark's own.
			if m[1] == "info" || m[1] == "config|resetstat" || m[1] == "config" {
				continue
			}
			n, _ := strconv.ParseInt(m[2], 10, 64)
			in.calls += n
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_sys":
			sys, _ = strconv.ParseFloat(v, 64)
		case "used_cpu_user":
			user, _ = strconv.ParseFloat(v, 64)
		case "used_memory":
			in.usedMemory, _ = strconv.ParseInt(v, 10, 64)
		case "redis_version":
			in.version = v
		}
	}
	in.cpuSeconds = sys + user
	return in, nil
}

// counters is a snapshot of the cumulative INFO figures the idle workload
// takes the difference of; nothing is reset.
type counters struct {
	calls      map[string]int64 // commandstats calls by command, the benchmark's own INFO and CONFIG left out
	own        int64            // commandstats calls of the benchmark's own INFO and CONFIG
	processed  int64            // total_commands_processed
	cpuSeconds float64          // used_cpu_sys + used_cpu_user
}

// ownCommand reports whether a commandstats entry is the benchmark's own
// (INFO, CONFIG RESETSTAT) rather than a library's.
func ownCommand(name string) bool {
	return name == "info" || name == "config" || strings.HasPrefix(name, "config|")
}

func (r *redisServer) counters(ctx context.Context) (counters, error) {
	s, err := r.client.Info(ctx, "commandstats", "stats", "cpu").Result()
	if err != nil {
		return counters{}, fmt.Errorf("INFO: %w", err)
	}
	c := counters{calls: map[string]int64{}}
	var sys, user float64
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if m := cmdstatCalls.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseInt(m[2], 10, 64)
			if ownCommand(m[1]) {
				c.own += n
			} else {
				c.calls[m[1]] = n
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch k {
		case "total_commands_processed":
			c.processed, _ = strconv.ParseInt(v, 10, 64)
		case "used_cpu_sys":
			sys, _ = strconv.ParseFloat(v, 64)
		case "used_cpu_user":
			user, _ = strconv.ParseFloat(v, 64)
		}
	}
	c.cpuSeconds = sys + user
	return c, nil
}

// answers pings client until the redis-server answers, it exits (exited
// closes), ctx ends or timeout passes, and returns the last ping's error.
func answers(ctx context.Context, client *goredis.Client, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := client.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return err
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
			if !time.Now().Before(deadline) {
				return err
			}
		}
	}
}
