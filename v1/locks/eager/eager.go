// Package eager is machinery's in-process Lock: it holds within one
// process only.
package eager

import (
	"errors"
	"sync"
	"time"

	"github.com/b6192125/machinist/v1/locks/iface"
)

// ErrEagerLockFailed is returned when the key is held.
var ErrEagerLockFailed = errors.New("eager lock: failed to acquire lock")

var _ iface.Lock = (*Lock)(nil)

// Lock is an in-process lock. Its zero value is not usable; use New.
type Lock struct {
	retries  int
	interval time.Duration

	mu    sync.Mutex
	until map[string]int64 // key → Unix nanoseconds it is held until
}

// New returns a lock whose LockWithRetries tries 3 more times, 5 s apart,
// as machinery's does.
func New() *Lock {
	return &Lock{retries: 3, interval: 5 * time.Second, until: make(map[string]int64)}
}

// LockWithRetries calls Lock, and while it fails tries again up to 3 times,
// 5 s apart.
func (l *Lock) LockWithRetries(key string, value int64) error {
	for i := 0; ; i++ {
		err := l.Lock(key, value)
		if err == nil || i == l.retries {
			return err
		}
		time.Sleep(l.interval)
	}
}

// Lock takes key until value (Unix nanoseconds), or fails with
// ErrEagerLockFailed while it is held.
func (l *Lock) Lock(key string, value int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if until, held := l.until[key]; held && time.Now().UnixNano() <= until {
		return ErrEagerLockFailed
	}
	l.until[key] = value
	return nil
}
