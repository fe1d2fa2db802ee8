// Package dial turns a Config into the store's options: the one place the
// public packages configure internal/rdb from.
package dial

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/v1/config"
	mlog "github.com/b6192125/machinist/v1/log"
)

// Defaults returns cnf with its defaults (cnf itself is not changed); a
// nil Logger becomes one on package log's Handler: slog.Default(), or the
// level loggers a machinery program set with log.Set.
func Defaults(cnf *config.Config) *config.Config {
	c := cnf.WithDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(mlog.Handler())
	}
	return c
}

// Store returns a store for rawURL (Redis, or memory://) configured by cnf,
// which must have been through WithDefaults.
func Store(rawURL string, cnf *config.Config) (*rdb.Store, error) {
	return rdb.Dial(rawURL, Client(cnf), Options(cnf))
}

// Locker returns machinery's Redis lock for rawURL, connected as cnf says.
func Locker(rawURL string, cnf *config.Config) (*rdb.Locker, error) {
	return rdb.DialLocker(rawURL, Client(cnf))
}

// Machinery returns machinery's Redis queues and states at rawURL, for
// the migration mode, connected as cnf says.
func Machinery(rawURL string, cnf *config.Config) (*rdb.Machinery, error) {
	return rdb.DialMachinery(rawURL, Client(cnf))
}

// Client returns the connection settings of cnf.
func Client(cnf *config.Config) rdb.ClientOptions {
	rc := cnf.Redis
	return rdb.ClientOptions{
		ClientName:   rc.ClientName,
		MasterName:   rc.MasterName,
		ClusterMode:  rc.ClusterMode,
		PoolSize:     rc.MaxActive,
		MaxIdleConns: rc.MaxIdle,
		IdleTimeout:  time.Duration(rc.IdleTimeout) * time.Second,
		DialTimeout:  time.Duration(rc.ConnectTimeout) * time.Second,
		ReadTimeout:  time.Duration(rc.ReadTimeout) * time.Second,
		WriteTimeout: time.Duration(rc.WriteTimeout) * time.Second,
		MinReplicas:  rc.MinReplicas,
		TLS:          cnf.TLSConfig,
		CACertFile:   rc.CACertFile,
	}
}

// Options returns the store options cnf sets.
func Options(cnf *config.Config) rdb.Options {
	return rdb.Options{
		KeyPrefix:          cnf.Redis.KeyPrefix,
		ResultsExpireIn:    time.Duration(cnf.ResultsExpireIn) * time.Second,
		LeaseDuration:      cnf.LeaseDuration,
		CompletedRetention: cnf.CompletedRetention,
		ArchiveMaxAge:      cnf.ArchiveMaxAge,
		ArchiveMaxSize:     cnf.ArchiveMaxSize,
		MaxRecoveries:      cnf.MaxRecoveries,
		BlockTimeout:       time.Duration(cnf.Redis.NormalTasksPollPeriod) * time.Millisecond,
		MinReplicas:        cnf.Redis.MinReplicas,
		ReplicaTimeout:     rdb.ReplicaTimeout(time.Duration(cnf.Redis.ReadTimeout) * time.Second),
		QueueShards:        cnf.Redis.QueueShards,
		MaxMessageSize:     max(cnf.MaxMessageSize, 0),
		Logger:             cnf.Logger,
	}
}

// Single returns the store of machinery's New(cnf, host, password,
// socketPath, db) for a broker or backend (name, for errors): one Redis
// server at host ("host:port") or, when socketPath is set, on that Unix
// socket. machinery's New dials one server whatever ClusterMode and
// MasterName say, and uses TLS whenever cnf.TLSConfig is set; so does this.
// cnf must have been through WithDefaults. See Unusable for a server that
// cannot be used.
func Single(name string, cnf *config.Config, host, password, socketPath string, db int) *rdb.Store {
	t := rdb.Target{Password: password, DB: db, Socket: socketPath}
	if socketPath == "" {
		t.Addrs = []string{host}
	}
	c := Client(cnf)
	c.ClusterMode, c.MasterName = false, ""
	return machinery(name, cnf, t, c)
}

// Universal returns the store of machinery's NewGR(cnf, addrs, db): a
// Sentinel group when cnf.Redis.MasterName is set, else a Cluster when
// ClusterMode is set or addrs has several addresses, else one server, as
// machinery's go-redis UniversalClient chooses. As in machinery, the first
// address may carry the password ("password@host:port"), and a Cluster
// ignores db. Unlike machinery v1's NewGR, it uses TLS when cnf.TLSConfig
// is set, as Single does. cnf must have been through WithDefaults.
func Universal(name string, cnf *config.Config, addrs []string, db int) *rdb.Store {
	t := rdb.Target{Addrs: slices.Clone(addrs), DB: db}
	if len(t.Addrs) > 0 {
		if at := strings.LastIndex(t.Addrs[0], "@"); at >= 0 {
			t.Password, t.Addrs[0] = t.Addrs[0][:at], t.Addrs[0][at+1:]
		}
	}
	c := Client(cnf)
	if c.ClusterMode || len(t.Addrs) > 1 && c.MasterName == "" {
		t.DB = 0
	}
	return machinery(name, cnf, t, c)
}

// machinery returns a store on t for machinery's constructors, which have
// no error to return: a t that cannot be used (an address that is not
// host:port, no address at all) is logged now, and every command of the
// store fails with the reason, as they would against a server that cannot
// be reached.
func machinery(name string, cnf *config.Config, t rdb.Target, c rdb.ClientOptions) *rdb.Store {
	t.TLS = cnf.TLSConfig != nil
	opts := Options(cnf)
	st, err := rdb.DialTarget(t, c, opts)
	if err == nil {
		return st
	}
	err = fmt.Errorf("%s: %w", name, err)
	log := cnf.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Error("Redis cannot be used; every command will fail", slog.Any("error", err))
	return rdb.Unusable(err, opts)
}
