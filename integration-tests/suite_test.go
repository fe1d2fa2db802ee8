// Package integration_test is machinist's end-to-end suite in machinery's
// spirit: real Servers and Workers, tasks sent and results awaited. Every
// test runs against every broker/backend pair in pairs(); a new broker adds
// itself there and inherits the whole suite.
package integration_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/waitfor"
	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// pair is one broker/backend combination the suite runs on.
type pair struct {
	name string
	// config returns a fresh configuration for one test.
	config func(t *testing.T) *config.Config
	// eager pairs run tasks inside Send*, with no worker.
	eager bool
}

func pairs() []pair {
	return []pair{
		{name: "memory", config: func(t *testing.T) *config.Config {
			return &config.Config{Broker: "memory://", ResultBackend: "memory://"}
		}},
		{name: "eager", eager: true, config: func(t *testing.T) *config.Config {
			return &config.Config{Broker: "eager", ResultBackend: "eager"}
		}},
		{name: "redis", config: func(t *testing.T) *config.Config {
			srv := redistest.Shared(t)
			return redisConfig(srv.URL(), srv.Prefix(t))
		}},
		{name: "socket", config: func(t *testing.T) *config.Config {
			// machinery's redis+socket:// URL, on a server of the test's
			// own that listens on a Unix socket (a short path: the limit
			// is about 100 bytes).
			dir, err := os.MkdirTemp("", "rs")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			sock := filepath.Join(dir, "redis.sock")
			redistest.Start(t, redistest.WithArgs("--unixsocket", sock, "--unixsocketperm", "700"))
			return redisConfig("redis+socket://"+sock, "socket")
		}},
		{name: "cluster", config: func(t *testing.T) *config.Config {
			c := redistest.SharedCluster(t)
			return redisConfig(c.URL(), c.Prefix(t))
		}},
	}
}

// redisConfig puts broker and backend on the Redis at url, under a key
// prefix of the test's own. Idle workers look up from Redis every 100ms,
// so that stopping one takes no longer.
func redisConfig(url, prefix string) *config.Config {
	return &config.Config{
		Broker:        url,
		ResultBackend: url,
		Redis: &config.RedisConfig{
			KeyPrefix:             strings.TrimSuffix(prefix, ":"),
			NormalTasksPollPeriod: 100,
		},
	}
}

func TestMain(m *testing.M) {
	os.Exit(redistest.RunMain(m))
}

// forEachPair runs test as a parallel subtest on every pair.
func forEachPair(t *testing.T, test func(t *testing.T, p pair)) {
	t.Helper()
	forPairs(t, pairs(), test)
}

func forPairs(t *testing.T, ps []pair, test func(t *testing.T, p pair)) {
	t.Helper()
	for _, p := range ps {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			test(t, p)
		})
	}
}

// env is a Server with the suite's tasks registered and, unless the pair is
// eager, a running worker.
type env struct {
	t      *testing.T
	server *machinery.Server
	calls  *callLog
}

const (
	poll        = 2 * time.Millisecond
	waitTimeout = 30 * time.Second
)

func newEnv(t *testing.T, p pair, mutate ...func(*config.Config)) *env {
	t.Helper()
	cnf := p.config(t)
	cnf.NoUnixSignals = true
	cnf.Logger = slog.New(slog.DiscardHandler)
	for _, m := range mutate {
		m(cnf)
	}
	server, err := machinery.NewServer(cnf)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	e := &env{t: t, server: server, calls: &callLog{}}
	if err := server.RegisterTasks(e.taskFuncs()); err != nil {
		t.Fatalf("RegisterTasks: %v", err)
	}
	// Cleanups run last-registered first: the worker stops before the
	// Server closes.
	t.Cleanup(func() {
		if err := server.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if !p.eager {
		w := server.NewWorker("integration", 10)
		errs := make(chan error, 1)
		w.LaunchAsync(errs)
		t.Cleanup(func() {
			w.Quit()
			if err := <-errs; err != nil {
				t.Errorf("worker stopped with %v", err)
			}
		})
	}
	return e
}

// callLog records task invocations for assertions.
type callLog struct {
	mu    sync.Mutex
	calls map[string][]time.Time
}

func (c *callLog) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string][]time.Time{}
	}
	c.calls[name] = append(c.calls[name], time.Now())
}

func (c *callLog) times(name string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.calls[name]...)
}

func (e *env) taskFuncs() map[string]interface{} {
	var flaky, retryLater atomic.Int32
	return map[string]interface{}{
		"add": func(args ...int64) (int64, error) {
			var sum int64
			for _, a := range args {
				sum += a
			}
			return sum, nil
		},
		"multiply": func(args ...int64) (int64, error) {
			product := int64(1)
			for _, a := range args {
				product *= a
			}
			return product, nil
		},
		"sum_ints": func(numbers []int64) (int64, error) {
			var sum int64
			for _, n := range numbers {
				sum += n
			}
			return sum, nil
		},
		"sum_floats": func(numbers []float64) (float64, error) {
			var sum float64
			for _, n := range numbers {
				sum += n
			}
			return sum, nil
		},
		"concat": func(strs []string) (string, error) { return strings.Join(strs, ""), nil },
		"split":  func(str string) ([]string, error) { return strings.Split(str, ""), nil },
		"bytes":  func(b []byte) (string, error) { return string(b), nil },
		// suffix returns s followed by what it was given after it.
		"suffix":     func(s, prev string) (string, error) { return s + prev, nil },
		"concat_all": func(strs ...string) (string, error) { return strings.Join(strs, "|"), nil },
		"multiple_values": func(ctx context.Context, a int64, s string) (int64, string, error) {
			if tasks.SignatureFromContext(ctx) == nil {
				return 0, "", errors.New("no signature in context")
			}
			return a * 2, s + s, nil
		},
		// stamp returns its signature's "stamp" header.
		"stamp": func(ctx context.Context, _ ...int64) (string, error) {
			stamp, _ := tasks.SignatureFromContext(ctx).Headers["stamp"].(string)
			return stamp, nil
		},
		"just_error": func() error { return nil },
		"fail":       func(msg string) error { return errors.New(msg) },
		"panic":      func() (string, error) { panic(errors.New("oops")) },
		"record": func(name string) (string, error) {
			e.calls.add(name)
			return name, nil
		},
		"on_error": func(errMsg, tag string) (string, error) {
			e.calls.add("on_error:" + tag + ":" + errMsg)
			return errMsg, nil
		},
		// flaky fails until its third call.
		"flaky": func() (int64, error) {
			n := flaky.Add(1)
			e.calls.add("flaky")
			if n < 3 {
				return 0, fmt.Errorf("flaky call %d", n)
			}
			return int64(n), nil
		},
		// retry_later asks for a retry twice, wrapped, then succeeds.
		"retry_later": func() (int64, error) {
			n := retryLater.Add(1)
			if n < 3 {
				return 0, fmt.Errorf("wrapped: %w", tasks.NewErrRetryTaskLater("not yet", 20*time.Millisecond))
			}
			return int64(n), nil
		},
		// deadline_at returns its context's deadline, "" for none.
		"deadline_at": func(ctx context.Context) (string, error) {
			at, ok := ctx.Deadline()
			if !ok {
				return "", nil
			}
			return at.UTC().Format(time.RFC3339Nano), nil
		},
		"deadline": func(ctx context.Context) (bool, error) {
			_, ok := ctx.Deadline()
			return ok, nil
		},
		// parents returns its args, then its parents' keys, states and
		// errors (tasks.WorkflowParents).
		"parents": func(ctx context.Context, args ...string) (string, error) {
			ps, err := tasks.WorkflowParents(ctx)
			if err != nil {
				return "", err
			}
			var out []string
			for _, p := range ps {
				out = append(out, p.Key+":"+p.State.State+":"+p.State.Error)
			}
			return strings.Join(args, ",") + " / " + strings.Join(out, ","), nil
		},
		"sleep_ctx": func(ctx context.Context, ms int64) (string, error) {
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return "slept", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		},
	}
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	e.t.Cleanup(cancel)
	return ctx
}

func int64Arg(v int64) tasks.Arg { return tasks.Arg{Type: "int64", Value: v} }
func strArg(v string) tasks.Arg  { return tasks.Arg{Type: "string", Value: v} }

func sig(name string, args ...tasks.Arg) *tasks.Signature {
	return &tasks.Signature{Name: name, Args: args}
}

// run sends a task and waits for its results.
func (e *env) run(s *tasks.Signature) ([]interface{}, error) {
	e.t.Helper()
	ctx := e.ctx()
	res, err := e.server.SendTaskWithContext(ctx, s)
	if err != nil {
		e.t.Fatalf("SendTask %s: %v", s.Name, err)
	}
	out, err := res.GetWithContext(ctx, poll)
	return values(out), err
}

// runChain sends sigs as a chain and waits for its result.
func (e *env) runChain(sigs ...*tasks.Signature) ([]interface{}, error) {
	e.t.Helper()
	chain, err := tasks.NewChain(sigs...)
	if err != nil {
		e.t.Fatalf("NewChain: %v", err)
	}
	ctx := e.ctx()
	res, err := e.server.SendChainWithContext(ctx, chain)
	if err != nil {
		e.t.Fatalf("SendChain: %v", err)
	}
	out, err := res.GetWithContext(ctx, poll)
	return values(out), err
}

func values(vs []reflect.Value) []interface{} {
	out := make([]interface{}, len(vs))
	for i, v := range vs {
		out[i] = v.Interface()
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, waitTimeout, what, cond)
}
