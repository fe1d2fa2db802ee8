package redistest

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// mainRunning is set while RunMain runs the tests: the shared servers are
// only stopped by RunMain, so Shared refuses to start one without it.
var mainRunning atomic.Bool

var (
	sharedServer  lazy[*Server]
	sharedCluster lazy[*Cluster]
)

// lazy holds a value started on first use and kept until take.
type lazy[T any] struct {
	mu    sync.Mutex
	done  bool
	value T
	err   error
}

// get returns the value, starting it on the first call. A failed start is
// not retried: every later call gets the same error.
func (l *lazy[T]) get(start func() (T, error)) (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.value, l.err = start()
		l.done = true
	}
	return l.value, l.err
}

// take returns the value if one was started, and forgets it.
func (l *lazy[T]) take() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	value, ok := l.value, l.done && l.err == nil
	var zero T
	l.value, l.done, l.err = zero, false, nil
	return value, ok
}

// Shared returns the test binary's shared server, starting it on first use
// (with the defaults of Start: nothing written to disk). It runs until
// RunMain stops it after the last test, so TestMain must call RunMain.
//
// Tests on the shared server must not Stop, Kill or Restart it, nor run
// commands that reach beyond their own keys (FLUSHALL, FLUSHDB, CONFIG
// SET, ...): every key they use starts with their Prefix.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	requireMain(tb, "Shared")
	s, err := sharedServer.get(func() (*Server, error) { return start(config{}) })
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// SharedCluster is Shared for a Redis Cluster: the test binary's shared
// cluster, started on first use and stopped by RunMain. Tests on it keep
// their keys under their (*Cluster).Prefix.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	requireMain(tb, "SharedCluster")
	c, err := sharedCluster.get(startCluster)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func requireMain(tb testing.TB, name string) {
	tb.Helper()
	if !mainRunning.Load() {
		tb.Fatalf("redistest: %s needs a TestMain that calls os.Exit(redistest.RunMain(m)), which stops the shared servers after the tests", name)
	}
}

// goRedisDialRetry is how long a go-redis pool waits between dials after
// one failed.
const goRedisDialRetry = time.Second

// RunMain runs the tests with m.Run, then stops the shared server and the
// shared cluster if the tests started them, and returns the exit code: the
// tests' code, or 1 if they passed and a server failed to stop cleanly or a
// goroutine is still running (goleak: every package that starts
// goroutines and talks to Redis checks for leaks this way).
// Call it from TestMain:
//
//	func TestMain(m *testing.M) {
//		os.Exit(redistest.RunMain(m))
//	}
func RunMain(m *testing.M) int {
	mainRunning.Store(true)
	code := m.Run()
	mainRunning.Store(false)

	var err error
	if s, ok := sharedServer.take(); ok {
		err = errors.Join(err, s.close())
	}
	if c, ok := sharedCluster.take(); ok {
		err = errors.Join(err, c.close())
	}
	if code == 0 {
		// Every goroutine a test started has ended: none leaks past the
		// Servers, brokers, workers and clients it closed. A go-redis pool
		// whose dials failed (a test killed its Redis) sleeps a second
		// between dials and sees that it was closed only then: look again
		// after that before calling anything a leak.
		if goleak.Find() != nil {
			time.Sleep(goRedisDialRetry + 500*time.Millisecond)
			err = errors.Join(err, goleak.Find())
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
