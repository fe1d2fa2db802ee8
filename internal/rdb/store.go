package rdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/embedded"
	"github.com/b6192125/machinist/internal/rdb/transport"
)

// UniversalClient is a go-redis v9 client: *redis.Client, *redis.ClusterClient,
// *redis.Ring, or a Sentinel client.
type UniversalClient = goredis.UniversalClient

// GroupSafetyTTL is the least time a group's bookkeeping lives after its
// last write while members are unfinished: the TTL of a running group is
// the longer of this and ResultsExpireIn. Completed groups expire
// ResultsExpireIn after their last write.
const GroupSafetyTTL = 30 * 24 * time.Hour

// Options are the settings of the Redis protocol. OptionsFrom reads them
// from a Config.
type Options struct {
	// KeyPrefix starts every key.
	KeyPrefix string
	// ResultsExpireIn is how long task states and completed groups live
	// after their last write.
	ResultsExpireIn time.Duration
	// LeaseDuration is how long a task is held by the worker that took it
	// unless the lease is renewed.
	LeaseDuration time.Duration
	// CompletedRetention is how long an acknowledged task is kept; 0
	// forgets it at once.
	CompletedRetention time.Duration
	// ArchiveMaxAge and ArchiveMaxSize bound the dead letters of a queue.
	ArchiveMaxAge  time.Duration
	ArchiveMaxSize int
	// MaxRecoveries is how many times a task may come back from an expired
	// lease before it is archived; negative means never.
	MaxRecoveries int
	// BlockTimeout is the longest an idle Fetch blocks in one call.
	BlockTimeout time.Duration
	// MinReplicas, when not 0, makes every write machinist counts on wait
	// until this many replicas have it, for at most ReplicaTimeout
	// (transport/replicas.go).
	MinReplicas    int
	ReplicaTimeout time.Duration
	// nodesWait says a cluster client's nodes end their pipelines with
	// WAIT themselves (NewClient's transport.WaitHook).
	nodesWait bool
	// MaxMessageSize, when positive, is the largest message a task sent
	// may have (its encoded signature), in bytes: a larger one is refused
	// with a *brokers.MessageTooLargeError before it is sent.
	MaxMessageSize int
	// QueueShards is the least number of shards of each queue it names
	// (shards.go); a queue not named has the shards another process
	// recorded, or none.
	QueueShards map[string]int
	// Logger receives what the store logs (a state write queued without
	// waiting that failed) and go-redis's own lines (see logging.go).
	// Default slog.Default().
	Logger *slog.Logger
}

// Store is machinist's data in one Redis (a server, a Sentinel group or a
// Cluster): queues, tasks, states and groups. Every method is safe for
// concurrent use. A broker and a backend on the same Redis share one Store,
// and so one connection pool and one batcher.
type Store struct {
	client  goredis.UniversalClient
	owned   bool   // Close closes client
	release func() // if set, Close calls it last (the in-process engine's)
	batch   *transport.Batcher
	// repl is how the writes the store sends on client itself, not
	// through batch, wait for replicas: as batch's pipelines do.
	repl    transport.Replicas
	comb    combiner // concurrent publishes' shared enqueue calls
	keys    *keys
	opts    Options
	log     *slog.Logger
	cluster bool // keys of different slots live on different nodes
	oneNode bool // a single server: one script may touch any keys
	// takeAllMax caps the page of TakeAll (0: none).
	takeAllMax int

	// handOverStep, set by tests, is called after each step of handOver;
	// an error stops it there, as the death of its process would.
	handOverStep func(step int) error

	watch finishWatch // results waiting for their tasks (watch.go)

	shards shardTable // the sharded queues' shards (shards.go)

	mu            sync.Mutex
	knownQueue    map[string]bool // queues added to the queues set
	scriptsLoaded bool            // the pipelined scripts are loaded
	closed        bool
}

// New returns a store on client. With owns, Close closes client.
func New(client UniversalClient, opts Options, owns bool) *Store {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	useLogger(opts.Logger)
	_, cluster := client.(*goredis.ClusterClient)
	_, oneNode := client.(*goredis.Client)
	var repl transport.Replicas
	switch {
	case !cluster:
		repl = transport.Replicas{N: opts.MinReplicas, Timeout: opts.ReplicaTimeout}
	case opts.MinReplicas == 0:
	case opts.nodesWait:
		// WAIT has no key: a cluster pipeline would send it to any node.
		// The nodes add it to each of their pipelines instead, and single
		// writes go as pipelines.
		repl = transport.Replicas{N: opts.MinReplicas, Timeout: opts.ReplicaTimeout, ByNodes: true}
	default:
		opts.Logger.Warn("MinReplicas needs a cluster client made from a URL by machinist: writes do not wait for replicas")
	}
	return &Store{
		client:     client,
		owned:      owns,
		batch:      transport.NewBatcher(client, repl),
		repl:       repl,
		keys:       &keys{prefix: opts.KeyPrefix},
		opts:       opts,
		log:        opts.Logger,
		cluster:    cluster,
		oneNode:    oneNode,
		knownQueue: make(map[string]bool),
		shards:     shardTable{want: maps.Clone(opts.QueueShards)},
	}
}

// ErrNotReplicated is wrapped by the error of a write that fewer replicas
// than Options.MinReplicas confirmed in time: the master may have applied
// it, and it may be lost if the master fails.
var ErrNotReplicated = transport.ErrNotReplicated

// ReplicaTimeout is how long a write waits for replicas: half the read
// timeout (go-redis's default 3 s when it is 0), so that WAIT answers
// before the read times out.
func ReplicaTimeout(read time.Duration) time.Duration {
	if read <= 0 {
		read = 3 * time.Second
	}
	return read / 2
}

// Dial returns a store on a client of its own for rawURL ("redis://",
// "rediss://", several addresses for a Cluster, or MemoryScheme's),
// connected by c, with opts.
func Dial(rawURL string, c ClientOptions, opts Options) (*Store, error) {
	if name, ok := strings.CutPrefix(rawURL, MemoryScheme); ok {
		return dialEmbedded(name, c, opts)
	}
	t, err := Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return DialTarget(t, c, opts)
}

// DialTarget returns a store on a client of its own for t, as Dial does for
// the URL t was parsed from.
func DialTarget(t Target, c ClientOptions, opts Options) (*Store, error) {
	client, err := ClientFor(t, c)
	if err != nil {
		return nil, err
	}
	_, opts.nodesWait = client.(*goredis.ClusterClient) // NewClient gave its nodes a transport.WaitHook
	return New(client, opts, true), nil
}

// Unusable returns a store whose every command fails with err, as commands
// to a server that cannot be reached fail: the store of a constructor that
// has no error to return. Close releases it.
func Unusable(err error, opts Options) *Store {
	client := goredis.NewClient(&goredis.Options{
		Addr:          "unusable",
		Dialer:        func(context.Context, string, string) (net.Conn, error) { return nil, err },
		DialerRetries: 1,
		MaxRetries:    -1,
	})
	return New(client, opts, true)
}

// MemoryScheme starts the URLs of the in-process engine: "memory://" is an
// engine of the store's own, "memory://NAME" the process's engine of that
// name, shared by every store that names it.
const MemoryScheme = "memory://"

// dialEmbedded returns a store on the in-process engine named name (see
// MemoryScheme), which it releases on Close.
func dialEmbedded(name string, co ClientOptions, opts Options) (*Store, error) {
	e, release, err := embedded.Acquire(name)
	if err != nil {
		return nil, err
	}
	// The engine runs one command at a time, in the process: under a
	// burst, callers wait their turn for a connection, and for a reply,
	// rather than fail after go-redis's few seconds (a reply is late only
	// because the engine is busy, and a call sent again adds to its
	// queue); each call's context still bounds its wait.
	co.PoolTimeout = max(co.PoolTimeout, time.Minute)
	co.ReadTimeout = max(co.ReadTimeout, time.Minute)
	co.WriteTimeout = max(co.WriteTimeout, time.Minute)
	c, err := NewClient("redis://:"+e.Password()+"@"+e.Addr(), co)
	if err != nil {
		release()
		return nil, err
	}
	s := New(c, opts, true)
	s.release = release
	// Its scripts run in Go's Lua, several times slower than Redis's: a
	// smaller page of an operator's action holds it for less.
	s.takeAllMax = 200
	return s, nil
}

// OneNode reports whether the store is a single Redis server, where one
// script may touch keys of any queue, group or task: a task's result can
// then be written by the script that acknowledges it.
func (s *Store) OneNode() bool { return s.oneNode }

// Close sends what the batcher holds, then closes the client when the
// store owns it. Safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.watch.close()
	s.batch.Close()
	var err error
	if s.owned {
		if cerr := s.client.Close(); cerr != nil {
			err = fmt.Errorf("close Redis client: %w", cerr)
		}
	}
	if s.release != nil {
		s.release()
	}
	return err
}

// loadScripts loads the scripts sent inside pipelines (where EVALSHA cannot
// fall back to EVAL) once per store; a Cluster client loads them on every
// master. Callers that find them not loaded yet each load them (loading
// twice is harmless), without holding s.mu, so that one waiting for a
// Redis that does not answer holds up no one else, and returns at its
// context's end.
func (s *Store) loadScripts(ctx context.Context) error {
	s.mu.Lock()
	loaded := s.scriptsLoaded
	s.mu.Unlock()
	if loaded {
		return nil
	}
	err := transport.Detach(ctx, func() error {
		for _, script := range pipelined {
			if err := script.Load(ctx, s.client).Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("load scripts: %w", err)
	}
	s.mu.Lock()
	s.scriptsLoaded = true
	s.mu.Unlock()
	return nil
}

// reloadScripts loads the pipelined scripts again after Redis said it lost
// them (a restart, a failover, SCRIPT FLUSH).
func (s *Store) reloadScripts(ctx context.Context) error {
	s.forgetScripts()
	return s.loadScripts(ctx)
}

// forgetScripts makes the next write load the pipelined scripts again.
func (s *Store) forgetScripts() {
	s.mu.Lock()
	s.scriptsLoaded = false
	s.mu.Unlock()
}

// msOf returns t in ms since the epoch, rounded up: a task never becomes due
// before its time.
func msOf(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

// randomHex returns n random bytes in hex: fencing tokens (12 bytes),
// publish tokens (8: they only have to differ between publishes of the
// same task ids) and claim tokens.
func randomHex(n int) string {
	buf := make([]byte, n)
	_, _ = rand.Read(buf)
	return hex.EncodeToString(buf)
}
