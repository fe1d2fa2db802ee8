package redisbackend

import (
	backends "github.com/b6192125/machinist/v1/backends/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
)

// BackendGR is the backend NewGR returns: a Backend on a go-redis universal
// client, as machinery's BackendGR is; it is a type of its own so that code
// telling machinery's two backends apart still compiles.
type BackendGR struct {
	*Backend
}

var _ backends.Backend = (*BackendGR)(nil)

// New is machinery's constructor: a *Backend on the Redis server at host
// ("host:port") or, when socketPath is set, on that Unix socket, with
// password and database db, configured by cnf as NewServer would configure
// it (with its defaults; cnf itself is not changed). It dials nothing until
// the backend is used, as machinery's does. A host that cannot be dialled
// (not host:port) is logged, and every operation of the backend fails with
// that error. Close closes its connections.
func New(cnf *config.Config, host, password, socketPath string, db int) backends.Backend {
	c := dial.Defaults(cnf)
	return NewOnStore(dial.Single("redisbackend.New", c, host, password, socketPath, db), Options{OwnsStore: true})
}

// NewGR is machinery's go-redis constructor: a *BackendGR on a go-redis
// client for addrs, which is a Sentinel group when cnf.Redis.MasterName is
// set, else a Cluster when cnf.Redis.ClusterMode is set or addrs has
// several addresses, else one server with database db. As in machinery,
// addrs[0] may carry the password ("password@host:port") and a Cluster
// ignores db. Otherwise it is New.
func NewGR(cnf *config.Config, addrs []string, db int) backends.Backend {
	c := dial.Defaults(cnf)
	return &BackendGR{NewOnStore(dial.Universal("redisbackend.NewGR", c, addrs, db), Options{OwnsStore: true})}
}
