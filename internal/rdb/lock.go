package rdb

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Locker is machinery's Redis lock (v1/locks/redis) on a connection of its
// own.
type Locker struct {
	client goredis.UniversalClient
}

// DialLocker returns a Locker on the Redis rawURL names, connected by o.
func DialLocker(rawURL string, o ClientOptions) (*Locker, error) {
	c, err := NewClient(rawURL, o)
	if err != nil {
		return nil, err
	}
	return &Locker{client: c}, nil
}

// LockUntil takes key until until, a Unix time in nanoseconds, unless it is
// held: one SET NX PXAT, so a lock whose time has passed is gone and can be
// taken again. It reports whether it took the key; a time already past
// takes nothing.
func (l *Locker) LockUntil(ctx context.Context, key string, until int64) (bool, error) {
	at := time.Unix(0, until)
	if !at.After(time.Now()) {
		return false, nil
	}
	err := l.client.SetArgs(ctx, key, until, goredis.SetArgs{Mode: "NX", ExpireAt: at}).Err()
	if errors.Is(err, goredis.Nil) {
		return false, nil
	}
	return err == nil, err
}

// Close closes the Locker's connection.
func (l *Locker) Close() error { return l.client.Close() }
