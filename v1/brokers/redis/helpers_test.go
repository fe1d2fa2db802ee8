package redisbroker_test

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/embedded"
	"github.com/b6192125/machinist/internal/rdb"
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
	return redisbroker.New(rdb.New(client, dial.Options(cnf), false), opts)
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

// onEngine is a conformant broker on the in-process engine, whose keys
// may expire up to embedded.ExpiryMargin early.
type onEngine struct{ conformant }

func (onEngine) ExpiryMargin() time.Duration { return embedded.ExpiryMargin }
