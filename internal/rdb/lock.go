package rdb

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// LockUntil takes key on c until, a Unix time in nanoseconds, unless it is
// held: one SET NX PXAT, so a lock whose time has passed is gone and can be
// taken again. It reports whether it took the key; a time already past
// takes nothing. It is machinery's Redis lock (v1/locks/redis).
func LockUntil(ctx context.Context, c goredis.UniversalClient, key string, until int64) (bool, error) {
	at := time.Unix(0, until)
	if !at.After(time.Now()) {
		return false, nil
	}
	err := c.SetArgs(ctx, key, until, goredis.SetArgs{Mode: "NX", ExpireAt: at}).Err()
	if errors.Is(err, goredis.Nil) {
		return false, nil
	}
	return err == nil, err
}
