package memory

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/telemetry"
	memorybackend "github.com/b6192125/machinist/v1/backends/memory"
	"github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

var _ iface.Broker = (*Broker)(nil)

// Broker is the in-process broker. Create it with New; the zero value is not
// usable. Every method is safe for concurrent use.
type Broker struct {
	iface.Compat // machinery's methods

	leaseDuration   time.Duration
	recoverInterval time.Duration
	maxRecoveries   int
	archiveMaxSize  int
	archiveMaxAge   time.Duration
	maxMessageSize  int // Options.MaxMessageSize; 0 or less: none
	defaultQueue    string
	logger          *slog.Logger
	backend         *memorybackend.Backend // the paired backend, from NewPair

	clock     clock.Clock
	recoverer *service.Periodic // returns expired leases; Close stops it
	metrics   *telemetry.Metrics
	unobserve func() // stops the depth gauge's callback

	mu     sync.Mutex
	closed bool
	seq    uint64 // last number given by nextSeqLocked
	queues map[string]*queue
	held   map[string]*task     // pending, scheduled, retry and active tasks by UUID
	leases map[string]*task     // active tasks by lease token
	dead   map[string]*task     // archived tasks by UUID
	claims map[string]time.Time // claim keys (ClaimLease) and when they end
	// uniques holds the unique keys, by queue and key (uniqueKey).
	uniques map[string]uniqueHold
	// barred are the tasks of cancelled workflows kept out until their
	// bar ends (CancelTask with a bar), by UUID.
	barred map[string]barred
	// watchers are told the UUIDs of running tasks cancelled
	// (WatchCancels), by a number of their own.
	watchers map[int]func(uuid string)
	watchSeq int
	done     chan struct{} // closed by Close
	wake     chan struct{} // closed and replaced when a task may be fetchable
	// aggWake is closed (and forgotten) when an aggregation group may have
	// become due; WaitDue makes it.
	aggWake chan struct{}
	// workers are the worker processes alive, by ID, and stats each
	// queue's counts by period (monitor.go).
	workers map[string]*iface.WorkerInfo
	stats   map[string]map[int64]*iface.StatCount // by period start, unix s
}

// queue holds the tasks of one queue.
type queue struct {
	name      string
	paused    bool
	pending   deque
	scheduled map[string]*task
	retry     map[string]*task
	active    map[string]*task
	archived  []*task // oldest first
	// rerouted holds, by task name, the tasks rerouted to the workers
	// that have that name; handlers says until when a worker alive has
	// announced each name (route.go).
	rerouted map[string]*deque
	handlers map[string]time.Time
	// aggregations holds, by task name, the aggregation groups and
	// batches of the queue and who aggregates them (aggregate.go).
	aggregations map[string]*aggregation
	// limits holds the state of the queue's limit keys (limit.go).
	limits map[string]*limitState
}

// task is one task held by the broker, in exactly one place of its queue.
type task struct {
	uuid   string
	sig    *tasks.Signature // the broker's own copy; never handed out
	queue  string
	status iface.TaskStatus

	nextAt time.Time   // scheduled, retry: when it becomes pending
	timer  clock.Timer // scheduled, retry: moves it to pending at nextAt
	gen    uint64      // bumped on every schedule, so a stale timer does nothing
	seq    uint64      // publish order, to break ties between equal nextAt

	token          string    // active: the fencing token of its lease
	leaseExpiresAt time.Time // active: when the lease ends unless extended

	outcome *tasks.TaskState // what a holder committed (Commit), or nil

	lastError    string
	lastFailedAt time.Time
	archivedAt   time.Time
	retried      int
	recovered    int

	joined    time.Time // an aggregation member: when it first joined its group
	unique    string    // a unique task: its key in Broker.uniques
	limitSlot time.Time // a limited task deferred by its rate: the start it booked
	parkedAt  time.Time // a limited task parked on its key: when
}

// uniqueHold is who holds a unique key, and until when.
type uniqueHold struct {
	uuid  string
	until time.Time
}

// barred keeps a task of a cancelled workflow out of its queue until
// until (see CancelTask).
type barred struct {
	queue, reason string
	until         time.Time
}

// Options configures a Broker. Fields left zero take the defaults of the
// Config fields of the same names (see package config).
type Options struct {
	DefaultQueue    string
	LeaseDuration   time.Duration
	RecoverInterval time.Duration
	// MaxRecoveries: negative means never archive for lost leases; zero
	// takes the default, as in Config.
	MaxRecoveries  int
	ArchiveMaxSize int
	ArchiveMaxAge  time.Duration
	// ResultsExpireIn is the state TTL of the backend NewPair makes.
	ResultsExpireIn time.Duration
	// MaxMessageSize is the largest message (a signature as a Redis broker
	// would store it, encoded) a task published may have, in bytes, as on
	// Redis; zero takes the default, as in Config; negative: no limit.
	MaxMessageSize int
	// Logger receives the broker's logs. Default slog.Default().
	Logger *slog.Logger
	// Clock times leases, ETAs, retries and the recoverer. Default the
	// wall clock.
	Clock clock.Clock
	// MeterProvider receives the recoverer's metrics (tasks recovered and
	// archived after lease loss) and the depth of every queue
	// (machinist.queue.tasks). Default: the global one.
	MeterProvider metric.MeterProvider
}

// OptionsFrom returns the options cnf sets (with its defaults applied).
func OptionsFrom(cnf *config.Config) Options {
	cnf = cnf.WithDefaults()
	return Options{
		DefaultQueue:    cnf.DefaultQueue,
		LeaseDuration:   cnf.LeaseDuration,
		RecoverInterval: cnf.RecoverInterval,
		MaxRecoveries:   cnf.MaxRecoveries,
		ArchiveMaxSize:  cnf.ArchiveMaxSize,
		ArchiveMaxAge:   cnf.ArchiveMaxAge,
		ResultsExpireIn: time.Duration(cnf.ResultsExpireIn) * time.Second,
		MaxMessageSize:  cnf.MaxMessageSize,
		Logger:          cnf.Logger,
		MeterProvider:   cnf.MeterProvider,
	}
}

// New returns a broker configured by opts. It starts the recoverer
// goroutine; Close stops it.
func New(opts Options) *Broker {
	d := OptionsFrom(nil)
	opts.DefaultQueue = cmp.Or(opts.DefaultQueue, d.DefaultQueue)
	opts.LeaseDuration = cmp.Or(opts.LeaseDuration, d.LeaseDuration)
	opts.RecoverInterval = cmp.Or(opts.RecoverInterval, d.RecoverInterval)
	opts.MaxRecoveries = cmp.Or(opts.MaxRecoveries, d.MaxRecoveries)
	opts.ArchiveMaxSize = cmp.Or(opts.ArchiveMaxSize, d.ArchiveMaxSize)
	opts.ArchiveMaxAge = cmp.Or(opts.ArchiveMaxAge, d.ArchiveMaxAge)
	opts.ResultsExpireIn = cmp.Or(opts.ResultsExpireIn, d.ResultsExpireIn)
	opts.MaxMessageSize = cmp.Or(opts.MaxMessageSize, d.MaxMessageSize)
	logger := cmp.Or(opts.Logger, slog.Default())
	clk := opts.Clock
	if clk == nil {
		clk = clock.Real()
	}
	b := &Broker{
		leaseDuration:   opts.LeaseDuration,
		recoverInterval: opts.RecoverInterval,
		maxRecoveries:   opts.MaxRecoveries,
		archiveMaxSize:  opts.ArchiveMaxSize,
		archiveMaxAge:   opts.ArchiveMaxAge,
		maxMessageSize:  opts.MaxMessageSize,
		defaultQueue:    opts.DefaultQueue,
		logger:          logger,
		clock:           clk,
		queues:          make(map[string]*queue),
		held:            make(map[string]*task),
		leases:          make(map[string]*task),
		dead:            make(map[string]*task),
		claims:          make(map[string]time.Time),
		uniques:         make(map[string]uniqueHold),
		barred:          make(map[string]barred),
		wake:            make(chan struct{}),
		done:            make(chan struct{}),
	}
	b.metrics = telemetry.NewMetrics(opts.MeterProvider)
	if unobserve, err := b.metrics.ObserveDepths(b.observeDepths); err == nil {
		b.unobserve = unobserve
	} else {
		logger.Warn("memory broker: the queue depth metric is not reported", slog.Any("error", err))
		b.unobserve = func() {}
	}
	b.recoverer = service.NewPeriodic(service.PeriodicParams{
		Name:     "memory broker recoverer",
		Interval: opts.RecoverInterval,
		RunFunc: func(context.Context) error {
			b.recoverExpired(b.clock.Now())
			return nil
		},
		Clock:  clk,
		Logger: logger,
	})
	// The recoverer runs until Close, not for a caller's request.
	if err := b.recoverer.Start(context.Background()); err != nil {
		logger.Error("memory broker: starting the recoverer failed", slog.Any("error", err))
	}
	return b
}

// errClosed is returned, wrapped, by every method of a closed broker.
func errClosed(op string) error {
	return fmt.Errorf("memory broker: %s: %w", op, iface.ErrClosed)
}

// Publish adds sigs to the queues named by their RoutingKey. It checks every
// signature before it adds any, so on error nothing was published. A
// signature needs a UUID and a RoutingKey; a UUID the broker still holds
// in any queue (stricter than the per-queue uniqueness the interface
// requires) fails with ErrDuplicateTask, and an archived task with the same
// UUID is deleted from the archive. A member (a signature with an
// AggregationKey) of a name no worker alive aggregates on its queue fails
// with ErrNoAggregator; the others join their groups (aggregate.go), when
// their ETA comes if they have one. A task whose message (encoded as the
// Redis broker stores it) is larger than Options.MaxMessageSize fails with
// a *iface.MessageTooLargeError. The broker stores deep copies.
func (b *Broker) Publish(ctx context.Context, sigs ...*tasks.Signature) error {
	// All or nothing, in the process: an error says nothing was sent.
	if err := ctx.Err(); err != nil {
		return iface.NotSent(err)
	}
	if err := b.checkSizes("publish", sigs); err != nil {
		return err
	}
	return b.publishSized(sigs)
}

// publishSized is Publish of sigs whose sizes were checked.
func (b *Broker) publishSized(sigs []*tasks.Signature) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return iface.NotSent(errClosed("publish"))
	}
	if len(sigs) == 1 && sigs[0] != nil && sigs[0].UniqueReplace && b.replaceLocked(sigs[0], b.clock.Now()) {
		return nil
	}
	if err := b.checkPublishLocked(sigs, b.clock.Now()); err != nil {
		return iface.NotSent(err)
	}
	b.publishLocked(sigs)
	return nil
}

// replaceLocked debounces sig (UniqueReplace): when the holder of its
// unique key waits (pending, not rerouted, or scheduled), the holder takes
// sig's signature (all but its UUID), the key its UniqueFor again, and sig the
// holder's UUID; it reports whether it did.
func (b *Broker) replaceLocked(sig *tasks.Signature, now time.Time) bool {
	if sig.UniqueFor <= 0 || sig.RoutingKey == "" {
		return false
	}
	k := uniqueKey(sig)
	h, ok := b.uniques[k]
	if !ok || !now.Before(h.until) || h.uuid == sig.UUID {
		return false
	}
	t := b.held[h.uuid]
	if t == nil || t.outcome != nil || t.queue != sig.RoutingKey {
		return false
	}
	q := b.queues[t.queue]
	later := sig.ETA != nil && sig.ETA.After(now)
	switch t.status {
	case iface.StatusPending:
		if !later {
			// It keeps its place; a rerouted one is refused.
			if q.pending.index(t) < 0 {
				return false
			}
			break
		}
		if !q.pending.remove(t) {
			return false // rerouted: it stays as it is
		}
	case iface.StatusScheduled:
		q.unscheduleLocked(t)
	default:
		return false
	}
	replacement := tasks.CopySignature(sig)
	replacement.UUID = t.uuid
	t.sig = replacement
	b.uniques[k] = uniqueHold{uuid: t.uuid, until: now.Add(sig.UniqueFor)}
	switch {
	case later:
		b.scheduleLocked(q, t, iface.StatusScheduled, *sig.ETA)
	case t.status == iface.StatusScheduled:
		t.status = iface.StatusPending
		q.pending.pushBack(t)
		b.notifyLocked()
	}
	sig.UUID = t.uuid
	return true
}

// checkSizes refuses sigs when one's message is larger than
// Options.MaxMessageSize. The memory broker keeps signatures, not
// messages: it encodes each one as a Redis broker would, so that a task
// refused there is refused here too.
func (b *Broker) checkSizes(op string, sigs []*tasks.Signature) error {
	if b.maxMessageSize <= 0 {
		return nil
	}
	for _, sig := range sigs {
		if sig == nil {
			continue // checkPublish says why
		}
		c := *sig
		c.UUID, c.RoutingKey = "", "" // as the Redis broker stores it
		msg, err := tasks.EncodeSignature(&c)
		if err != nil {
			return fmt.Errorf("memory broker: %s task %s (%s): %w", op, sig.UUID, sig.Name, err)
		}
		if err := iface.CheckMessageSize(sig, msg, b.maxMessageSize); err != nil {
			return fmt.Errorf("memory broker: %s: %w", op, err)
		}
	}
	return nil
}

// checkPublishLocked reports why sigs cannot all be published at now, or
// nil.
func (b *Broker) checkPublishLocked(sigs []*tasks.Signature, now time.Time) error {
	seen := make(map[string]bool, len(sigs))
	var keys map[string]string // unique keys taken by sigs, to their task
	for i, sig := range sigs {
		if err := checkPublish(i, sig); err != nil {
			return err
		}
		if reason, ok := b.barredLocked(sig, now); ok {
			return fmt.Errorf("memory broker: publish: %w", &iface.CancelledError{Task: sig.UUID, Reason: reason})
		}
		if b.held[sig.UUID] != nil || seen[sig.UUID] {
			return fmt.Errorf("memory broker: publish: task %s: %w", sig.UUID, iface.ErrDuplicateTask)
		}
		seen[sig.UUID] = true
		if sig.AggregationKey != "" && !b.aggregatedLocked(sig, now) {
			return fmt.Errorf("memory broker: publish: task %s (%q, key %q) on queue %s: %w",
				sig.UUID, sig.Name, sig.AggregationKey, sig.RoutingKey, iface.ErrNoAggregator)
		}
		if sig.UniqueFor > 0 {
			k := uniqueKey(sig)
			holder := keys[k]
			if h, ok := b.uniques[k]; holder == "" && ok && now.Before(h.until) {
				holder = h.uuid
			}
			if holder != "" && holder != sig.UUID {
				return fmt.Errorf("memory broker: publish: %w", &tasks.NotUniqueError{
					Queue: sig.RoutingKey, Key: tasks.UniqueKeyOf(sig), Task: sig.UUID, Holder: holder})
			}
			if keys == nil {
				keys = make(map[string]string)
			}
			keys[k] = sig.UUID
		}
	}
	return nil
}

// barredLocked reports whether sig is kept out of its queue at now (see
// CancelTask), with the cancellation's reason.
func (b *Broker) barredLocked(sig *tasks.Signature, now time.Time) (string, bool) {
	bar, ok := b.barred[sig.UUID]
	if !ok || bar.queue != sig.RoutingKey {
		return "", false
	}
	if !now.Before(bar.until) {
		delete(b.barred, sig.UUID)
		return "", false
	}
	return bar.reason, true
}

// checkPublish reports why sig, the i-th signature published, cannot be.
func checkPublish(i int, sig *tasks.Signature) error {
	switch {
	case sig == nil:
		return fmt.Errorf("memory broker: publish: task %d: %w", i, tasks.ErrNilSignature)
	case sig.UUID == "":
		return fmt.Errorf("memory broker: publish: task %d (%q) has no UUID", i, sig.Name)
	case sig.RoutingKey == "":
		return fmt.Errorf("memory broker: publish: task %s has no RoutingKey: %w", sig.UUID, iface.ErrNoQueue)
	case sig.Limit != nil:
		if err := sig.Limit.Validate(); err != nil {
			return fmt.Errorf("memory broker: publish: task %s: %w", sig.UUID, err)
		}
	}
	return nil
}

// publishLocked adds sigs, checked and not held, to their queues.
func (b *Broker) publishLocked(sigs []*tasks.Signature) {
	now := b.clock.Now()
	woken := false
	for _, sig := range sigs {
		if old := b.dead[sig.UUID]; old != nil {
			b.removeArchivedLocked(old)
		}
		q := b.queueLocked(sig.RoutingKey)
		t := &task{uuid: sig.UUID, sig: tasks.CopySignature(sig), queue: q.name, seq: b.nextSeqLocked()}
		b.held[t.uuid] = t
		if sig.UniqueFor > 0 {
			t.unique = uniqueKey(sig)
			b.uniques[t.unique] = uniqueHold{uuid: t.uuid, until: now.Add(sig.UniqueFor)}
		}
		if sig.ETA != nil && sig.ETA.After(now) {
			b.scheduleLocked(q, t, iface.StatusScheduled, *sig.ETA)
			continue
		}
		if sig.AggregationKey != "" {
			b.joinLocked(q, t, now)
			continue
		}
		t.status = iface.StatusPending
		q.pending.pushBack(t)
		woken = true
	}
	if woken {
		b.notifyLocked()
	}
}

// Fetch takes up to max pending tasks (at least one) from queues, in the
// order given, skipping paused queues, each under a fresh lease. When none
// is pending it waits, without polling, until one is, ctx ends (its error is
// returned and nothing is taken) or the broker is closed (ErrClosed).
func (b *Broker) Fetch(ctx context.Context, queues []string, max int, names *iface.TaskNames) ([]*iface.Delivery, error) {
	if len(queues) == 0 {
		return nil, fmt.Errorf("memory broker: fetch: %w", iface.ErrNoQueue)
	}
	if slices.Contains(queues, "") {
		return nil, fmt.Errorf("memory broker: fetch: empty queue name: %w", iface.ErrNoQueue)
	}
	if max < 1 {
		max = 1
	}
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, errClosed("fetch")
		}
		if err := ctx.Err(); err != nil {
			b.mu.Unlock()
			return nil, err
		}
		if ds := b.takeLocked(queues, max, names); len(ds) > 0 {
			b.mu.Unlock()
			return ds, nil
		}
		wake := b.wake
		b.mu.Unlock()

		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		}
	}
}

// takeLocked moves up to max pending tasks of queues to active: in each
// queue, those rerouted to names first.
func (b *Broker) takeLocked(queues []string, max int, names *iface.TaskNames) []*iface.Delivery {
	var out []*iface.Delivery
	now := b.clock.Now()
	for _, name := range queues {
		q := b.queues[name]
		if q == nil || q.paused {
			continue
		}
		take := func(t *task) bool {
			if !b.admitLocked(q, t, now) {
				return false
			}
			t.status = iface.StatusActive
			t.token = rand.Text()
			t.leaseExpiresAt = now.Add(b.leaseDuration)
			q.active[t.uuid] = t
			b.leases[t.token] = t
			out = append(out, &iface.Delivery{
				Signature: tasks.CopySignature(t.sig),
				Queue:     q.name,
				Lease:     iface.NewLeaseOn(b.clock, t.token, t.leaseExpiresAt),
				Retried:   t.retried,
				Recovered: t.recovered,
				Outcome:   copyState(t.outcome),
			})
			return true
		}
		b.takeReroutedLocked(q, names, max-len(out), take)
		for len(out) < max && q.pending.len() > 0 {
			take(q.pending.popFront())
		}
		if len(out) == max {
			break
		}
	}
	return out
}

// ExtendLeases renews, for LeaseDuration from now, the lease of every
// delivery whose task is still active under that delivery's token, and marks
// the others' leases lost. A delivery whose Lease was already lost locally is
// not renewed in the broker either: its worker has given the task up.
func (b *Broker) ExtendLeases(ctx context.Context, deliveries ...*iface.Delivery) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed("extend leases")
	}
	expiresAt := b.clock.Now().Add(b.leaseDuration)
	for _, d := range deliveries {
		if d == nil || d.Lease == nil {
			continue
		}
		t := b.heldLocked(d)
		if t == nil {
			d.Lease.Lose()
			continue
		}
		if d.Lease.Extend(expiresAt) {
			t.leaseExpiresAt = expiresAt
		}
	}
	return nil
}

// holdsLocked returns nil when d holds the lease of an active task, and
// otherwise an error wrapping ErrLeaseLost after marking d's lease lost.
func (b *Broker) holdsLocked(op string, d *iface.Delivery) error {
	if b.closed {
		return errClosed(op)
	}
	if d == nil || d.Lease == nil {
		return fmt.Errorf("memory broker: %s: delivery without a lease", op)
	}
	if b.heldLocked(d) == nil {
		d.Lease.Lose()
		return fmt.Errorf("memory broker: %s task %s: %w", op, d.Signature.UUID, iface.ErrLeaseLost)
	}
	return nil
}

// heldLocked returns the active task whose lease d holds: d's token, and
// the lease not expired (even if the recoverer has not taken it back yet).
func (b *Broker) heldLocked(d *iface.Delivery) *task {
	t := b.leases[d.Lease.Token()]
	if t == nil || !b.clock.Now().Before(t.leaseExpiresAt) {
		return nil
	}
	return t
}

// Commit records outcome in d's task, only while d holds its lease. The
// task has finished: it frees its unique key now, before its state shows.
func (b *Broker) Commit(ctx context.Context, d *iface.Delivery, outcome *tasks.TaskState) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.holdsLocked("commit", d); err != nil {
		return err
	}
	t := b.heldLocked(d)
	t.outcome = copyState(outcome)
	b.releaseUniqueLocked(t)
	return nil
}

// copyState returns a copy of s (its results shared: they are not changed),
// or nil.
func copyState(s *tasks.TaskState) *tasks.TaskState {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

// settleLocked returns the active task that d holds the lease of, or an
// error wrapping ErrLeaseLost after marking d's lease lost.
func (b *Broker) settleLocked(op string, d *iface.Delivery) (*task, error) {
	if b.closed {
		return nil, errClosed(op)
	}
	if d == nil || d.Lease == nil {
		return nil, fmt.Errorf("memory broker: %s: delivery without a lease", op)
	}
	t := b.heldLocked(d)
	if t == nil {
		d.Lease.Lose()
		uuid := ""
		if d.Signature != nil {
			uuid = d.Signature.UUID
		}
		return nil, fmt.Errorf("memory broker: %s task %s: %w", op, uuid, iface.ErrLeaseLost)
	}
	b.unleaseLocked(b.queues[t.queue], t)
	return t, nil
}

// Ack forgets the task of d.
func (b *Broker) Ack(ctx context.Context, d *iface.Delivery) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ackLocked(d)
}

// AckTake forgets the task of d and takes the next task of its queue for
// the caller, under the broker's lock (see iface.Relay).
func (b *Broker) AckTake(ctx context.Context, d *iface.Delivery, take iface.Take) (*iface.Delivery, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.ackLocked(d); err != nil {
		return nil, err
	}
	return b.takeNextLocked(d.Queue, &take), nil
}

func (b *Broker) ackLocked(d *iface.Delivery) error {
	t, err := b.settleLocked("ack", d)
	if err != nil {
		return err
	}
	b.finishLocked(t)
	d.Lease.Release()
	return nil
}

// takeNextLocked takes, with take, the next task of queue for the caller
// of a settle, as a fetch of that queue for one task; it returns nil
// without take or when none is pending.
func (b *Broker) takeNextLocked(queue string, take *iface.Take) *iface.Delivery {
	if take == nil {
		return nil
	}
	ds := b.takeLocked([]string{queue}, 1, take.Names)
	if len(ds) == 0 {
		return nil
	}
	return ds[0]
}

// finishLocked forgets t, which finished: it is no longer held, and frees
// its unique key if it still holds it.
func (b *Broker) finishLocked(t *task) {
	delete(b.held, t.uuid)
	b.releaseUniqueLocked(t)
}

// releaseUniqueLocked frees t's unique key if t still holds it.
func (b *Broker) releaseUniqueLocked(t *task) {
	if h, ok := b.uniques[t.unique]; ok && h.uuid == t.uuid {
		delete(b.uniques, t.unique)
	}
}

// uniqueKey is the key of sig's unique key in Broker.uniques: its queue
// and tasks.UniqueKeyOf.
func uniqueKey(sig *tasks.Signature) string {
	return sig.RoutingKey + "\x00" + tasks.UniqueKeyOf(sig)
}

// Retry stores a copy of d.Signature as the task's signature, records errMsg
// and counts a retry, and schedules the task to become pending at at (at
// once when at is not in the future); a member of an aggregation group
// joins its group instead.
func (b *Broker) Retry(ctx context.Context, d *iface.Delivery, at time.Time, errMsg string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.settleLocked("retry", d)
	if err != nil {
		return err
	}
	now := b.clock.Now()
	if d.Signature != nil {
		t.sig = tasks.CopySignature(d.Signature)
	}
	t.lastError, t.lastFailedAt = errMsg, now
	t.retried++
	t.outcome = nil
	q := b.queues[t.queue]
	switch {
	case at.After(now):
		b.scheduleLocked(q, t, iface.StatusRetry, at)
	case t.sig.AggregationKey != "":
		b.joinLocked(q, t, now) // a stranded member (aggregate.go)
	default:
		t.status = iface.StatusPending
		q.pending.pushBack(t)
		b.notifyLocked()
	}
	d.Lease.Release()
	return nil
}

// Archive moves the task of d to its queue's archive with reason.
func (b *Broker) Archive(ctx context.Context, d *iface.Delivery, reason string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, err := b.settleLocked("archive", d)
	if err != nil {
		return err
	}
	b.archiveLocked(t, reason, b.clock.Now())
	d.Lease.Release()
	return nil
}

// Requeue puts the tasks of ds back at the head of their pending lists, in
// the order given (ds[0] runs first), counting nothing against them. Tasks
// whose lease is lost are skipped and reported in the error, which wraps
// ErrLeaseLost; the others are requeued.
func (b *Broker) Requeue(ctx context.Context, ds ...*iface.Delivery) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	requeued := false
	for i := len(ds) - 1; i >= 0; i-- {
		t, err := b.settleLocked("requeue", ds[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t.status = iface.StatusPending
		b.queues[t.queue].pending.pushFront(t)
		ds[i].Lease.Release()
		requeued = true
	}
	if requeued {
		b.notifyLocked()
	}
	slices.Reverse(errs)
	return errors.Join(errs...)
}

// ClaimLease takes key for lease unless another lease on it runs or it is
// done; see iface.Claimer.
//
// Its claims live in b.claims under keys of their own, each
// entry holding until its time passes (the recoverer drops it then):
// claimRecord(key) until the key's record ends, claimLease(key) until the
// lease ends, and claimDone(key) from CompleteClaim until the record ends.
// A lease's token is its end: a lease that takes over ends later than the
// one it replaces, so an earlier holder's token no longer matches.
func (b *Broker) ClaimLease(ctx context.Context, key string, lease, keep time.Duration) (iface.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return iface.ClaimResult{}, err
	}
	if lease <= 0 {
		return iface.ClaimResult{}, fmt.Errorf("memory broker: claim %s: lease %v is not positive", key, lease)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return iface.ClaimResult{}, errClosed("claim")
	}
	now := b.clock.Now()
	if b.claimLiveLocked(claimDone(key), now) {
		return iface.ClaimResult{Status: iface.ClaimDone}, nil
	}
	if end := b.claims[claimLease(key)]; now.Before(end) {
		return iface.ClaimResult{Status: iface.ClaimHeld, Remaining: end.Sub(now)}, nil
	}
	takenOver := b.claimLiveLocked(claimRecord(key), now)
	end := now.Add(lease)
	b.claims[claimLease(key)] = end
	b.claims[claimRecord(key)] = now.Add(max(keep, lease))
	return iface.ClaimResult{Status: iface.ClaimWon, Token: claimToken(end), TakenOver: takenOver}, nil
}

// CompleteClaim marks key done for the holder of token; see iface.Claimer.
func (b *Broker) CompleteClaim(ctx context.Context, key, token string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errClosed("complete claim")
	}
	now := b.clock.Now()
	if b.claimLiveLocked(claimDone(key), now) {
		return nil
	}
	end, leased := b.claims[claimLease(key)]
	if !leased || claimToken(end) != token || !b.claimLiveLocked(claimRecord(key), now) {
		return fmt.Errorf("memory broker: complete claim %s: %w", key, iface.ErrLeaseLost)
	}
	delete(b.claims, claimLease(key))
	b.claims[claimDone(key)] = b.claims[claimRecord(key)]
	return nil
}

// claimLiveLocked reports whether the entry k of b.claims holds at now.
func (b *Broker) claimLiveLocked(k string, now time.Time) bool {
	until, ok := b.claims[k]
	return ok && now.Before(until)
}

// The keys of b.claims that hold a ClaimLease key's record, lease and
// completion (see ClaimLease), apart from Claim's keys.
func claimRecord(key string) string { return "\x00record\x00" + key }
func claimLease(key string) string  { return "\x00lease\x00" + key }
func claimDone(key string) string   { return "\x00done\x00" + key }

// claimToken names the lease that ends at end.
func claimToken(end time.Time) string { return fmt.Sprintf("%x", end.UnixNano()) }

// Holds reports which of sigs the broker holds (any queue: the memory
// broker refuses a UUID it holds in any queue); see iface.Claimer.
func (b *Broker) Holds(ctx context.Context, sigs ...*tasks.Signature) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errClosed("holds")
	}
	out := make([]bool, len(sigs))
	for i, sig := range sigs {
		switch {
		case sig == nil:
			return nil, fmt.Errorf("memory broker: holds: task %d: %w", i, tasks.ErrNilSignature)
		case sig.RoutingKey == "":
			return nil, fmt.Errorf("memory broker: holds: task %s has no RoutingKey: %w", sig.UUID, iface.ErrNoQueue)
		}
		out[i] = b.held[sig.UUID] != nil
	}
	return out, nil
}

// Close stops the timers of scheduled and retrying tasks and the recoverer,
// and makes blocked and later calls fail with ErrClosed. Tasks stay where
// they are. Safe to call more than once.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for _, q := range b.queues {
		for _, t := range q.scheduled {
			t.timer.Stop()
		}
		for _, t := range q.retry {
			t.timer.Stop()
		}
	}
	close(b.wake) // blocked Fetch calls wake up and see closed
	close(b.done)
	b.wakeAggregatorsLocked()
	b.mu.Unlock()

	b.recoverer.Stop()
	b.unobserve()
	return nil
}

// observeDepths returns the sizes of every queue, for the depth gauge.
func (b *Broker) observeDepths(ctx context.Context) []telemetry.Depth {
	b.mu.Lock()
	names := slices.Sorted(maps.Keys(b.queues))
	b.mu.Unlock()
	var out []telemetry.Depth
	for _, name := range names {
		if info, err := b.QueueInfo(ctx, name); err == nil {
			out = append(out, telemetry.Depths(info)...)
		}
	}
	return out
}

// queueLocked returns the queue called name, creating it.
func (b *Broker) queueLocked(name string) *queue {
	q := b.queues[name]
	if q == nil {
		q = &queue{
			name:      name,
			scheduled: make(map[string]*task),
			retry:     make(map[string]*task),
			active:    make(map[string]*task),
		}
		b.queues[name] = q
	}
	return q
}

// nextSeqLocked returns a number larger than every one it returned before.
func (b *Broker) nextSeqLocked() uint64 {
	b.seq++
	return b.seq
}

// notifyLocked wakes every blocked Fetch: a task may have become pending.
func (b *Broker) notifyLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// scheduleLocked puts t in q's scheduled or retry set (status says which)
// and arms the timer that makes it pending at at.
func (b *Broker) scheduleLocked(q *queue, t *task, status iface.TaskStatus, at time.Time) {
	t.status, t.nextAt = status, at
	if status == iface.StatusScheduled {
		q.scheduled[t.uuid] = t
	} else {
		q.retry[t.uuid] = t
	}
	t.gen++
	gen := t.gen
	t.timer = b.clock.AfterFunc(b.clock.Until(at), func() { b.due(t, gen) })
}

// unscheduleLocked takes t, scheduled or waiting for its retry, out of q's
// zsets and stops its timer (one already firing finds it rescheduled).
func (q *queue) unscheduleLocked(t *task) {
	delete(q.scheduled, t.uuid)
	delete(q.retry, t.uuid)
	if t.timer != nil {
		t.timer.Stop()
	}
	t.gen++
	t.timer, t.nextAt = nil, time.Time{}
}

// due runs on t's timer: it makes t pending (a member joins its group
// instead), unless it was rescheduled, the broker was closed, or the timer
// fired early by the wall clock, in which case it re-arms the timer for the
// rest.
func (b *Broker) due(t *task, gen uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || t.gen != gen || (t.status != iface.StatusScheduled && t.status != iface.StatusRetry) {
		return
	}
	if wait := b.clock.Until(t.nextAt); wait > 0 {
		t.timer.Reset(wait)
		return
	}
	q := b.queues[t.queue]
	delete(q.scheduled, t.uuid)
	delete(q.retry, t.uuid)
	if t.sig.AggregationKey != "" {
		b.joinLocked(q, t, b.clock.Now())
		return
	}
	t.status, t.nextAt, t.timer = iface.StatusPending, time.Time{}, nil
	q.pending.pushBack(t)
	b.notifyLocked()
}

// archiveLocked moves t, which the caller has taken out of its place, to its
// queue's archive, and trims the archive.
func (b *Broker) archiveLocked(t *task, reason string, now time.Time) {
	b.finishLocked(t)
	t.outcome = nil
	t.status = iface.StatusArchived
	t.lastError, t.lastFailedAt, t.archivedAt = reason, now, now
	q := b.queues[t.queue]
	q.archived = append(q.archived, t)
	b.dead[t.uuid] = t
	b.trimArchiveLocked(q, now)
}

// trimArchiveLocked deletes q's dead letters beyond ArchiveMaxSize and older
// than ArchiveMaxAge, oldest first.
func (b *Broker) trimArchiveLocked(q *queue, now time.Time) {
	drop := 0
	if over := len(q.archived) - b.archiveMaxSize; over > 0 {
		drop = over
	}
	for drop < len(q.archived) && now.Sub(q.archived[drop].archivedAt) > b.archiveMaxAge {
		drop++
	}
	if drop == 0 {
		return
	}
	for _, t := range q.archived[:drop] {
		delete(b.dead, t.uuid)
	}
	q.archived = slices.Delete(q.archived, 0, drop)
}

// removeArchivedLocked deletes t from its queue's archive.
func (b *Broker) removeArchivedLocked(t *task) {
	q := b.queues[t.queue]
	if i := slices.Index(q.archived, t); i >= 0 {
		q.archived = slices.Delete(q.archived, i, i+1)
	}
	delete(b.dead, t.uuid)
}
