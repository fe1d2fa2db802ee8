// NewClient and Parse turn machinist's Redis URLs and RedisConfig into a
// go-redis client: standalone, Redis Cluster (several addresses or
// ClusterMode), Sentinel (MasterName), and TLS for "rediss://". Errors and
// the String form of a URL never show credentials.

package rdb

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/redact"
)

// ErrURL is wrapped by every error about a Redis URL.
var ErrURL = errors.New("rdb: invalid Redis URL")

// Target is a parsed Redis URL.
type Target struct {
	Addrs    []string
	Username string
	Password string
	DB       int
	TLS      bool
	// Socket is the path of a Unix socket ("redis+socket://"); Addrs is
	// then empty.
	Socket string
}

// String returns the URL without credentials.
func (t Target) String() string {
	if t.Socket != "" {
		return fmt.Sprintf("redis+socket://%s:/%d", t.Socket, t.DB)
	}
	scheme := "redis"
	if t.TLS {
		scheme = "rediss"
	}
	return fmt.Sprintf("%s://%s/%d", scheme, strings.Join(t.Addrs, ","), t.DB)
}

// IsURL reports whether u is a Redis URL.
func IsURL(u string) bool {
	return strings.HasPrefix(u, "redis://") || strings.HasPrefix(u, "rediss://") || strings.HasPrefix(u, "redis+socket://")
}

// Parse reads "redis://[user:password@]host:port[,host:port...][/db]", the
// same with "rediss://", or machinery's Unix-socket form
// "redis+socket://[[user:]password@]/path/to/redis.sock[:/db]". A user name
// without a password is taken as the password, as machinery does.
func Parse(raw string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, fmt.Errorf("%w %q: %s", ErrURL, redact.URL(raw), why)
	}
	var t Target
	rest, ok := strings.CutPrefix(raw, "redis://")
	socket := false
	if !ok {
		if rest, ok = strings.CutPrefix(raw, "rediss://"); ok {
			t.TLS = true
		} else if rest, ok = strings.CutPrefix(raw, "redis+socket://"); ok {
			socket = true
		} else {
			return bad(`want "redis://", "rediss://" or "redis+socket://"`)
		}
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo := rest[:at]
		rest = rest[at+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		var err error
		if t.Username, err = url.PathUnescape(user); err != nil {
			return bad("the user name is not escaped correctly")
		}
		if t.Password, err = url.PathUnescape(pass); err != nil {
			return bad("the password is not escaped correctly")
		}
		if !hasPass {
			t.Username, t.Password = "", t.Username
		}
	}
	if socket {
		path, db, hasDB := strings.Cut(rest, ":/")
		if !strings.HasPrefix(path, "/") {
			return bad("want the socket's absolute path: redis+socket://[password@]/path/to/redis.sock[:/db]")
		}
		t.Socket = path
		if hasDB && db != "" {
			n, err := strconv.Atoi(db)
			if err != nil || n < 0 {
				return bad("the database must be a number")
			}
			t.DB = n
		}
		return t, nil
	}
	hosts, db, hasDB := strings.Cut(rest, "/")
	if hasDB && db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return bad("the database must be a number")
		}
		t.DB = n
	}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		addr, err := hostPort(h)
		if err != nil {
			return bad(err.Error())
		}
		t.Addrs = append(t.Addrs, addr)
	}
	if len(t.Addrs) == 0 {
		return bad("no host")
	}
	return t, nil
}

// check returns t with its addresses as host:port, or an error wrapping
// ErrURL when one cannot be dialled or t names no server.
func (t Target) check() (Target, error) {
	if t.Socket != "" {
		if len(t.Addrs) > 0 {
			return Target{}, fmt.Errorf("%w %s: both a socket and addresses", ErrURL, t)
		}
		return t, nil
	}
	addrs := make([]string, 0, len(t.Addrs))
	for _, h := range t.Addrs {
		addr, err := hostPort(strings.TrimSpace(h))
		if err != nil {
			return Target{}, fmt.Errorf("%w: %s", ErrURL, err)
		}
		addrs = append(addrs, addr)
	}
	if len(addrs) == 0 {
		return Target{}, fmt.Errorf("%w: no host", ErrURL)
	}
	t.Addrs = addrs
	return t, nil
}

// hostPort returns h, an address of a Redis URL, as host:port: the port
// 6379 when h has none, an IPv6 address in brackets. It refuses what
// cannot be dialled, so that a mistyped URL is refused when the Server is
// made rather than at its first command.
func hostPort(h string) (string, error) {
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		switch {
		case strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]"):
			host = h[1 : len(h)-1]
		case !strings.ContainsAny(h, ":[]"):
			host = h
		default:
			return "", fmt.Errorf("%q is not host:port (an IPv6 address goes in brackets: [::1]:6379)", h)
		}
		port = "6379"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("the port of %q is not a number from 1 to 65535", h)
	}
	if strings.ContainsAny(host, "[]/ ") {
		return "", fmt.Errorf("%q is not host:port", h)
	}
	return net.JoinHostPort(host, port), nil
}

// ClientOptions configure the connections to Redis (config.RedisConfig's
// settings, in their units).
type ClientOptions struct {
	ClientName, MasterName string
	// ClusterMode makes one address a Cluster's (several always are).
	ClusterMode  bool
	PoolSize     int
	MaxIdleConns int
	IdleTimeout  time.Duration
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// PoolTimeout bounds the wait for a free connection (0: go-redis's
	// default, ReadTimeout and a second).
	PoolTimeout time.Duration
	// MinReplicas makes each write of a Cluster's nodes wait for that many
	// replicas (transport/replicas.go), for up to half of ReadTimeout.
	MinReplicas int
	// TLS is cloned for "rediss://" URLs, with CACertFile's CAs added.
	TLS        *tls.Config
	CACertFile string
}

// NewClient returns a client for rawURL configured by o.
func NewClient(rawURL string, o ClientOptions) (goredis.UniversalClient, error) {
	t, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return ClientFor(t, o)
}

// ClientFor returns a client for t configured by o: what NewClient makes of
// the URL t was parsed from. Addresses are checked and normalised as
// Parse does; a socket path need not be absolute here.
func ClientFor(t Target, o ClientOptions) (goredis.UniversalClient, error) {
	t, err := t.check()
	if err != nil {
		return nil, err
	}
	rc := o
	opts := &goredis.UniversalOptions{
		Addrs:           t.Addrs,
		Username:        t.Username,
		Password:        t.Password,
		DB:              t.DB,
		ClientName:      rc.ClientName,
		MasterName:      rc.MasterName,
		PoolSize:        rc.PoolSize,
		MaxIdleConns:    rc.MaxIdleConns,
		ConnMaxIdleTime: rc.IdleTimeout,
		DialTimeout:     rc.DialTimeout,
		ReadTimeout:     rc.ReadTimeout,
		WriteTimeout:    rc.WriteTimeout,
		PoolTimeout:     rc.PoolTimeout,
		// A call's deadline bounds its reads and writes too, not only
		// the timeouts above (transport/deadline.go).
		ContextTimeoutEnabled: true,
		IsClusterMode:         rc.ClusterMode || len(t.Addrs) > 1 && rc.MasterName == "",
	}
	if t.Socket != "" {
		if rc.ClusterMode || rc.MasterName != "" {
			return nil, fmt.Errorf("%w %s: a Unix socket is one server, not a Cluster or a Sentinel group", ErrURL, t)
		}
		o := opts.Simple()
		o.Network, o.Addr = "unix", t.Socket
		return goredis.NewClient(o), nil
	}
	if t.TLS {
		if opts.TLSConfig, err = tlsConfig(t, o); err != nil {
			return nil, err
		}
	}
	if opts.IsClusterMode {
		if t.DB != 0 {
			return nil, fmt.Errorf("%w %s: Redis Cluster has only database 0", ErrURL, t)
		}
		co := opts.Cluster()
		if n := rc.MinReplicas; n > 0 {
			// Each node's pipelines end with WAIT (transport/replicas.go).
			r := transport.Replicas{N: n, Timeout: ReplicaTimeout(o.ReadTimeout)}
			co.NewClient = func(o *goredis.Options) *goredis.Client {
				c := goredis.NewClient(o)
				c.AddHook(transport.WaitHook{Replicas: r})
				return c
			}
		}
		cc := goredis.NewClusterClient(co)
		cc.AddHook(reloadSlots{cc})
		return cc, nil
	}
	return goredis.NewUniversalClient(opts), nil
}

// tlsConfig returns the TLS settings of a "rediss://" connection: a clone of
// o.TLS (or a new one) with CACertFile's CAs added.
func tlsConfig(t Target, o ClientOptions) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.TLS != nil {
		tc = o.TLS.Clone()
	}
	if f := o.CACertFile; f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("rdb: Redis.CACertFile: %w", err)
		}
		if tc.RootCAs == nil {
			if tc.RootCAs, err = x509.SystemCertPool(); err != nil {
				tc.RootCAs = x509.NewCertPool()
			}
		}
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("rdb: Redis.CACertFile %s: no PEM certificate in it", f)
		}
	}
	if tc.ServerName == "" && len(t.Addrs) == 1 {
		host, _, _ := strings.Cut(t.Addrs[0], ":")
		tc.ServerName = host
	}
	return tc, nil
}

// reloadSlots makes a cluster client reload its map of slots when a node
// fails. go-redis reloads it on a MOVED or READONLY reply, or every 60 s:
// after a master dies, until its replica's promotion answers MOVED, every
// command for its slots would go on dialling the dead address for up to a
// minute. With this hook a failed connection or a CLUSTERDOWN reply asks
// for a reload (go-redis runs one at a time, 200 ms apart at most), and
// the retries find the promoted replica within a second of the promotion
// (TestClusterFailoverLosesNothing).
type reloadSlots struct{ cc *goredis.ClusterClient }

func (reloadSlots) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h reloadSlots) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadSlots) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h reloadSlots) check(ctx context.Context, err error) {
	if transport.OutcomeUnknown(err) || goredis.HasErrorPrefix(err, "CLUSTERDOWN") {
		h.cc.ReloadState(ctx)
	}
}

// ClientName says where client connects, without its credentials: the
// name of a go-redis client given to NewServerWithRedisClient in logs.
func ClientName(client goredis.UniversalClient) string {
	switch c := client.(type) {
	case *goredis.Client:
		o := c.Options()
		if o.Network == "unix" {
			return "redis+socket://" + o.Addr
		}
		return "redis://" + o.Addr
	case *goredis.ClusterClient:
		return "redis://" + strings.Join(c.Options().Addrs, ",")
	}
	return fmt.Sprintf("a %T", client)
}
