package memory

import (
	"fmt"

	"github.com/b6192125/machinist/internal/rdb"
	memorybackend "github.com/b6192125/machinist/v1/backends/memory"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
)

// Broker is the Redis broker; New gives it an in-process engine.
type Broker = redisbroker.Broker

// Options configures New and NewPair.
type Options struct {
	// Config gives the broker its settings, as a Redis broker takes them:
	// leases, recovery, the archive, key prefix. nil means the defaults.
	Config *config.Config
}

// OptionsFrom returns the Options of cnf.
func OptionsFrom(cnf *config.Config) Options { return Options{Config: cnf} }

func (o Options) config() *config.Config {
	if o.Config == nil {
		return (&config.Config{}).WithDefaults()
	}
	return o.Config.WithDefaults()
}

// New returns a broker on an in-process engine of its own, which Close
// stops. It panics if the engine cannot listen on a loopback port.
func New(opts Options) *Broker {
	b, err := redisbroker.Dial(rdb.MemoryScheme, opts.config())
	if err != nil {
		panic(fmt.Sprintf("memory: %v", err))
	}
	return b
}

// NewPair returns a broker and a result backend on one in-process engine
// and one store: the broker writes the backend's states (store.Joiner).
// The engine stops when the broker is closed: close the backend first, or
// stop using it then. It panics if the engine cannot listen on a loopback
// port.
func NewPair(opts Options) (*Broker, *memorybackend.Backend) {
	cnf := opts.config()
	store, err := dial.Store(rdb.MemoryScheme, cnf)
	if err != nil {
		panic(fmt.Sprintf("memory: %v", err))
	}
	bopts := redisbroker.OptionsFrom(cnf)
	bopts.OwnsStore = true
	return redisbroker.NewOnStore(store, bopts), redisbackend.NewOnStore(store, redisbackend.Options{})
}
