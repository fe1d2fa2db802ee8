package redisbackend_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	machinery "github.com/b6192125/machinist/v1"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// machinery's constructors, with their signatures and return types.
var (
	_ func(*config.Config, string, string, string, int) backends.Backend = redisbackend.New
	_ func(*config.Config, []string, int) backends.Backend               = redisbackend.NewGR
	_ backends.Backend                                                   = (*redisbackend.BackendGR)(nil)
)

// A result backend built with machinery's constructors (host and port, a
// Unix socket, or go-redis's NewGR with the password in the address) and
// set on a Server with SetBackend keeps a task's result, in the database
// it chose, for the Server's Get.
func TestMachineryConstructorsKeepAResult(t *testing.T) {
	t.Parallel()
	const password, db = "s3cret", 5
	// A socket path is limited to about 100 bytes: t.TempDir's can be longer.
	dir, err := os.MkdirTemp("", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "redis.sock")
	srv := redistest.Start(t, redistest.WithArgs("--unixsocket", sock, "--unixsocketperm", "700"))
	if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		backend func(*config.Config) backends.Backend
	}{
		{"New", func(c *config.Config) backends.Backend { return redisbackend.New(c, srv.Addr(), password, "", db) }},
		{"New on a Unix socket", func(c *config.Config) backends.Backend { return redisbackend.New(c, "", password, sock, db) }},
		{"NewGR", func(c *config.Config) backends.Backend {
			return redisbackend.NewGR(c, []string{password + "@" + srv.Addr()}, db)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := "ctor-" + strings.ReplaceAll(tc.name, " ", "-")
			cnf := &config.Config{
				Broker:        "memory://",
				DefaultQueue:  prefix,
				NoUnixSignals: true,
				Logger:        slog.New(slog.DiscardHandler),
				Redis:         &config.RedisConfig{KeyPrefix: prefix},
			}
			server, err := machinery.NewServer(cnf)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = server.Close() })
			server.SetBackend(tc.backend(cnf))
			if err := server.RegisterTask("add", func(a, b int64) (int64, error) { return a + b, nil }); err != nil {
				t.Fatal(err)
			}
			worker := server.NewWorker("ctor", 1)
			worker.LaunchAsync(make(chan error, 1))
			t.Cleanup(worker.Quit)
			sig := &tasks.Signature{
				Name: "add",
				Args: []tasks.Arg{{Type: "int64", Value: 1}, {Type: "int64", Value: 2}},
			}
			res, err := server.SendTask(sig)
			if err != nil {
				t.Fatal(err)
			}
			values, err := res.GetWithTimeout(30*time.Second, 5*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if len(values) != 1 || values[0].Int() != 3 {
				t.Fatalf("add(1, 2) = %v, want 3", tasks.HumanReadableResults(values))
			}

			c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Password: password, DB: db})
			defer c.Close()
			n, err := c.Exists(context.Background(), prefix+":state:"+sig.UUID).Result()
			if err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("the task's state is not in database %d", db)
			}
		})
	}
}

// New returns a *Backend and NewGR a *BackendGR, as machinery's do, so that
// code telling the two apart compiles and takes the right branch; an
// address that cannot be dialled fails every operation, naming it.
func TestMachineryConstructorsReturnTheirTypes(t *testing.T) {
	t.Parallel()
	cnf := &config.Config{Logger: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		backend backends.Backend
		want    string
	}{
		{redisbackend.New(cnf, "localhost:port", "", "", 0), "Backend"},
		{redisbackend.NewGR(cnf, []string{"localhost:port"}, 0), "BackendGR"},
	} {
		var got string
		switch tc.backend.(type) {
		case *redisbackend.Backend:
			got = "Backend"
		case *redisbackend.BackendGR:
			got = "BackendGR"
		}
		if got != tc.want {
			t.Errorf("got a %T, want a *redisbackend.%s", tc.backend, tc.want)
		}
		_, err := tc.backend.GetState("task_1")
		if err == nil || !strings.Contains(err.Error(), `"localhost:port"`) {
			t.Errorf("%T.GetState: %v; want an error naming the address", tc.backend, err)
		}
		if err := tc.backend.(io.Closer).Close(); err != nil {
			t.Error(err)
		}
	}
}
