package rdb

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Machinery is machinery v1's Redis layout on a connection of its own,
// for the migration mode (v1/internal/machineryredis): queues are lists
// named by the queue, tasks waiting for their ETA one sorted set scored by
// the ETA in Unix nanoseconds, and states and group metadata JSON strings
// under bare UUIDs. It speaks only to a single server or Sentinel:
// machinery's keys have no hash tags, so a Cluster cannot move a due task
// to its queue in one script.
type Machinery struct {
	client goredis.UniversalClient
}

// DialMachinery returns machinery's layout on the Redis rawURL names,
// connected by o; a Cluster is refused.
func DialMachinery(rawURL string, o ClientOptions) (*Machinery, error) {
	c, err := NewClient(rawURL, o)
	if err != nil {
		return nil, err
	}
	if _, ok := c.(*goredis.ClusterClient); ok {
		c.Close()
		return nil, errors.New("a Redis Cluster: machinery's keys need a single server or Sentinel")
	}
	return &Machinery{client: c}, nil
}

// Close closes the connection.
func (m *Machinery) Close() error { return m.client.Close() }

// Push appends msg to queue (RPUSH).
func (m *Machinery) Push(ctx context.Context, queue string, msg []byte) error {
	return m.client.RPush(ctx, queue, msg).Err()
}

// PushFront puts msg back at the head of queue (LPUSH), for a message
// taken and not begun.
func (m *Machinery) PushFront(ctx context.Context, queue string, msg []byte) error {
	return m.client.LPush(ctx, queue, msg).Err()
}

// Delay adds msg to the sorted set key, due at eta.
func (m *Machinery) Delay(ctx context.Context, key string, msg []byte, eta time.Time) error {
	return m.client.ZAdd(ctx, key, goredis.Z{Score: float64(eta.UnixNano()), Member: msg}).Err()
}

// List returns the messages of queue, head first.
func (m *Machinery) List(ctx context.Context, queue string) ([]string, error) {
	return m.client.LRange(ctx, queue, 0, -1).Result()
}

// ListDelayed returns the messages of the sorted set key, soonest first.
func (m *Machinery) ListDelayed(ctx context.Context, key string) ([]string, error) {
	return m.client.ZRange(ctx, key, 0, -1).Result()
}

// Pop takes the head of queue, waiting up to wait rounded up to whole
// seconds (BLPOP's unit); nil when none came. The pop is not cut short
// when ctx ends: a message Redis popped for a reply that was abandoned
// would be lost.
func (m *Machinery) Pop(ctx context.Context, queue string, wait time.Duration) ([]byte, error) {
	secs := max(1, (wait+time.Second-1)/time.Second)
	items, err := m.client.BLPop(context.WithoutCancel(ctx), secs*time.Second, queue).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []byte(items[1]), nil
}

// MoveDue moves every message of machinery's delayed tasks, the sorted
// set key, due at now to its queue (its RoutingKey, else defaultQueue),
// a page of them a script run (move_due.lua).
func (m *Machinery) MoveDue(ctx context.Context, key string, now time.Time, defaultQueue string) error {
	const page = 100
	for {
		moved, err := moveDueScript.Run(ctx, m.client, []string{key}, now.UnixNano(), defaultQueue, page).Int()
		if err != nil || moved < page {
			return err
		}
	}
}

// Get returns the value of key; nil when there is none.
func (m *Machinery) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := m.client.Get(ctx, key).Bytes()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	return v, err
}

// GetAll returns the values of keys in one pipeline of GETs (as
// machinery's go-redis backend reads them); nil for a key that has none.
func (m *Machinery) GetAll(ctx context.Context, keys []string) ([][]byte, error) {
	cmds, err := m.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, k := range keys {
			p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, goredis.Nil) {
		return nil, err
	}
	vals := make([][]byte, len(cmds))
	for i, cmd := range cmds {
		v, err := cmd.(*goredis.StringCmd).Bytes()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return nil, err
		}
		vals[i] = v
	}
	return vals, nil
}

// Set writes value under key, expiring after ttl.
func (m *Machinery) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return m.client.Set(ctx, key, value, ttl).Err()
}

// Del deletes key.
func (m *Machinery) Del(ctx context.Context, key string) error {
	return m.client.Del(ctx, key).Err()
}

// Lock takes key as redsync's mutex does (SET NX with an 8 s expiry, up
// to 32 tries 50 to 250 ms apart), so that it excludes machinery's
// processes holding redsync's lock of that name, and returns its release.
func (m *Machinery) Lock(ctx context.Context, key string) (unlock func() error, err error) {
	var token [16]byte
	if _, err := rand.Read(token[:]); err != nil {
		return nil, err
	}
	value := base64.StdEncoding.EncodeToString(token[:])
	for try := 0; try < 32; try++ {
		if try > 0 {
			t := time.NewTimer(50*time.Millisecond + mathrand.N(200*time.Millisecond))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
		ok, err := m.client.SetNX(ctx, key, value, 8*time.Second).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return func() error {
				return resignScript.Run(context.WithoutCancel(ctx), m.client, []string{key}, value).Err() // DEL while the lock is ours
			}, nil
		}
	}
	return nil, fmt.Errorf("lock %s not taken in 32 tries", key)
}
