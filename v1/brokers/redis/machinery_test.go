package redisbroker_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// machinery's constructors, with their signatures and return types.
var (
	_ func(*config.Config, string, string, string, int) brokers.Broker = redisbroker.New
	_ func(*config.Config, []string, int) brokers.Broker               = redisbroker.NewGR
	_ brokers.Broker                                                   = (*redisbroker.BrokerGR)(nil)
)

// machineryRedis starts a Redis of the test's own that wants password and
// also listens on the Unix socket sock, the two ways machinery's New
// reaches a server.
func machineryRedis(t *testing.T, password string) (srv *redistest.Server, sock string) {
	t.Helper()
	// A socket path is limited to about 100 bytes: t.TempDir's can be longer.
	dir, err := os.MkdirTemp("", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock = filepath.Join(dir, "redis.sock")
	srv = redistest.Start(t, redistest.WithArgs("--unixsocket", sock, "--unixsocketperm", "700"))
	if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	return srv, sock
}

// A program that builds its broker and backend with machinery's
// constructors (host and port, a Unix socket, or go-redis's NewGR with the
// password in the address) sets them on a Server and gets a task's result;
// everything is in the database it chose.
func TestMachineryConstructorsRunATask(t *testing.T) {
	t.Parallel()
	const password, db = "s3cret", 3
	srv, sock := machineryRedis(t, password)
	for _, tc := range []struct {
		name    string
		broker  func(*config.Config) brokers.Broker
		backend func(*config.Config) backends.Backend
	}{{
		name:    "New",
		broker:  func(c *config.Config) brokers.Broker { return redisbroker.New(c, srv.Addr(), password, "", db) },
		backend: func(c *config.Config) backends.Backend { return redisbackend.New(c, srv.Addr(), password, "", db) },
	}, {
		name:    "New on a Unix socket",
		broker:  func(c *config.Config) brokers.Broker { return redisbroker.New(c, "", password, sock, db) },
		backend: func(c *config.Config) backends.Backend { return redisbackend.New(c, "", password, sock, db) },
	}, {
		name: "NewGR",
		broker: func(c *config.Config) brokers.Broker {
			return redisbroker.NewGR(c, []string{password + "@" + srv.Addr()}, db)
		},
		backend: func(c *config.Config) backends.Backend {
			return redisbackend.NewGR(c, []string{password + "@" + srv.Addr()}, db)
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := "ctor-" + strings.ReplaceAll(tc.name, " ", "-")
			cnf := &config.Config{
				DefaultQueue:  prefix,
				NoUnixSignals: true,
				Logger:        slog.New(slog.DiscardHandler),
				Redis:         &config.RedisConfig{KeyPrefix: prefix},
			}
			broker := tc.broker(cnf)
			server, err := machinery.NewServerWithBrokerBackend(cnf, broker, tc.backend(cnf))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = server.Close() })
			values := runAdd(t, server)
			if len(values) != 1 || values[0].Int() != 3 {
				t.Fatalf("add(1, 2) = %v, want 3", tasks.HumanReadableResults(values))
			}

			ctx := context.Background()
			for _, want := range []struct {
				db   int
				some bool
			}{{db, true}, {0, false}} {
				c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Password: password, DB: want.db})
				keys, err := c.Keys(ctx, prefix+":*").Result()
				_ = c.Close()
				if err != nil {
					t.Fatal(err)
				}
				if (len(keys) > 0) != want.some {
					t.Errorf("database %d has keys %q; want some only in database %d", want.db, keys, db)
				}
			}
		})
	}
}

// runAdd runs add(1, 2) on a worker of server and returns its results.
func runAdd(t *testing.T, server *machinery.Server) []reflect.Value {
	t.Helper()
	if err := server.RegisterTask("add", func(a, b int64) (int64, error) { return a + b, nil }); err != nil {
		t.Fatal(err)
	}
	worker := server.NewWorker("ctor", 1)
	errs := make(chan error, 1)
	worker.LaunchAsync(errs)
	t.Cleanup(worker.Quit)
	res, err := server.SendTask(&tasks.Signature{
		Name: "add",
		Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	values, err := res.GetWithTimeout(30*time.Second, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return values
}

// New returns a *Broker and NewGR a *BrokerGR, as machinery's do, so that
// code telling the two apart compiles and takes the right branch.
func TestMachineryConstructorsReturnTheirTypes(t *testing.T) {
	t.Parallel()
	cnf := &config.Config{Logger: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		broker brokers.Broker
		want   string
	}{
		{redisbroker.New(cnf, "127.0.0.1:6379", "", "", 0), "Broker"},
		{redisbroker.NewGR(cnf, []string{"127.0.0.1:6379"}, 0), "BrokerGR"},
	} {
		var got string
		switch tc.broker.(type) {
		case *redisbroker.Broker:
			got = "Broker"
		case *redisbroker.BrokerGR:
			got = "BrokerGR"
		}
		if got != tc.want {
			t.Errorf("got a %T, want a *redisbroker.%s", tc.broker, tc.want)
		}
		if err := tc.broker.(io.Closer).Close(); err != nil {
			t.Error(err)
		}
	}
}

// machinery's New has no error to return: an address that cannot be
// dialled is logged, and every operation of the broker fails naming it.
func TestMachineryNewWithAnAddressThatCannotBeUsed(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	cnf := &config.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	for _, b := range []brokers.Broker{
		redisbroker.New(cnf, "localhost:port", "", "", 0),
		redisbroker.NewGR(cnf, []string{"localhost:port"}, 0),
	} {
		_, err := b.GetPendingTasks("q")
		if err == nil || !strings.Contains(err.Error(), `"localhost:port"`) {
			t.Errorf("%T.GetPendingTasks: %v; want an error naming the address", b, err)
		}
		if err := b.(io.Closer).Close(); err != nil {
			t.Error(err)
		}
	}
	for _, name := range []string{"redisbroker.New:", "redisbroker.NewGR:"} {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("the log does not name %s:\n%s", name, logs.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
