package machinist

import (
	"fmt"
	"io"
	"strings"
	"sync"

	backendiface "github.com/b6192125/machinist/v1/backends/iface"
	memorybackend "github.com/b6192125/machinist/v1/backends/memory"
	"github.com/b6192125/machinist/v1/brokers/eager"
	brokeriface "github.com/b6192125/machinist/v1/brokers/iface"
	memorybroker "github.com/b6192125/machinist/v1/brokers/memory"
	"github.com/b6192125/machinist/v1/config"
)

// BrokerFactory returns the broker cnf.Broker names. cnf must have been
// through WithDefaults. "memory://NAME" returns the process's shared broker of
// that name: every Server naming it sees the same tasks; it is closed when
// the last of them is closed.
func BrokerFactory(cnf *config.Config) (brokeriface.Broker, error) {
	switch u := cnf.Broker; {
	case u == "eager":
		return eager.New(), nil
	case u == "memory://":
		return memorybroker.New(cnf), nil
	case strings.HasPrefix(u, "memory://"):
		b, release := sharedBrokers.get(strings.TrimPrefix(u, "memory://"), func() io.Closer {
			return memorybroker.New(cnf)
		})
		return &sharedBroker{Broker: b.(brokeriface.Broker), release: release}, nil
	case isRedisURL(u):
		return nil, fmt.Errorf("machinist: Broker %q: %w", config.RedactURL(u), errRedisNotYet)
	default:
		return nil, fmt.Errorf("machinist: Broker %q: %w", config.RedactURL(u), errUnsupported)
	}
}

// BackendFactory returns the result backend cnf.ResultBackend names. cnf must
// have been through WithDefaults. "eager" is an in-process backend, like
// "memory://"; "memory://NAME" is shared by name like the broker.
func BackendFactory(cnf *config.Config) (backendiface.Backend, error) {
	switch u := cnf.ResultBackend; {
	case u == "eager", u == "memory://":
		return memorybackend.New(cnf), nil
	case strings.HasPrefix(u, "memory://"):
		b, release := sharedBackends.get(strings.TrimPrefix(u, "memory://"), func() io.Closer {
			return memorybackend.New(cnf)
		})
		return &sharedBackend{Backend: b.(backendiface.Backend), release: release}, nil
	case isRedisURL(u):
		return nil, fmt.Errorf("machinist: ResultBackend %q: %w", config.RedactURL(u), errRedisNotYet)
	default:
		return nil, fmt.Errorf("machinist: ResultBackend %q: %w", config.RedactURL(u), errUnsupported)
	}
}

var errUnsupported = fmt.Errorf("%w: unsupported URL", config.ErrInvalid)

// errRedisNotYet is returned for Redis URLs until the Redis broker and
// backend land.
var errRedisNotYet = fmt.Errorf("%w: the Redis broker and backend are not in this release yet; use memory:// or eager", config.ErrInvalid)

func isRedisURL(u string) bool {
	return strings.HasPrefix(u, "redis://") || strings.HasPrefix(u, "rediss://")
}

// registry holds the named in-process brokers or backends, counting the
// Servers that use each so that the last one to close it closes it.
type registry struct {
	mu    sync.Mutex
	items map[string]*sharedItem
}

type sharedItem struct {
	item io.Closer
	refs int
}

var (
	sharedBrokers  = &registry{items: map[string]*sharedItem{}}
	sharedBackends = &registry{items: map[string]*sharedItem{}}
)

// get returns the item named name, making it with newItem if the process has
// none, and the function that releases this reference to it.
func (r *registry) get(name string, newItem func() io.Closer) (io.Closer, func() error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	it, ok := r.items[name]
	if !ok {
		it = &sharedItem{item: newItem()}
		r.items[name] = it
	}
	it.refs++
	var once sync.Once
	release := func() error {
		var err error
		once.Do(func() {
			r.mu.Lock()
			it.refs--
			last := it.refs == 0
			if last {
				delete(r.items, name)
			}
			r.mu.Unlock()
			if last {
				err = it.item.Close()
			}
		})
		return err
	}
	return it.item, release
}

// sharedBroker is one Server's reference to a named in-process broker.
type sharedBroker struct {
	brokeriface.Broker
	release func() error
}

// Close releases this reference; the broker closes with the last one.
func (s *sharedBroker) Close() error { return s.release() }

// sharedBackend is one Server's reference to a named in-process backend.
type sharedBackend struct {
	backendiface.Backend
	release func() error
}

// Close releases this reference; the backend closes with the last one.
func (s *sharedBackend) Close() error { return s.release() }
