package machinery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/b6192125/machinist/internal/pair"
	"github.com/b6192125/machinist/internal/periodic"
	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/telemetry"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	lockiface "github.com/b6192125/machinist/v1/locks/iface"
	"github.com/b6192125/machinist/v1/tasks"
	"github.com/b6192125/machinist/v1/worker"
)

// Server is the entry point: it holds the registered tasks, the broker and
// the result backend, sends tasks and workflows, and makes workers. It is
// safe for concurrent use.
type Server struct {
	mu              sync.RWMutex
	config          *config.Config
	registeredTasks map[string]interface{}
	aggregators     map[string]worker.Aggregation // by task name
	broker          brokers.Broker
	backend         backends.Backend
	joined          *pair.Store // broker and backend as the one store the Server and its workers call
	prePublish      func(*tasks.Signature)
	log             *slog.Logger
	tracing         *telemetry.Tracing // the config's providers, taken when the Server is made, like its Logger
	metrics         *telemetry.Metrics

	// brokerName and backendName say which broker and backend the Server
	// uses, for its workers' first log line: a URL (password redacted) or
	// a type. Guarded by mu.
	brokerName, backendName string

	lock    lockiface.Lock // machinery's lock, for a broker that is not a Claimer
	invalid error          // the config's error, for NewServerWithBrokerBackendLock

	// The migration mode (see migration), made by the first worker.
	migrationOnce sync.Once
	migrating     *migration
	migrationErr  error

	scheduler *periodic.Scheduler
	eager     *worker.Worker // runs every task inside Send* in eager mode (see eager.go); nil otherwise
	closers   []io.Closer    // Redis clients the Server made
	closeOnce sync.Once
	closeErr  error
}

// NewServer makes a Server from cnf. Fields left zero get their defaults (see
// package config); a configuration that cannot work is refused with an error
// wrapping config.ErrInvalid that names the field. cnf.Broker must be set
// ("memory://" for the in-process broker); a nil cnf is refused as one
// without it. cnf itself is not changed.
func NewServer(cnf *config.Config) (*Server, error) {
	c := dial.Defaults(cnf)
	if err := c.Validate(); err != nil {
		if cnf == nil {
			// Most often a load whose error was ignored: say so.
			return nil, fmt.Errorf("machinist: NewServer: nil *config.Config: %w", err)
		}
		return nil, err
	}
	broker, backend, closers, err := newBrokerBackend(c)
	if err != nil {
		return nil, err
	}
	s := newServer(c, broker, backend)
	s.brokerName, s.backendName = config.RedactURL(c.Broker), config.RedactURL(c.ResultBackend)
	s.closers = closers
	return s, nil
}

// NewServerWithRedisClient makes a Server whose broker and backend both run
// on client, an existing go-redis client (standalone, Sentinel or Cluster),
// whatever cnf's Broker and ResultBackend say. The caller keeps ownership
// of client: Close does not close it. client is a go-redis v9 client
// (*redis.Client, *redis.ClusterClient, *redis.Ring, a Sentinel client).
func NewServerWithRedisClient(cnf *config.Config, client redisbroker.UniversalClient) (*Server, error) {
	c := dial.Defaults(cnf)
	validate := c.Validate
	if c.Broker == "" {
		// client is the broker: an unset Broker is no mistake here.
		validate = c.ValidateSettings
	}
	if err := validate(); err != nil {
		return nil, err
	}
	st := rdb.New(client, dial.Options(c), false)
	broker := redisbroker.NewOnStore(st, redisbroker.OptionsFrom(c))
	backend := redisbackend.NewOnStore(st, redisbackend.Options{})
	s := newServer(c, broker, backend)
	s.brokerName = rdb.ClientName(client)
	s.backendName = s.brokerName
	s.closers = []io.Closer{st}
	return s, nil
}

// NewServerWithBrokerBackend makes a Server on a broker and backend built by
// the caller, such as a test double or a broker on a connection the caller
// owns. cnf gets its defaults as in NewServer and is validated, except for
// the Broker and ResultBackend URLs, which name nothing here (but
// Broker "eager", or a broker from brokers/eager, selects eager mode).
// Close closes broker and backend.
func NewServerWithBrokerBackend(cnf *config.Config, broker brokers.Broker, backend backends.Backend) (*Server, error) {
	c := dial.Defaults(cnf)
	if err := c.ValidateSettings(); err != nil {
		return nil, err
	}
	return newServer(c, broker, backend), nil
}

// NewServerWithBrokerBackendLock is machinery's NewServerWithBrokerBackend,
// with its signature: a Server on the caller's broker and backend, and lock
// for periodic ticks when broker cannot grant them once across processes
// itself (it is not a brokers/iface.Claimer; machinist's brokers are, and
// lock is then unused). It has no error to return, so a config
// NewServerWithBrokerBackend would refuse is logged, and every send,
// worker and periodic task of the Server fails with that error.
func NewServerWithBrokerBackendLock(cnf *config.Config, broker brokers.Broker, backend backends.Backend, lock lockiface.Lock) *Server {
	c := dial.Defaults(cnf)
	s := newServer(c, broker, backend)
	s.lock = lock
	if err := c.ValidateSettings(); err != nil {
		s.invalid = fmt.Errorf("machinist: NewServerWithBrokerBackendLock: %w", err)
		s.log.Error("the Server's config is refused; it will send and run nothing", slog.Any("error", err))
	}
	return s
}

func newServer(c *config.Config, broker brokers.Broker, backend backends.Backend) *Server {
	log := c.Logger
	s := &Server{
		config:          c,
		registeredTasks: make(map[string]interface{}),
		broker:          broker,
		backend:         backend,
		joined:          pair.New(broker, backend, log),
		brokerName:      fmt.Sprintf("%T", broker),
		backendName:     fmt.Sprintf("%T", backend),
		log:             log,
		tracing:         telemetry.NewTracing(c.TracerProvider, c.Propagator),
		metrics:         telemetry.NewMetrics(c.MeterProvider),
	}
	s.scheduler = newScheduler(s)
	s.adopt(broker)
	if e, ok := broker.(interface{ Eager() bool }); c.Broker == "eager" || ok && e.Eager() {
		s.eager = s.NewWorker("eager", 1).engine(func(p *worker.Params) { p.RetryInline = true })
	}
	return s
}

// NewWorker returns a worker on the config's DefaultQueue. A concurrency
// below 1 means twice the number of CPUs, as in machinery.
func (s *Server) NewWorker(consumerTag string, concurrency int) *Worker {
	return &Worker{server: s, ConsumerTag: consumerTag, Concurrency: concurrency}
}

// NewQueuesWorker returns a worker on several queues with weights: each
// fetch tries them in a random order weighted by the values or, with
// strictPriority, highest weight first. See Worker.Queues.
func (s *Server) NewQueuesWorker(consumerTag string, concurrency int, queues map[string]int, strictPriority bool) *Worker {
	return &Worker{server: s, ConsumerTag: consumerTag, Concurrency: concurrency, Queues: queues, StrictPriority: strictPriority}
}

// NewCustomQueueWorker returns a worker on queue.
func (s *Server) NewCustomQueueWorker(consumerTag string, concurrency int, queue string) *Worker {
	return &Worker{server: s, ConsumerTag: consumerTag, Concurrency: concurrency, Queue: queue}
}

// GetBroker returns the broker.
func (s *Server) GetBroker() brokers.Broker {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.broker
}

// SetBroker replaces the broker. The old one is not closed. The new one is
// told the registered task names, and given the Server's config if it has
// none.
func (s *Server) SetBroker(broker brokers.Broker) {
	s.mu.Lock()
	s.broker = broker
	s.joined = pair.New(broker, s.backend, s.log)
	s.brokerName = fmt.Sprintf("%T", broker)
	s.mu.Unlock()
	s.adopt(broker)
}

// adopt tells broker the Server's registered task names and, if it has no
// config of its own, the Server's config (machinery's GetConfig and
// AdjustRoutingKey read it).
func (s *Server) adopt(broker brokers.Broker) {
	if broker.GetConfig() == nil {
		if c, ok := broker.(interface{ SetConfig(*config.Config) }); ok {
			c.SetConfig(s.GetConfig())
		}
	}
	broker.SetRegisteredTaskNames(s.GetRegisteredTaskNames())
}

// GetBackend returns the result backend.
func (s *Server) GetBackend() backends.Backend {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.backend
}

// SetBackend replaces the result backend. The old one is not closed.
func (s *Server) SetBackend(backend backends.Backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backend = backend
	s.joined = pair.New(s.broker, backend, s.log)
	s.backendName = fmt.Sprintf("%T", backend)
}

// store returns the broker and backend as one store: what the Server and
// its workers call.
func (s *Server) store() *pair.Store {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.joined
}

// names returns what the Server's broker and backend are (see brokerName).
func (s *Server) names() (broker, backend string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.brokerName, s.backendName
}

// GetConfig returns the Server's configuration, with defaults applied.
// Treat it as read-only.
func (s *Server) GetConfig() *config.Config {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.config
}

// SetConfig replaces the configuration (defaults applied) used from now on.
// The broker and backend are not rebuilt.
func (s *Server) SetConfig(cnf *config.Config) {
	c := dial.Defaults(cnf)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = c
}

// Logger returns the Server's logger.
func (s *Server) Logger() *slog.Logger { return s.log }

// SetPreTaskHandler sets a function called with each signature just before
// it is published (machinery's name; it is a pre-publish hook).
func (s *Server) SetPreTaskHandler(handler func(*tasks.Signature)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prePublish = handler
}

// RegisterTasks registers every function of namedTaskFuncs under its name,
// or none of them when one is not a valid task function.
func (s *Server) RegisterTasks(namedTaskFuncs map[string]interface{}) error {
	for name, fn := range namedTaskFuncs {
		if err := validateRegistration(name, fn); err != nil {
			return err
		}
	}
	s.register(namedTaskFuncs)
	return nil
}

// RegisterTask registers taskFunc under name. It must be a function whose
// last return value is an error; a first context.Context parameter receives
// the task's context.
func (s *Server) RegisterTask(name string, taskFunc interface{}) error {
	if err := validateRegistration(name, taskFunc); err != nil {
		return err
	}
	s.register(map[string]interface{}{name: taskFunc})
	return nil
}

// register adds the task functions and tells the broker the names, under
// one lock, so that concurrent registrations reach it in order.
func (s *Server) register(funcs map[string]interface{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.registeredTasks, funcs)
	s.broker.SetRegisteredTaskNames(slices.Sorted(maps.Keys(s.registeredTasks)))
}

func validateRegistration(name string, fn interface{}) error {
	if name == "" {
		return fmt.Errorf("machinist: register task: %w", tasks.ErrEmptyTaskName)
	}
	if err := tasks.ValidateTask(fn); err != nil {
		return fmt.Errorf("machinist: register task %q (%T): %w", name, fn, err)
	}
	return nil
}

// IsTaskRegistered reports whether a task is registered under name.
func (s *Server) IsTaskRegistered(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.registeredTasks[name]
	return ok
}

// GetRegisteredTask returns the function registered under name, or an error
// wrapping ErrTaskNotRegistered.
func (s *Server) GetRegisteredTask(name string) (interface{}, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn, ok := s.registeredTasks[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrTaskNotRegistered, name)
	}
	return fn, nil
}

// closeMigration closes the migration mode's connections, if it was made.
func (s *Server) closeMigration() error {
	s.migrationOnce.Do(func() {}) // none is made after Close
	if s.migrating == nil {
		return nil
	}
	s.migrating.server.scheduler.Stop()
	return s.migrating.close()
}

// GetRegisteredTaskNames returns the registered task names, sorted.
func (s *Server) GetRegisteredTaskNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.registeredTasks))
}

// Close stops the periodic scheduler and closes the broker and backend.
// Workers should be stopped first. Safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.scheduler.Stop()
		s.closeErr = errors.Join(s.store().Close(), closeAll(s.closers), s.closeMigration())
	})
	return s.closeErr
}

// claim takes the tick key for lease, keeping its record for keep, through
// the broker's Claimer. A broker that is not one leaves the claim to
// machinery's lock, when the Server has one (NewServerWithBrokerBackendLock):
// the process that takes the lock sends the tick, with nothing to complete;
// with neither, each process sends its own ticks.
func (s *Server) claim(ctx context.Context, key string, lease, keep time.Duration) (brokers.ClaimResult, error) {
	r, err := s.store().ClaimLease(ctx, key, lease, keep)
	if !errors.Is(err, store.ErrUnsupported) {
		return r, err
	}
	won := brokers.ClaimResult{Status: brokers.ClaimWon}
	if s.lock == nil {
		return won, nil
	}
	if err := s.lock.Lock(key, time.Now().Add(keep).UnixNano()); err != nil {
		return brokers.ClaimResult{Status: brokers.ClaimDone}, nil // held by another process
	}
	return won, nil
}
