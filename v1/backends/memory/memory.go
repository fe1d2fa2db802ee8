package memory

import (
	"fmt"

	"github.com/b6192125/machinist/internal/rdb"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	"github.com/b6192125/machinist/v1/config"
)

// Backend is the Redis backend; New gives it an in-process engine.
type Backend = redisbackend.Backend

// Options configures New.
type Options struct {
	// Config gives the backend its settings, as a Redis backend takes
	// them: how long results are kept, key prefix. nil means the defaults.
	Config *config.Config
}

// OptionsFrom returns the Options of cnf.
func OptionsFrom(cnf *config.Config) Options { return Options{Config: cnf} }

// New returns a backend on an in-process engine of its own, which Close
// stops. It panics if the engine cannot listen on a loopback port.
func New(opts Options) *Backend {
	cnf := opts.Config
	if cnf == nil {
		cnf = &config.Config{}
	}
	b, err := redisbackend.Dial(rdb.MemoryScheme, cnf.WithDefaults())
	if err != nil {
		panic(fmt.Sprintf("memory: %v", err))
	}
	return b
}
