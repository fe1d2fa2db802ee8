package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/b6192125/machinist/internal/waitfor"
	backends "github.com/b6192125/machinist/v1/backends/iface"
	redisbackend "github.com/b6192125/machinist/v1/backends/redis"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	redisbroker "github.com/b6192125/machinist/v1/brokers/redis"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/internal/dial"
	"github.com/b6192125/machinist/v1/tasks"
)

// This file holds what the tests of worker_test.go are built from: a
// harness around the real memory broker and backend, and small wrappers
// that embed the Broker or Backend seam to count calls or inject behaviour.

// testQueue is the queue every test publishes to and works on; each test has
// a broker of its own.
const testQueue = "worker_test"

// waitTimeout bounds every wait of the tests. Nothing waited for takes more
// than a few seconds when the engine works.
const waitTimeout = 10 * time.Second

var discardLogger = slog.New(slog.DiscardHandler)

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.True(t, waitTimeout, what, cond)
}

// recv receives from ch, failing the test after waitTimeout.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return waitfor.Recv(t, waitTimeout, what, ch)
}

// send sends v on ch, failing the test after waitTimeout.
func send[T any](t *testing.T, ch chan<- T, v T, what string) {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case ch <- v:
	case <-timer.C:
		t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
	}
}

// waitTasksDone waits until every task goroutine of w has returned, which
// is when their outcome has been written or dropped. Run does not wait for
// the goroutines of tasks it abandoned.
func waitTasksDone(t *testing.T, w *Worker) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	recv(t, done, "the worker's task goroutines to return")
}

// harness is one test's broker, backend, registry and recorders.
type harness struct {
	t       *testing.T
	cnf     *config.Config
	mem     *redisbroker.Broker
	backend *redisbackend.Backend
	spy     *spyBroker
	reg     registry
	sent    *sendRecorder
	errs    *errRecorder
}

// newEngineBroker returns a broker on a store of its own, on an in-process
// engine of its own (memory://), configured by cnf.
func newEngineBroker(t *testing.T, cnf *config.Config) *redisbroker.Broker {
	t.Helper()
	b, err := redisbroker.Dial("memory://", cnf)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newEngineBackend returns a backend as newEngineBroker returns a broker:
// on an engine of its own, so that the worker writes its states itself.
func newEngineBackend(t *testing.T, cnf *config.Config) *redisbackend.Backend {
	t.Helper()
	b, err := redisbackend.Dial("memory://", cnf)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newEnginePair returns a broker and a backend on one store, on an
// in-process engine of its own: the broker writes the backend's states
// (store.Joiner), as on one Redis.
func newEnginePair(t *testing.T, cnf *config.Config) (*redisbroker.Broker, *redisbackend.Backend) {
	t.Helper()
	store, err := dial.Store("memory://", cnf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return redisbroker.NewOnStore(store, redisbroker.OptionsFrom(cnf)), redisbackend.NewOnStore(store, redisbackend.Options{})
}

// newHarness builds a harness on a broker and a backend, each on an
// in-process engine of its own, configured by cnf (passed through
// WithDefaults), closed when the test ends.
func newHarness(t *testing.T, cnf *config.Config) *harness {
	t.Helper()
	cnf.Logger = discardLogger
	cnf = cnf.WithDefaults()
	mem := newEngineBroker(t, cnf)
	be := newEngineBackend(t, cnf)
	t.Cleanup(func() {
		_ = mem.Close()
		_ = be.Close()
	})
	return &harness{
		t:       t,
		cnf:     cnf,
		mem:     mem,
		backend: be,
		spy:     newSpyBroker(mem),
		reg:     registry{},
		sent:    &sendRecorder{},
		errs:    &errRecorder{},
	}
}

// params returns the Params of a worker on the harness: the spy broker over
// the memory broker, one slot, the test queue.
func (h *harness) params() Params {
	return Params{
		Broker:           h.spy,
		Backend:          h.backend,
		Config:           h.cnf,
		Logger:           discardLogger,
		Tasks:            h.reg,
		SendFunc:         h.sent.send,
		ConsumerTag:      h.t.Name(),
		Concurrency:      1,
		Queues:           []string{testQueue},
		ErrorHandlerFunc: h.errs.handle,
	}
}

// newSig returns a signature of the task name with a fresh UUID, on the
// test queue.
func newSig(name string, args ...tasks.Arg) *tasks.Signature {
	return &tasks.Signature{UUID: "task_" + uuid.NewString(), Name: name, RoutingKey: testQueue, Args: args}
}

// publish writes the PENDING state of sigs and publishes them, as
// Server.SendTask does.
func (h *harness) publish(sigs ...*tasks.Signature) {
	h.t.Helper()
	ctx := context.Background()
	if err := h.backend.SetStatePendingContext(ctx, sigs...); err != nil {
		h.t.Fatal(err)
	}
	if err := h.mem.PublishTasks(ctx, sigs...); err != nil {
		h.t.Fatal(err)
	}
}

// state returns the state of the task, or "" when it has none.
func (h *harness) state(taskUUID string) string {
	st := h.stateOf(taskUUID)
	if st == nil {
		return ""
	}
	return st.State
}

func (h *harness) stateOf(taskUUID string) *tasks.TaskState {
	h.t.Helper()
	st, err := h.backend.GetStateContext(context.Background(), taskUUID)
	if errors.Is(err, backends.ErrStateNotFound) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// pending returns the UUIDs of the test queue's pending tasks.
func (h *harness) pending() []string {
	h.t.Helper()
	sigs, err := h.mem.GetPendingTasks(testQueue)
	if err != nil {
		h.t.Fatal(err)
	}
	ids := make([]string, len(sigs))
	for i, s := range sigs {
		ids[i] = s.UUID
	}
	return ids
}

// runningWorker is a Worker whose Run is in progress in a goroutine.
type runningWorker struct {
	w      *Worker
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's, once done is closed
}

// start runs a worker with p until the test stops it; when the test ends it
// is aborted and waited for.
func (h *harness) start(p Params) *runningWorker {
	w := New(p)
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningWorker{w: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = w.Run(ctx)
		close(r.done)
	}()
	t := h.t
	t.Cleanup(func() {
		w.Abort()
		cancel()
		timer := time.NewTimer(waitTimeout)
		defer timer.Stop()
		select {
		case <-r.done:
		case <-timer.C:
			t.Errorf("Run did not return within %s of Abort", waitTimeout)
			return
		}
		waitTasksDone(t, w)
	})
	return r
}

// stop stops the worker gracefully (cancels Run's context) and returns
// Run's error.
func (r *runningWorker) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t)
}

// wait waits for Run to return and returns its error.
func (r *runningWorker) wait(t *testing.T) error {
	t.Helper()
	recv(t, r.done, "Run to return")
	return r.err
}

// registry is a Registry of task functions, filled in before the worker
// starts.
type registry map[string]interface{}

func (r registry) GetRegisteredTask(name string) (interface{}, error) {
	fn, ok := r[name]
	if !ok {
		return nil, fmt.Errorf("task %q not registered", name)
	}
	return fn, nil
}

func (r registry) GetRegisteredTaskNames() []string {
	return slices.Sorted(maps.Keys(r))
}

// sendRecorder is a SendFunc that records copies of what it is given.
type sendRecorder struct {
	mu   sync.Mutex
	sigs []*tasks.Signature
}

func (s *sendRecorder) send(_ context.Context, sig *tasks.Signature) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sigs = append(s.sigs, tasks.CopySignature(sig))
	return nil
}

func (s *sendRecorder) all() []*tasks.Signature {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*tasks.Signature(nil), s.sigs...)
}

// withUUID returns what was sent with UUID id.
func (s *sendRecorder) withUUID(id string) []*tasks.Signature {
	var out []*tasks.Signature
	for _, sig := range s.all() {
		if sig.UUID == id {
			out = append(out, sig)
		}
	}
	return out
}

// errRecorder is an ErrorHandlerFunc that records what it is given.
type errRecorder struct {
	mu   sync.Mutex
	errs []error
}

func (e *errRecorder) handle(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

func (e *errRecorder) all() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// spyBroker counts and records the calls the worker makes, and delegates
// them. With slots set, it records every Fetch that asks for more tasks than
// the worker can have free: slots minus the tasks delivered and not yet
// settled. (The worker frees a slot only after it settled the task, so the
// tasks it holds are never fewer than those the broker sees unsettled.)
type spyBroker struct {
	brokers.LeaseBroker
	slots int

	mu         sync.Mutex
	fetchMaxes []int
	overAsked  []string
	unsettled  int
	delivered  []*brokers.Delivery
	extends    int
	acks       int
	takes      int // AckTake calls (counted in acks too)
	taken      int // tasks AckTake took
	retries    []retryCall
	archives   int
	requeued   int

	// fetchStopped is closed when a Fetch returns because its context ended.
	fetchStopped     chan struct{}
	fetchStoppedOnce sync.Once
}

// retryCall is one call of Broker.Retry.
type retryCall struct {
	sig      *tasks.Signature // a copy of the delivery's signature
	at       time.Time
	calledAt time.Time
	errMsg   string
}

// spyCounts is a snapshot of a spyBroker's counters.
type spyCounts struct {
	fetches, extends, acks, takes, taken, retries, archives, requeued int
}

func newSpyBroker(b brokers.LeaseBroker) *spyBroker {
	return &spyBroker{LeaseBroker: b, fetchStopped: make(chan struct{})}
}

func (b *spyBroker) Fetch(ctx context.Context, queues []string, max int, names *brokers.TaskNames) ([]*brokers.Delivery, error) {
	b.mu.Lock()
	b.fetchMaxes = append(b.fetchMaxes, max)
	if b.slots > 0 && max > b.slots-b.unsettled {
		b.overAsked = append(b.overAsked, fmt.Sprintf("Fetch(max=%d) with %d of %d slots taken", max, b.unsettled, b.slots))
	}
	b.mu.Unlock()

	ds, err := b.LeaseBroker.Fetch(ctx, queues, max, names)

	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			b.fetchStoppedOnce.Do(func() { close(b.fetchStopped) })
		}
		return ds, err
	}
	b.unsettled += len(ds)
	b.delivered = append(b.delivered, ds...)
	return ds, nil
}

func (b *spyBroker) ExtendLeases(ctx context.Context, ds ...*brokers.Delivery) error {
	b.mu.Lock()
	b.extends++
	b.mu.Unlock()
	return b.LeaseBroker.ExtendLeases(ctx, ds...)
}

func (b *spyBroker) Ack(ctx context.Context, d *brokers.Delivery) error {
	err := b.LeaseBroker.Ack(ctx, d)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.acks++
	if err == nil {
		b.unsettled--
	}
	return err
}

// AckTake counts as an Ack, and the task taken as a delivery: the worker
// keeps the slot for it.
func (b *spyBroker) AckTake(ctx context.Context, d *brokers.Delivery, take brokers.Take) (*brokers.Delivery, error) {
	next, err := b.LeaseBroker.(brokers.Relay).AckTake(ctx, d, take)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.acks++
	b.takes++
	if err == nil {
		b.unsettled--
	}
	if next != nil {
		b.unsettled++
		b.taken++
		b.delivered = append(b.delivered, next)
	}
	return next, err
}

func (b *spyBroker) Retry(ctx context.Context, d *brokers.Delivery, at time.Time, errMsg string) error {
	call := retryCall{sig: tasks.CopySignature(d.Signature), at: at, calledAt: time.Now(), errMsg: errMsg}
	err := b.LeaseBroker.Retry(ctx, d, at, errMsg)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.retries = append(b.retries, call)
	if err == nil {
		b.unsettled--
	}
	return err
}

func (b *spyBroker) Archive(ctx context.Context, d *brokers.Delivery, reason string) error {
	err := b.LeaseBroker.Archive(ctx, d, reason)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.archives++
	if err == nil {
		b.unsettled--
	}
	return err
}

func (b *spyBroker) Requeue(ctx context.Context, ds ...*brokers.Delivery) error {
	err := b.LeaseBroker.Requeue(ctx, ds...)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requeued += len(ds)
	if err == nil {
		b.unsettled -= len(ds)
	}
	return err
}

func (b *spyBroker) counts() spyCounts {
	b.mu.Lock()
	defer b.mu.Unlock()
	return spyCounts{
		fetches:  len(b.fetchMaxes),
		extends:  b.extends,
		acks:     b.acks,
		takes:    b.takes,
		taken:    b.taken,
		retries:  len(b.retries),
		archives: b.archives,
		requeued: b.requeued,
	}
}

func (b *spyBroker) retryCalls() []retryCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]retryCall(nil), b.retries...)
}

func (b *spyBroker) deliveries() []*brokers.Delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*brokers.Delivery(nil), b.delivered...)
}

// losingBroker refuses every lease renewal: ExtendLeases marks the lease of
// every delivery it is given lost, as a broker does for a task it already
// gave to someone else.
type losingBroker struct {
	brokers.LeaseBroker
	extends atomic.Int32
	// after, if set, holds the losing back until it is closed: until then
	// renewals are granted.
	after chan struct{}
}

func (b *losingBroker) ExtendLeases(ctx context.Context, ds ...*brokers.Delivery) error {
	b.extends.Add(1)
	if b.after != nil {
		select {
		case <-b.after:
		default:
			return b.LeaseBroker.ExtendLeases(ctx, ds...)
		}
	}
	for _, d := range ds {
		d.Lease.Lose()
	}
	return nil
}

// failingFetchBroker fails the first fails calls of Fetch (every call when
// fails is negative) with err, then delegates.
type failingFetchBroker struct {
	brokers.LeaseBroker
	err   error
	fails int

	mu    sync.Mutex
	calls []time.Time
}

func (b *failingFetchBroker) Fetch(ctx context.Context, queues []string, max int, names *brokers.TaskNames) ([]*brokers.Delivery, error) {
	b.mu.Lock()
	b.calls = append(b.calls, time.Now())
	n := len(b.calls)
	b.mu.Unlock()
	if b.fails < 0 || n <= b.fails {
		return nil, b.err
	}
	return b.LeaseBroker.Fetch(ctx, queues, max, names)
}

func (b *failingFetchBroker) callTimes() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Time(nil), b.calls...)
}

// heldChordBackend holds the TriggerChord call of the member hold until the
// TriggerChord call of the member after has returned (or waitTimeout has
// passed), to order the chord election of two members that finish together.
type heldChordBackend struct {
	fullBackend
	hold, after string

	afterDone chan struct{}
	once      sync.Once
}

func (b *heldChordBackend) TriggerChordContext(ctx context.Context, groupUUID, memberUUID string) (bool, error) {
	if memberUUID == b.hold {
		timer := time.NewTimer(waitTimeout)
		select {
		case <-b.afterDone:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
	won, err := b.fullBackend.TriggerChordContext(ctx, groupUUID, memberUUID)
	if memberUUID == b.after {
		b.once.Do(func() { close(b.afterDone) })
	}
	return won, err
}

// fullBackend is a backend with machinery's methods and the context-aware
// ones, as machinist's are: what a test's wrapper embeds.
type fullBackend interface {
	backends.Backend
	backends.ContextBackend
}
