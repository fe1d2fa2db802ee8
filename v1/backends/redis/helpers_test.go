package redisbackend_test

import (
	"github.com/b6192125/machinist/internal/rdb"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
)

// newBackend returns a backend on a store of its own on client, configured
// by cnf (nil: the defaults); Close closes the store, and the client with
// ownsClient.
func newBackend(client rdb.UniversalClient, cnf *config.Config, ownsClient bool) *redisbackend.Backend {
	store := rdb.New(client, dial.Options(cnf.WithDefaults()), ownsClient)
	return redisbackend.NewOnStore(store, redisbackend.Options{OwnsStore: true})
}
