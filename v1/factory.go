package machinery

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/b6192125/machinist/internal/rdb"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	eagerlock "github.com/b6192125/machinist/v1/locks/eager"
	lockiface "github.com/b6192125/machinist/v1/locks/iface"
	redislock "github.com/b6192125/machinist/v1/locks/redis"
)

// BrokerFactory returns the broker cnf.Broker names, on a Redis connection
// of its own for a Redis URL (NewServer shares one between broker and
// backend instead). cnf must have been through WithDefaults.
// "memory://" runs the Redis store on an in-process engine of the broker's
// own; "memory://NAME" on the process's engine of that name: every Server
// naming it sees the same tasks, and the engine stops with the last of
// them. "eager" returns an idle in-process broker: eager is a mode of the
// Server that Config.Broker selects (see NewServer), not a broker.
func BrokerFactory(cnf *config.Config) (brokers.Broker, error) {
	u, ok := storeURL(cnf.Broker)
	if !ok {
		return nil, fmt.Errorf("machinist: Broker %q: %w", config.RedactURL(cnf.Broker), errUnsupported)
	}
	b, err := redisbroker.Dial(u, cnf)
	if err != nil {
		return nil, dialError("Broker", err)
	}
	return b, nil
}

// storeURL returns the URL of the store that a Broker or ResultBackend u
// runs on, and whether u names one: a Redis URL or a memory:// one as it
// is, and "eager" (a mode of the Server, whose broker stays idle) as an
// in-process engine of its own.
func storeURL(u string) (string, bool) {
	switch {
	case u == "eager":
		return rdb.MemoryScheme, true
	case rdb.IsURL(u), strings.HasPrefix(u, rdb.MemoryScheme):
		return u, true
	}
	return "", false
}

// LockFactory returns the lock cnf.Lock names, as machinery's does: a Redis
// lock for a Redis URL (redis://, rediss:// or redis+socket://, as a
// broker's), the in-process lock for anything else. machinist's Server does
// not need one (see NewServerWithBrokerBackendLock); Config.Lock is
// otherwise ignored.
func LockFactory(cnf *config.Config) (lockiface.Lock, error) {
	for _, scheme := range []string{"redis://", "rediss://", "redis+socket://"} {
		if strings.HasPrefix(cnf.Lock, scheme) {
			if _, err := rdb.Parse(cnf.Lock); err != nil {
				return nil, dialError("Lock", err)
			}
			return redislock.NewURL(cnf, cnf.Lock, 3), nil
		}
	}
	return eagerlock.New(), nil
}

// BackendFactory returns the result backend cnf.ResultBackend names. cnf must
// have been through WithDefaults. "eager" is an idle in-process backend;
// "memory://" and "memory://NAME" run the store on an in-process engine,
// as the broker's.
func BackendFactory(cnf *config.Config) (backends.Backend, error) {
	u, ok := storeURL(cnf.ResultBackend)
	if !ok {
		return nil, fmt.Errorf("machinist: ResultBackend %q: %w", config.RedactURL(cnf.ResultBackend), errUnsupported)
	}
	b, err := redisbackend.Dial(u, cnf)
	if err != nil {
		return nil, dialError("ResultBackend", err)
	}
	return b, nil
}

var errUnsupported = fmt.Errorf("%w: unsupported URL", config.ErrInvalid)

// dialError is err, from making the client of the Redis URL of field
// (nothing is dialled then), naming field; a URL that cannot be used (a
// port that is not a number, a host that is not host:port) is a
// configuration error, wrapping config.ErrInvalid as Validate's do.
func dialError(field string, err error) error {
	if errors.Is(err, rdb.ErrURL) {
		return fmt.Errorf("%w: %s: %w", config.ErrInvalid, field, err)
	}
	return fmt.Errorf("machinist: %s: %w", field, err)
}

// closeAll closes closers last to first and returns their errors.
func closeAll(closers []io.Closer) error {
	var errs []error
	for i := len(closers) - 1; i >= 0; i-- {
		errs = append(errs, closers[i].Close())
	}
	return errors.Join(errs...)
}

// newBrokerBackend builds the broker and backend cnf names. When both are on
// the same Redis URL they share one store (one client, one batcher), and the
// broker writes task states in the same step as it moves tasks (see
// store.Joiner); the stores the Server must close are returned
// in closers.
func newBrokerBackend(cnf *config.Config) (broker brokers.Broker, backend backends.Backend, closers []io.Closer, err error) {
	stores := map[string]*rdb.Store{}
	var made []io.Closer
	store := func(u string) (*rdb.Store, error) {
		if st, ok := stores[u]; ok {
			return st, nil
		}
		st, err := dial.Store(u, cnf)
		if err != nil {
			return nil, err
		}
		stores[u] = st
		made = append(made, st)
		return st, nil
	}
	// made, not closers: a return with an error sets closers to nil
	// before this runs.
	defer func() {
		if err != nil {
			closeAll(made)
		}
	}()
	// Broker and backend on one store (the same URL, or both eager) are
	// paired: the broker writes the backend's states.
	bu, ok := storeURL(cnf.Broker)
	if !ok {
		return nil, nil, nil, fmt.Errorf("machinist: Broker %q: %w", config.RedactURL(cnf.Broker), errUnsupported)
	}
	bst, err := store(bu)
	if err != nil {
		return nil, nil, nil, dialError("Broker", err)
	}
	ru, ok := storeURL(cnf.ResultBackend)
	if !ok {
		return nil, nil, nil, fmt.Errorf("machinist: ResultBackend %q: %w", config.RedactURL(cnf.ResultBackend), errUnsupported)
	}
	rst, err := store(ru)
	if err != nil {
		return nil, nil, nil, dialError("ResultBackend", err)
	}
	return redisbroker.NewOnStore(bst, redisbroker.OptionsFrom(cnf)), redisbackend.NewOnStore(rst, redisbackend.Options{}), made, nil
}
