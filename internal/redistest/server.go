package redistest

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startAttempts is how many ports Start tries when the one it picked is
	// taken before redis-server binds it.
	startAttempts = 5
	// readyTimeout bounds the wait for a started server to answer PING and
	// finish loading its data.
	readyTimeout = 10 * time.Second
	// pollInterval is how often a readiness condition is polled.
	pollInterval = 10 * time.Millisecond
	// stopGrace is how long a server has to exit after SHUTDOWN or SIGTERM
	// before it is killed.
	stopGrace = 5 * time.Second
	// killWait bounds the wait for a SIGKILLed server to be reaped.
	killWait = 10 * time.Second

	logFile    = "redis.log"
	outputFile = "output.log"
)

// Option configures a server started by Start.
type Option func(*config)

type config struct {
	aof     bool
	cluster bool
	tls     bool
	// replicas is the number of replicas per master of a cluster
	// (WithReplicas).
	replicas int
	// sentinelOf, when not 0, makes the server a sentinel monitoring the
	// master on that port (StartSentinel).
	sentinelOf int
	args       []string
}

// WithAOF turns on the append-only file with an fsync after every write
// (appendonly yes, appendfsync always), so that every acknowledged write
// survives Kill and is loaded again by Restart.
func WithAOF() Option {
	return func(c *config) { c.aof = true }
}

// WithArgs adds redis-server command-line arguments, such as
// WithArgs("--maxmemory", "10mb"). They come last, so they override the
// defaults; they must not change port, bind, dir, logfile or daemonize,
// which the Server relies on.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithTLS serves TLS only: redis-server listens with --tls-port on the
// server's port and has no plain TCP port (--port 0). Its certificate, for
// 127.0.0.1, ::1 and localhost, is signed by a CA the test binary generates;
// CACertFile and TLSConfig give clients what they need to trust it, and URL
// is "rediss://...". Clients are not asked for a certificate. With
// StartCluster, the cluster bus and replication use TLS as well.
//
// It needs a redis-server built with TLS (BUILD_TLS=yes, as Debian's and
// Ubuntu's packages are); with another, the test fails saying so.
func WithTLS() Option {
	return func(c *config) { c.tls = true }
}

// Server is a redis-server process started for tests. Its methods may be
// called from several goroutines, but only the test that started a server
// should stop, kill or restart it.
type Server struct {
	bin   string
	port  int
	ports []int // reserved: port, plus the cluster bus port of a cluster node
	dir   string
	args  []string
	// tlsConf is the client TLS configuration of a server started WithTLS,
	// nil for a plain one.
	tlsConf *tls.Config
	// sentinel is set for a server in sentinel mode (StartSentinel).
	sentinel bool

	mu     sync.Mutex
	proc   *process // nil while the server is not running
	closed bool
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // the exit status, set before done is closed
}

// Start starts a redis-server on a free loopback port, in a temporary
// directory of its own, and waits until it answers PING. The server runs
// with `--save "" --appendonly no` (nothing is written to disk) unless
// options say otherwise, and is shut down when the test and its subtests
// have finished: SIGTERM, then SIGKILL if it has not exited after 5 s.
//
// If redis-server is not installed, the test fails saying how to install it.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	var cfg config
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.replicas != 0 {
		tb.Fatal("redistest: WithReplicas is an option of StartCluster, not of Start")
	}
	s, err := start(cfg)
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

// Addr returns the server's address, "127.0.0.1:PORT".
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// URL returns the server's URL, "redis://127.0.0.1:PORT", or
// "rediss://127.0.0.1:PORT" for a server started WithTLS.
func (s *Server) URL() string {
	if s.tlsConf != nil {
		return "rediss://" + s.Addr()
	}
	return "redis://" + s.Addr()
}

// Client returns a go-redis client connected to the server (over TLS for
// a server started WithTLS), closed when the test finishes.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), TLSConfig: s.TLSConfig()})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop shuts the server down gracefully with SHUTDOWN (which writes the AOF
// or RDB file as configured) and waits for the process to exit. The port
// and directory stay the server's, for Restart. The test fails if the
// server does not exit within 5 s.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.stopLocked(); err != nil {
		tb.Fatal(err)
	}
}

// Kill kills the server with SIGKILL, as a crash would, and waits for the
// process to exit. Writes that were acknowledged but not yet on disk are
// lost; with WithAOF there are none.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		tb.Fatalf("redistest: kill %s: %v", s.Addr(), errNotRunning)
	}
	if err := s.proc.kill(); err != nil {
		tb.Fatalf("redistest: kill %s: %v", s.Addr(), err)
	}
	s.proc = nil
}

// Restart starts the server again on the same port, in the same directory
// and with the same arguments, so that it reloads its AOF (or RDB) file,
// and waits until it answers PING and has finished loading (INFO
// persistence reports loading:0). A running server is first stopped as by
// Stop. Clients obtained before keep working: go-redis reconnects.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		tb.Fatalf("redistest: restart %s: the server has been cleaned up", s.Addr())
	}
	if s.proc != nil {
		if err := s.stopLocked(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := s.launch(); err != nil {
		tb.Fatalf("redistest: restart %s: %v", s.Addr(), err)
	}
}

// running reports whether the server process is up.
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// start starts a server, trying another port when the one picked is taken
// before redis-server binds it.
func start(cfg config) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errServerNotFound
	}
	var lastErr error
	for range startAttempts {
		s, err := tryStart(bin, cfg)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errAddrInUse) {
			return nil, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("redistest: redis-server failed to bind a free port %d times: %w", startAttempts, lastErr)
}

func tryStart(bin string, cfg config) (*Server, error) {
	ports, err := reservePorts(cfg.cluster)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		releasePorts(ports)
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s := &Server{
		bin:      bin,
		port:     ports[0],
		ports:    ports,
		dir:      dir,
		args:     serverArgs(cfg, ports[0], dir),
		sentinel: cfg.sentinelOf != 0,
	}
	if s.sentinel {
		if s.args, err = sentinelArgs(ports[0], dir, cfg.sentinelOf); err != nil {
			releasePorts(ports)
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	if cfg.tls {
		p, err := pki()
		if err == nil {
			err = p.writeFiles(dir)
		}
		if err != nil {
			releasePorts(ports)
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s.tlsConf = p.clientConfig()
	}
	s.mu.Lock()
	err = s.launch()
	s.mu.Unlock()
	if err != nil {
		releasePorts(ports)
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// serverArgs returns the redis-server command line. Later arguments override
// earlier ones, so options come after the defaults and WithArgs comes last.
func serverArgs(cfg config, port int, dir string) []string {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--daemonize", "no",
		"--dir", dir,
		"--logfile", filepath.Join(dir, logFile),
		"--save", "",
		"--appendonly", "no",
	}
	if cfg.tls {
		args = append(args, tlsArgs(port, dir, cfg.cluster)...)
	}
	if cfg.cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
		)
		if cfg.replicas > 0 {
			args = append(args, replicaArgs...)
		}
	}
	if cfg.aof {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	return append(args, cfg.args...)
}

// launch runs redis-server and waits until it is ready. s.mu must be held.
func (s *Server) launch() error {
	out, err := os.OpenFile(filepath.Join(s.dir, outputFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout = out // an *os.File: no copying goroutine, nothing to leak
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	_ = out.Close()
	if err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()

	if err := s.waitReady(p); err != nil {
		_ = p.kill()
		if s.logContains("Address already in use") {
			return fmt.Errorf("%w: %s", errAddrInUse, s.Addr())
		}
		if s.tlsConf != nil && s.tlsUnsupported() {
			return fmt.Errorf("%w (%s)\n%s", errTLSUnsupported, s.bin, s.logTail())
		}
		return fmt.Errorf("redistest: redis-server on %s: %w\n%s", s.Addr(), err, s.logTail())
	}
	s.proc = p
	return nil
}

// waitReady polls the server until it answers PING, has finished loading
// its data, and is the process just started: another server may be
// listening on the port, in which case ours fails to bind and exits.
func (s *Server) waitReady(p *process) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		err := probeServer(ctx, s.Addr(), s.tlsConf, p.cmd.Process.Pid, s.sentinel)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before it was ready: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %w", readyTimeout, err)
		case <-ticker.C:
		}
	}
}

// probeServer returns nil if the server at addr answers PING, is not
// loading (or, for a sentinel, runs in sentinel mode), and has process id
// pid. It speaks TLS with tc unless tc is nil.
func probeServer(ctx context.Context, addr string, tc *tls.Config, pid int, sentinel bool) error {
	replies, err := probeTLS(ctx, addr, tc, []string{"PING"}, []string{"INFO"})
	if err != nil {
		return err
	}
	fields := infoFields(replies[1])
	if got := fields["process_id"]; got != strconv.Itoa(pid) {
		return fmt.Errorf("answered by process %s, not by redis-server %d", got, pid)
	}
	if sentinel {
		if fields["redis_mode"] != "sentinel" {
			return fmt.Errorf("redis_mode:%s, want sentinel", fields["redis_mode"])
		}
		return nil
	}
	if fields["loading"] != "0" {
		return fmt.Errorf("still loading (loading:%s)", fields["loading"])
	}
	return nil
}

// infoFields parses the "name:value" lines of an INFO reply.
func infoFields(info string) map[string]string {
	fields := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			fields[name] = value
		}
	}
	return fields
}

// probe runs commands on a connection of its own to the server, over TLS
// for a server started WithTLS, and returns their replies.
func (s *Server) probe(ctx context.Context, cmds ...[]string) ([]string, error) {
	return probeTLS(ctx, s.Addr(), s.tlsConf, cmds...)
}

// stopLocked shuts the server down with SHUTDOWN and waits for it to exit,
// killing it if it has not after stopGrace. s.mu must be held.
func (s *Server) stopLocked() error {
	p := s.proc
	if p == nil {
		return fmt.Errorf("redistest: stop %s: %w", s.Addr(), errNotRunning)
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	// The server closes the connection as it exits: a reply is a refusal.
	_, shutdownErr := s.probe(ctx, []string{"SHUTDOWN"})

	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.kill()
		s.proc = nil
		return fmt.Errorf("redistest: %s did not exit within %v of SHUTDOWN (%v); killed it\n%s",
			s.Addr(), stopGrace, shutdownErr, s.logTail())
	}
	s.proc = nil
	if p.err != nil {
		return fmt.Errorf("redistest: %s exited with %v after SHUTDOWN\n%s", s.Addr(), p.err, s.logTail())
	}
	return nil
}

// close terminates the server if it is running (SIGTERM, then SIGKILL after
// stopGrace), removes its directory and gives back its ports. It is safe to
// call twice.
func (s *Server) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if p := s.proc; p != nil {
		s.proc = nil
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(stopGrace)
		select {
		case <-p.done:
			timer.Stop()
		case <-timer.C:
			err = fmt.Errorf("redistest: %s did not exit within %v of SIGTERM; killed it\n%s",
				s.Addr(), stopGrace, s.logTail())
			if kerr := p.kill(); kerr != nil {
				err = errors.Join(err, kerr)
			}
		}
	}
	if rerr := os.RemoveAll(s.dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("redistest: %w", rerr))
	}
	releasePorts(s.ports)
	return err
}

// kill sends SIGKILL and waits for the process to be reaped.
func (p *process) kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	timer := time.NewTimer(killWait)
	defer timer.Stop()
	select {
	case <-p.done:
		return nil
	case <-timer.C:
		return fmt.Errorf("process %d still not reaped %v after SIGKILL", p.cmd.Process.Pid, killWait)
	}
}

// logContains reports whether the server's log or output contains s.
func (s *Server) logContains(text string) bool {
	for _, name := range []string{logFile, outputFile} {
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if err == nil && strings.Contains(string(b), text) {
			return true
		}
	}
	return false
}

// logTail returns the last lines of the server's log and output, for error
// messages.
func (s *Server) logTail() string {
	const maxLines = 20
	var b strings.Builder
	for _, name := range []string{logFile, outputFile} {
		data, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil || len(strings.TrimSpace(string(data))) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > maxLines {
			lines = lines[len(lines)-maxLines:]
		}
		fmt.Fprintf(&b, "--- %s ---\n%s\n", name, strings.Join(lines, "\n"))
	}
	return b.String()
}
