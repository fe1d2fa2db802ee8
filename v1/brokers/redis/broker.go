package redisbroker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/maintenance"
	"github.com/b6192125/machinist/internal/rdb"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/telemetry"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	"github.com/b6192125/machinist/v1/tasks"
)

// UniversalClient is a go-redis v9 client: *redis.Client,
// *redis.ClusterClient, *redis.Ring, or a Sentinel client.
type UniversalClient = rdb.UniversalClient

// Broker is the Redis broker: an adapter of brokers.LeaseBroker over the
// store in internal/rdb. See the package documentation for the protocol.
type Broker struct {
	brokers.Compat // machinery's methods

	store     *rdb.Store
	ownsStore bool
	opts      Options
	log       *slog.Logger
	id        string // this broker's name in maintainer elections
	// archetype is the maintainers' logger and clock.
	archetype *service.Archetype

	mu          sync.Mutex
	maintainers map[string]*maintenance.Maintainer // by queue, started by Fetch
	closed      bool
	ctx         context.Context // ends at Close
	cancel      context.CancelFunc

	metrics   *telemetry.Metrics
	unobserve func() // stops the depth gauge's callback
}

var (
	_ brokers.LeaseBroker = (*Broker)(nil)
	_ store.StateBroker   = (*Broker)(nil)
	_ store.Joiner        = (*Broker)(nil)
	_ brokers.Relay       = (*Broker)(nil)
	_ brokers.Canceller   = (*Broker)(nil)
)

// Options configures a Broker.
type Options struct {
	// DefaultQueue is the queue of GetPendingTasks("").
	DefaultQueue string
	// ForwardInterval is the longest a due scheduled or retrying task
	// waits to become pending off a single server, where maintainers poll
	// (Config.Redis.DelayedTasksPollPeriod); on one, what comes due wakes
	// the maintainer, which runs at least every max(ForwardInterval, 1 s)
	// (see internal/maintenance).
	ForwardInterval time.Duration
	// RecoverInterval is how often expired leases are looked for.
	RecoverInterval time.Duration
	// Logger receives the broker's logs. Default slog.Default().
	Logger *slog.Logger
	// OwnsStore makes Close close the store.
	OwnsStore bool
	// Clock times the maintenance loops. Default the wall clock.
	Clock clock.Clock
	// MeterProvider receives the maintainers' metrics: tasks recovered
	// and archived after lease loss, and the depth of the queues this
	// broker maintains (machinist.queue.tasks). Default: the global one.
	MeterProvider metric.MeterProvider
}

// OptionsFrom returns the options cnf sets; cnf must have been through
// WithDefaults.
func OptionsFrom(cnf *config.Config) Options {
	return Options{
		DefaultQueue:    cnf.DefaultQueue,
		ForwardInterval: time.Duration(cnf.Redis.DelayedTasksPollPeriod) * time.Millisecond,
		RecoverInterval: cnf.RecoverInterval,
		Logger:          cnf.Logger,
		MeterProvider:   cnf.MeterProvider,
	}
}

// NewOnStore returns a broker on store. Its background work (promoting due tasks,
// recovering expired leases) starts for a queue the first time a worker
// fetches from it, so a process that only sends tasks runs none, and runs
// only while the broker is the queue's elected maintainer (see
// internal/maintenance).
func NewOnStore(store *rdb.Store, opts Options) *Broker {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With(slog.String("component", "redisbroker"))
	// The maintainers run until Close, not for a caller's request: their
	// context is the broker's own.
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		store:       store,
		ownsStore:   opts.OwnsStore,
		opts:        opts,
		log:         log,
		id:          newID(),
		archetype:   service.NewArchetype(log, opts.Clock),
		maintainers: make(map[string]*maintenance.Maintainer),
		ctx:         ctx,
		cancel:      cancel,
		metrics:     telemetry.NewMetrics(opts.MeterProvider),
	}
	unregister, err := b.metrics.ObserveDepths(b.observeDepths)
	if err != nil {
		b.log.Warn("the queue depth metric is not reported", slog.Any("error", err))
		unregister = func() {}
	}
	b.unobserve = unregister
	return b
}

// Dial returns a broker on a Redis connection of its own for rawURL,
// configured by cnf (through WithDefaults); Close closes the connection.
func Dial(rawURL string, cnf *config.Config) (*Broker, error) {
	store, err := dial.Store(rawURL, cnf)
	if err != nil {
		return nil, err
	}
	return onStore(cnf, store), nil
}

// Store returns the store the broker runs on.
func (b *Broker) Store() *rdb.Store { return b.store }

func (b *Broker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// checkOpen returns ErrClosed once Close was called.
func (b *Broker) checkOpen() error {
	if b.isClosed() {
		return brokers.ErrClosed
	}
	return nil
}

// wrap prefixes err with the package name, and names the cause of an
// authentication error (rdb.ErrAuth).
func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("redisbroker: %w", rdb.Explain(err))
}

// Publish adds task to its queue, without its state, as machinery's
// Publish does (see PublishTasks).
func (b *Broker) Publish(ctx context.Context, task *tasks.Signature) error {
	return b.PublishTasks(ctx, task)
}

// PublishTasks adds tasks to their queues: one script per queue, all or
// nothing within a queue. It returns when ctx ends, whatever Redis does;
// its error wraps brokers.ErrNotSent or brokers.ErrMaybeSent.
func (b *Broker) PublishTasks(ctx context.Context, sigs ...*tasks.Signature) error {
	if err := b.checkOpen(); err != nil {
		return store.NotSent(err)
	}
	return wrap(b.store.Publish(ctx, rdb.PublishParams{Tasks: sigs}))
}

// Join returns the broker as the writer of backend's states when backend
// is a Redis backend on the same store on a single server, where a task's
// state can be written by the script that publishes or acknowledges the
// task; else nil.
func (b *Broker) Join(backend store.Backend) store.StateBroker {
	// A *redisbackend.Backend, or a type that embeds one (BackendGR).
	if be, ok := backend.(interface{ Store() *rdb.Store }); ok && be.Store() == b.store && b.store.OneNode() {
		return b
	}
	return nil
}

// PublishPending publishes p.Tasks, PENDING from then on, in one round
// trip: no PENDING state is written (the task hash says it; the backend's
// GetState reads it there), and a state an earlier task with the same UUID
// left is deleted.
func (b *Broker) PublishPending(ctx context.Context, p store.SendParams) error {
	if err := b.checkOpen(); err != nil {
		return store.NotSent(err)
	}
	return wrap(b.store.Publish(ctx, rdb.PublishParams{Tasks: p.Tasks, Pending: true, Fresh: p.Fresh}))
}

var _ store.EachSender = (*Broker)(nil)

// PublishPendingEach publishes each of sigs, PENDING, as PublishPending
// would publish it alone, many to an enqueue call, and returns each one's
// error; nil off a single server (see store.EachSender).
func (b *Broker) PublishPendingEach(ctx context.Context, sigs []*tasks.Signature) []error {
	if !b.store.OneNode() {
		return nil
	}
	errs := b.store.PublishEach(ctx, sigs)
	for i, err := range errs {
		if err != nil {
			errs[i] = wrap(err)
		}
	}
	return errs
}

// Fetch takes up to max pending tasks from queues, in order (in each
// queue, tasks rerouted to names first; a sharded queue's shards from one
// picked at random), waiting on the queues' wake-up lists while there are
// none.
func (b *Broker) Fetch(ctx context.Context, queues []string, max int, names *brokers.TaskNames) ([]*brokers.Delivery, error) {
	if len(queues) == 0 {
		return nil, brokers.ErrNoQueue
	}
	for _, q := range queues {
		if err := rdb.ValidQueue(q); err != nil {
			return nil, wrap(err)
		}
	}
	if max < 1 {
		max = 1
	}
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// A blocked Fetch wakes when the broker closes.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(b.ctx, cancel)
	defer stop()
	asked := queues
	woken := "" // the queue whose wake-up token the last wait took
	for {
		if err := b.checkOpen(); err != nil {
			b.store.Resignal(woken)
			return nil, err
		}
		// The shards of asked, read again on each round, so that a Fetch
		// that waits long takes from shards added meanwhile.
		queues, err := b.shardsOf(ctx, asked, true)
		if err != nil {
			b.store.Resignal(woken)
			return nil, b.fetchError(ctx, err)
		}
		b.maintain(queues)
		var out []*brokers.Delivery
		servedWoken := false // whether the queue whose token we took was tried
		var fetchErr error
		for _, q := range queues {
			ds, err := b.store.Dequeue(ctx, q, max-len(out), names)
			if err != nil {
				fetchErr = err
				break
			}
			servedWoken = servedWoken || q == woken
			out = append(out, ds...)
			if len(out) == max {
				break
			}
		}
		if woken != "" && !servedWoken {
			// The token was for a queue this fetch did not serve: pass it on
			// to another idle worker.
			b.store.Resignal(woken)
		}
		if fetchErr != nil && len(out) == 0 {
			return nil, b.fetchError(ctx, fetchErr)
		}
		if len(out) > 0 {
			return out, nil
		}
		if woken, err = b.store.Wait(ctx, queues, names); err != nil {
			return nil, b.fetchError(ctx, err)
		}
	}
}

// Announce records that a worker with names consumes queues (each shard
// of them), for ttl.
func (b *Broker) Announce(ctx context.Context, queues []string, names *brokers.TaskNames, ttl time.Duration) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	queues, err := b.shardsOf(ctx, queues, false)
	if err != nil {
		return wrap(err)
	}
	return wrap(b.store.Announce(ctx, queues, names, ttl))
}

// Reroute hands d's task to the workers that announced its name, or
// reports false when none alive has.
func (b *Broker) Reroute(ctx context.Context, d *brokers.Delivery) (bool, error) {
	if err := b.checkOpen(); err != nil {
		return false, err
	}
	ok, err := b.store.Reroute(ctx, d)
	return ok, wrap(err)
}

// fetchError says why a Fetch stopped: the broker closed, the caller's
// context ended, or err.
func (b *Broker) fetchError(ctx context.Context, err error) error {
	switch {
	case b.isClosed():
		return brokers.ErrClosed
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return wrap(err)
}

// ExtendLeases renews the leases of ds: one script per queue.
func (b *Broker) ExtendLeases(ctx context.Context, ds ...*brokers.Delivery) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.ExtendLeases(ctx, ds))
}

// Ack forgets a task that is done, or keeps it for CompletedRetention.
func (b *Broker) Ack(ctx context.Context, d *brokers.Delivery) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	_, err := b.store.Ack(ctx, d, nil)
	return wrap(err)
}

// AckTake acknowledges d's task and takes the next task of its queue in
// the same script (see brokers.Relay).
func (b *Broker) AckTake(ctx context.Context, d *brokers.Delivery, take brokers.Take) (*brokers.Delivery, error) {
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	next, err := b.store.Ack(ctx, d, &take)
	return next, wrap(err)
}

// AckSuccess writes the task's SUCCESS state, publishes next (PENDING as
// PublishPending makes them) and acknowledges the task in one script, only if the
// caller holds the lease, and with take takes the next task of its queue
// (see store.StateBroker).
func (b *Broker) AckSuccess(ctx context.Context, d *brokers.Delivery, success *tasks.TaskState, next []*tasks.Signature, take *brokers.Take) (*brokers.Delivery, error) {
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	taken, err := b.store.AckSuccess(ctx, d, success, next, take)
	return taken, wrap(err)
}

// Retry schedules the task to run again at at.
func (b *Broker) Retry(ctx context.Context, d *brokers.Delivery, at time.Time, errMsg string) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.Retry(ctx, d, at, errMsg))
}

// Archive keeps the task as a dead letter with reason.
func (b *Broker) Archive(ctx context.Context, d *brokers.Delivery, reason string) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.Archive(ctx, d, reason))
}

// Requeue puts unfinished tasks back at the head of their queues.
func (b *Broker) Requeue(ctx context.Context, ds ...*brokers.Delivery) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.Requeue(ctx, ds))
}

// ClaimLease takes key for lease unless another lease on it runs or it is
// done; see brokers.Claimer.
func (b *Broker) ClaimLease(ctx context.Context, key string, lease, keep time.Duration) (brokers.ClaimResult, error) {
	if err := b.checkOpen(); err != nil {
		return brokers.ClaimResult{}, err
	}
	res, err := b.store.ClaimLease(ctx, key, lease, keep)
	return res, wrap(err)
}

// RecordPeriodic records a periodic entry; see brokers.Claimer.
func (b *Broker) RecordPeriodic(ctx context.Context, e *brokers.PeriodicEntry) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.RecordPeriodic(ctx, e))
}

// RecordPeriodicTick records an entry's tick sent last; see
// brokers.Claimer.
func (b *Broker) RecordPeriodicTick(ctx context.Context, name, spec string, last brokers.PeriodicTick) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.RecordPeriodicTick(ctx, name, spec, last))
}

// PeriodicEntries lists the periodic entries recorded; see
// brokers.Claimer.
func (b *Broker) PeriodicEntries(ctx context.Context) ([]*brokers.PeriodicEntry, error) {
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	es, err := b.store.PeriodicEntries(ctx)
	return es, wrap(err)
}

// CompleteClaim marks key done for the holder of token; see brokers.Claimer.
func (b *Broker) CompleteClaim(ctx context.Context, key, token string) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.CompleteClaim(ctx, key, token))
}

// Holds reports which of sigs their queues hold; see brokers.Claimer.
func (b *Broker) Holds(ctx context.Context, sigs ...*tasks.Signature) ([]bool, error) {
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	held, err := b.store.Holds(ctx, sigs)
	return held, wrap(err)
}

// Close stops the background work, and closes the store when the broker
// owns it. Safe to call more than once.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	maintainers := b.maintainers
	b.mu.Unlock()
	b.unobserve()
	// Shutdown, in order: blocked Fetch calls wake (the context ends); each
	// maintainer stops and resigns; then the store closes, if it is ours.
	b.cancel()
	for _, m := range maintainers {
		m.Stop()
	}
	if b.ownsStore {
		return wrap(b.store.Close())
	}
	return nil
}

// Commit records the task's outcome, only if the caller holds the lease.
func (b *Broker) Commit(ctx context.Context, d *brokers.Delivery, outcome *tasks.TaskState) error {
	if err := b.checkOpen(); err != nil {
		return err
	}
	return wrap(b.store.Commit(ctx, d, outcome))
}

// WriteState writes a state of the task (and records it as its outcome with
// commit) in one script, only if the caller holds the lease.
func (b *Broker) WriteState(ctx context.Context, d *brokers.Delivery, state *tasks.TaskState, commit bool) (bool, error) {
	if err := b.checkOpen(); err != nil {
		return false, err
	}
	finished, err := b.store.WriteState(ctx, d, state, commit)
	if err != nil {
		return false, wrap(err)
	}
	return d.Signature.GroupUUID != "" && finished >= int64(d.Signature.GroupTaskCount), nil
}
