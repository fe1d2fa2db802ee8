package redisbroker_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/v1/brokers/brokertest"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
)

// newBrokerOn returns a broker on a store of its own on client, configured
// by cnf (through WithDefaults); Close closes the store but not client.
func newBrokerOn(client rdb.UniversalClient, cnf *config.Config) *redisbroker.Broker {
	opts := redisbroker.OptionsFrom(cnf)
	opts.OwnsStore = true
	return redisbroker.NewOnStore(rdb.New(client, dial.Options(cnf), false), opts)
}

// conformant is a broker as the conformance suite takes it: with
// brokertest.LeaseEnder, which moves a lease's expiry in Redis to the
// past, in the task's (or batch's) hash and in the zset that orders the
// queue's leases.
type conformant struct {
	*redisbroker.Broker
	client goredis.UniversalClient
	prefix string // the broker's Redis.KeyPrefix
}

var _ brokertest.Broker = conformant{}

// endLeaseScript ends a lease if the token still holds it.
// KEYS[1] the task or batch hash   KEYS[2] the zset of leases by expiry
// ARGV[1] the member of KEYS[2]    ARGV[2] the lease's token
var endLeaseScript = goredis.NewScript(`
if redis.call("HGET", KEYS[1], "lease") == ARGV[2] then
	redis.call("HSET", KEYS[1], "lease_exp", 1)
	redis.call("ZADD", KEYS[2], "XX", 1, ARGV[1])
end
return 0`)

func (c conformant) EndLease(ctx context.Context, d *brokers.Delivery) error {
	q := c.prefix + ":{" + d.Queue + "}:"
	return endLeaseScript.Run(ctx, c.client, []string{q + "t:" + d.Signature.UUID, q + "lease"}, d.Signature.UUID, d.Lease.Token()).Err()
}

func (c conformant) EndBatchLease(ctx context.Context, b *brokers.Batch) error {
	agg := c.prefix + ":{" + b.Queue + "}:agg:"
	return endLeaseScript.Run(ctx, c.client, []string{agg + "batch:" + b.ID, agg + "batches:" + b.Name}, b.ID, b.Lease.Token()).Err()
}

// onEngine is a conformant broker on an engine of its own, whose clock
// the suite stops and moves (brokertest.TimeMover).
type onEngine struct {
	conformant
	engine *redistest.Embedded
	store  *rdb.Store // the broker's

	mu  sync.Mutex
	now time.Time // the engine's time once stopped; zero until then
}

var _ brokertest.TimeMover = (*onEngine)(nil)

// newOnEngine returns a broker on an engine started for it, configured by
// cnf (through WithDefaults), closed when the test ends.
func newOnEngine(t *testing.T, cnf *config.Config) *onEngine {
	t.Helper()
	engine := redistest.StartEmbedded(t)
	client := engine.Client(t)
	cnf.Redis.KeyPrefix = strings.TrimSuffix(engine.Prefix(), ":")
	store := rdb.New(client, dial.Options(cnf), false)
	opts := redisbroker.OptionsFrom(cnf)
	opts.OwnsStore = true
	b := redisbroker.NewOnStore(store, opts)
	t.Cleanup(func() { b.Close() })
	return &onEngine{conformant: conformant{b, client, cnf.Redis.KeyPrefix}, engine: engine, store: store}
}

func (e *onEngine) StopClock() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopLocked()
}

func (e *onEngine) stopLocked() time.Time {
	if e.now.IsZero() {
		// Whole milliseconds, as the scripts count: a time the suite
		// reckons from is one a script could have read.
		e.now = time.Now().Truncate(time.Millisecond)
		e.engine.SetTime(e.now)
	}
	return e.now
}

// Advance moves the engine's clock, then runs forward.lua on each queue at
// the new time, as the queue's maintainer does when what it waits for is
// due: the maintainer's timers run on the host's clock, which Advance does
// not move, and would run it later.
func (e *onEngine) Advance(ctx context.Context, d time.Duration) error {
	e.mu.Lock()
	e.now = e.stopLocked().Add(d)
	e.engine.SetTime(e.now)
	e.mu.Unlock()
	queues, err := e.store.Queues(ctx)
	if err != nil {
		return err
	}
	for _, q := range queues {
		for more := true; more; {
			f, err := e.store.Forward(ctx, q, 0) // 0: no plan; the maintainer's stays
			if err != nil {
				return err
			}
			more = f.More
		}
	}
	return nil
}
