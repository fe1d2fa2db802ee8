// Package redis is machinery's Redis Lock: a key that one process holds
// until a deadline, across every process on the same Redis.
package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	"github.com/b6192125/machinist/v1/locks/iface"
)

// ErrRedisLockFailed is returned when the key is held by another caller,
// or Redis could not be asked (the error then says why).
var ErrRedisLockFailed = errors.New("redis lock: failed to acquire lock")

var _ iface.Lock = Lock{}

// Lock is a lock on Redis. Make it with New.
type Lock struct {
	locker   *rdb.Locker
	err      error // why there is none
	retries  int
	interval time.Duration
}

// New returns a lock on the Redis servers at addrs ("host:port", the first
// optionally "password@host:port"; several mean a Cluster) and database db,
// with cnf's Redis settings (timeouts, TLS). LockWithRetries tries retries
// more times (3 when retries is not positive), 100 ms apart; machinery's
// tried again at once. An address that cannot be used makes every call fail
// saying so.
func New(cnf *config.Config, addrs []string, db, retries int) Lock {
	if len(addrs) == 0 {
		return Lock{retries: retries, err: errors.New("no Redis address")}
	}
	hosts := append([]string(nil), addrs...)
	userinfo := ""
	if i := strings.LastIndex(hosts[0], "@"); i >= 0 {
		userinfo, hosts[0] = ":"+hosts[0][:i]+"@", hosts[0][i+1:]
	}
	return NewURL(cnf, "redis://"+userinfo+strings.Join(hosts, ",")+"/"+strconv.Itoa(db), retries)
}

// NewURL returns a lock on the Redis a broker URL names (redis://,
// rediss://, redis+socket://, with its user, password and database), with
// cnf's Redis settings, retrying as New says. A URL that cannot be used
// makes every call fail saying so.
func NewURL(cnf *config.Config, url string, retries int) Lock {
	if retries <= 0 {
		retries = 3
	}
	l := Lock{retries: retries, interval: 100 * time.Millisecond}
	l.locker, l.err = dial.Locker(url, cnf.WithDefaults())
	return l
}

// LockWithRetries calls Lock, and while the key is held tries again up to
// the lock's retries, 100 ms apart.
func (l Lock) LockWithRetries(key string, unixTsToExpireNs int64) error {
	for i := 0; ; i++ {
		err := l.Lock(key, unixTsToExpireNs)
		if err == nil || i == l.retries {
			return err
		}
		time.Sleep(l.interval)
	}
}

// Lock takes key until unixTsToExpireNs (Unix nanoseconds), or fails with
// ErrRedisLockFailed while another caller holds it.
func (l Lock) Lock(key string, unixTsToExpireNs int64) error {
	if l.err != nil {
		return fmt.Errorf("%w: %v", ErrRedisLockFailed, l.err)
	}
	took, err := l.locker.LockUntil(context.Background(), key, unixTsToExpireNs)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrRedisLockFailed, err)
	case !took:
		return ErrRedisLockFailed
	}
	return nil
}

// Close closes the lock's Redis connections.
func (l Lock) Close() error {
	if l.locker == nil {
		return nil
	}
	return l.locker.Close()
}
