package redis_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/v1/config"
	redislock "github.com/b6192125/machinist/v1/locks/redis"
)

func TestMain(m *testing.M) {
	os.Exit(redistest.RunMain(m))
}

func TestLockIsHeldAcrossLocks(t *testing.T) {
	srv := redistest.Start(t)
	admin := srv.Client(t)
	// The helper's probes do not authenticate: the password goes on once
	// the server is up, and comes off before it is stopped.
	if err := admin.ConfigSet(context.Background(), "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Password: "s3cret"})
		defer c.Close()
		_ = c.ConfigSet(context.Background(), "requirepass", "").Err()
	})
	addr := srv.Addr()
	cnf := &config.Config{}
	a := redislock.New(cnf, []string{"s3cret@" + addr}, 0, 1)
	b := redislock.New(cnf, []string{"s3cret@" + addr}, 0, 1)
	t.Cleanup(func() { a.Close(); b.Close() })

	until := time.Now().Add(time.Hour).UnixNano()
	if err := a.Lock("machinery_lock_k", until); err != nil {
		t.Fatal(err)
	}
	if err := b.LockWithRetries("machinery_lock_k", until); !errors.Is(err, redislock.ErrRedisLockFailed) {
		t.Fatalf("a second process's LockWithRetries of a held key: %v, want ErrRedisLockFailed", err)
	}
	// The key goes with its time: a lock until now+50ms is free after it.
	soon := time.Now().Add(50 * time.Millisecond)
	if err := a.Lock("machinery_lock_soon", soon.UnixNano()); err != nil {
		t.Fatal(err)
	}
	for time.Now().Before(soon.Add(10 * time.Millisecond)) {
		time.Sleep(10 * time.Millisecond) // waiting for wall-clock expiry in Redis, not for another goroutine
	}
	if err := b.Lock("machinery_lock_soon", until); err != nil {
		t.Fatalf("Lock after the holder's time passed: %v", err)
	}

	// LockFactory's lock, from the URL as given.
	c := redislock.NewURL(cnf, "redis://:s3cret@"+addr+"/0", 1)
	t.Cleanup(func() { c.Close() })
	if err := c.Lock("machinery_lock_k", until); !errors.Is(err, redislock.ErrRedisLockFailed) {
		t.Fatalf("Lock from a URL of a key another lock holds: %v, want ErrRedisLockFailed", err)
	}

	wrong := redislock.New(cnf, []string{"wrong@" + addr}, 0, 1)
	t.Cleanup(func() { wrong.Close() })
	if err := wrong.Lock("machinery_lock_x", until); !errors.Is(err, redislock.ErrRedisLockFailed) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("Lock with a wrong password: %v, want ErrRedisLockFailed without the password", err)
	}
}
