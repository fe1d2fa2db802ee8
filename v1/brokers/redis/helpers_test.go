package redisbroker_test

import (
	"github.com/b6192125/machinist/internal/rdb"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
)

// newBrokerOn returns a broker on a store of its own on client, configured
// by cnf (through WithDefaults); Close closes the store but not client.
func newBrokerOn(client rdb.UniversalClient, cnf *config.Config) *redisbroker.Broker {
	opts := redisbroker.OptionsFrom(cnf)
	opts.OwnsStore = true
	return redisbroker.New(rdb.New(client, rdb.OptionsFrom(cnf), false), opts)
}
