package common

import (
	"crypto/tls"
	"time"

	"github.com/gomodule/redigo/redis"

	"github.com/b6192125/machinist/v1/config"
)

// defaultRedis is what RedisConnector uses for a nil *config.RedisConfig,
// as machinery's does.
var defaultRedis = config.RedisConfig{
	MaxIdle:        10,
	MaxActive:      100,
	IdleTimeout:    300,
	Wait:           true,
	ReadTimeout:    15,
	WriteTimeout:   15,
	ConnectTimeout: 15,
}

// RedisConnector makes redigo connection pools, as machinery's does, for
// a broker or backend of your own that speaks redigo.
type RedisConnector struct{}

// NewPool returns a redigo pool of connections to host ("host:port") or,
// when socketPath is set, to that Unix socket, authenticated by username
// and password when set, on database db, with TLS when tlsConfig is not
// nil. cnf sizes the pool and sets its timeouts (seconds); nil means
// machinery's defaults (10 idle, 100 active, 300 s idle timeout, 15 s
// timeouts). A connection idle for more than 10 s is pinged before use.
func (rc *RedisConnector) NewPool(socketPath, host, username, password string, db int, cnf *config.RedisConfig, tlsConfig *tls.Config) *redis.Pool {
	if cnf == nil {
		cnf = &defaultRedis
	}
	return &redis.Pool{
		MaxIdle:     cnf.MaxIdle,
		MaxActive:   cnf.MaxActive,
		IdleTimeout: time.Duration(cnf.IdleTimeout) * time.Second,
		Wait:        cnf.Wait,
		Dial: func() (redis.Conn, error) {
			return rc.dial(socketPath, host, username, password, db, cnf, tlsConfig)
		},
		TestOnBorrow: func(c redis.Conn, idleSince time.Time) error {
			if time.Since(idleSince) < 10*time.Second {
				return nil
			}
			_, err := c.Do("PING")
			return err
		},
	}
}

func (rc *RedisConnector) dial(socketPath, host, username, password string, db int, cnf *config.RedisConfig, tlsConfig *tls.Config) (redis.Conn, error) {
	opts := []redis.DialOption{
		redis.DialDatabase(db),
		redis.DialReadTimeout(time.Duration(cnf.ReadTimeout) * time.Second),
		redis.DialWriteTimeout(time.Duration(cnf.WriteTimeout) * time.Second),
		redis.DialConnectTimeout(time.Duration(cnf.ConnectTimeout) * time.Second),
		redis.DialClientName(cnf.ClientName),
	}
	if tlsConfig != nil {
		opts = append(opts, redis.DialTLSConfig(tlsConfig), redis.DialUseTLS(true))
	}
	if username != "" {
		opts = append(opts, redis.DialUsername(username))
	}
	if password != "" {
		opts = append(opts, redis.DialPassword(password))
	}
	if socketPath != "" {
		return redis.Dial("unix", socketPath, opts...)
	}
	return redis.Dial("tcp", host, opts...)
}
