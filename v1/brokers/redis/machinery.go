package redisbroker

import (
	"github.com/b6192125/machinist/internal/rdb"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
)

// BrokerGR is the broker NewGR returns: a Broker on a go-redis universal
// client, as machinery's BrokerGR is; it is a type of its own so that code
// telling machinery's two brokers apart still compiles.
type BrokerGR struct {
	*Broker
}

var _ brokers.LeaseBroker = (*BrokerGR)(nil)

// New is machinery's constructor: a *Broker on the Redis server at host
// ("host:port") or, when socketPath is set, on that Unix socket, with
// password and database db, configured by cnf as NewServer would configure
// it (with its defaults; cnf itself is not changed). It dials nothing until
// the broker is used, as machinery's does. A host that cannot be dialled
// (not host:port) is logged, and every operation of the broker fails with
// that error. Close closes its connections.
func New(cnf *config.Config, host, password, socketPath string, db int) brokers.Broker {
	c := dial.Defaults(cnf)
	return onStore(c, dial.Single("redisbroker.New", c, host, password, socketPath, db))
}

// NewGR is machinery's go-redis constructor: a *BrokerGR on a go-redis
// client for addrs, which is a Sentinel group when cnf.Redis.MasterName is
// set, else a Cluster when cnf.Redis.ClusterMode is set or addrs has
// several addresses, else one server with database db. As in machinery,
// addrs[0] may carry the password ("password@host:port") and a Cluster
// ignores db. Otherwise it is New.
func NewGR(cnf *config.Config, addrs []string, db int) brokers.Broker {
	c := dial.Defaults(cnf)
	return &BrokerGR{onStore(c, dial.Universal("redisbroker.NewGR", c, addrs, db))}
}

// onStore returns a broker on st, which it owns, configured by cnf, as Dial
// does.
func onStore(cnf *config.Config, st *rdb.Store) *Broker {
	opts := OptionsFrom(cnf)
	opts.OwnsStore = true
	b := NewOnStore(st, opts)
	b.SetConfig(cnf)
	return b
}
