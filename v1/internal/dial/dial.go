// Package dial turns a Config into the store's options: the one place the
// public packages configure internal/rdb from.
package dial

import (
	"time"

	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/v1/config"
)

// Store returns a store for rawURL (Redis, or memory://) configured by cnf,
// which must have been through WithDefaults.
func Store(rawURL string, cnf *config.Config) (*rdb.Store, error) {
	return rdb.Dial(rawURL, Client(cnf), Options(cnf))
}

// Locker returns machinery's Redis lock for rawURL, connected as cnf says.
func Locker(rawURL string, cnf *config.Config) (*rdb.Locker, error) {
	return rdb.DialLocker(rawURL, Client(cnf))
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
