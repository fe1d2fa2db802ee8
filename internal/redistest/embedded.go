package redistest

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/embedded"
)

// Embedded is the in-process engine that runs the store for memory://
// (internal/embedded), for running the suites that run on Redis on it too.
type Embedded struct {
	e *embedded.Engine
}

// StartEmbedded starts an engine, stopped when the test ends.
func StartEmbedded(tb testing.TB) *Embedded {
	tb.Helper()
	e, err := embedded.Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.Close)
	return &Embedded{e: e}
}

// Client returns a client of the engine, closed when the test ends.
func (e *Embedded) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: e.e.Addr(), Password: e.e.Password()})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a key prefix no other test uses ("t7-9f86d081:"). Its
// keys go with the engine.
func (e *Embedded) Prefix() string { return newPrefix() }

// SetTime sets the engine's clock to at: TIME answers at, and TTLs run
// out by it. From then on only SetTime moves it (embedded.Engine.SetTime).
func (e *Embedded) SetTime(at time.Time) { e.e.SetTime(at) }
