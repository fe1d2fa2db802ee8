package brokertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/b6192125/machinist/internal/waitfor"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Generous bounds: the suite runs under -race on loaded machines. They are
// upper limits on waits that normally end in milliseconds, never delays.
const (
	waitLong  = 10 * time.Second       // for something that must happen
	waitShort = 150 * time.Millisecond // for something that must not happen
)

// suite carries the implementation under test into every subtest.
// Broker is what the suite exercises: the core seam and the optional
// interfaces both shipped brokers implement.
type Broker interface {
	brokers.LeaseBroker
	brokers.Inspector
	brokers.Pauser
	brokers.Claimer
	brokers.Aggregator
	brokers.Canceller
	brokers.Monitor
	brokers.Relay
	LeaseEnder
}

// LeaseEnder is what each implementation's test adds to the broker it
// hands the suite: a way to end a lease now, as if its time had run out.
// The suite's tests of what follows a lease's end call it rather than
// wait for a lease to expire, so that they hold however loaded the
// machine is; every other test runs under leases long enough that load
// never ends one.
type LeaseEnder interface {
	// EndLease makes the broker hold d's lease as ended at once: it
	// refuses d's settles and renewals, and its recoverer takes the task
	// back at its next run. d itself is left alone (the suite marks it).
	EndLease(ctx context.Context, d *brokers.Delivery) error
	// EndBatchLease is EndLease for the lease of an aggregation batch.
	EndBatchLease(ctx context.Context, b *brokers.Batch) error
}

// TimeMover may be implemented by a broker whose store's clock a test can
// stop and move: the clock its scripts read and its keys' TTLs run by. The
// suite's checks that something lasts its time (a claim's lease and
// record, a cancel bar, a unique key, an announcement, an aggregation's
// grace period and delay, a rate's steps, the archive's age limit) then
// move it instead of waiting for it, and hold to the millisecond however
// loaded the machine. The host's clock runs on: where a call takes a time
// (Retry's at), the suite gives the store's. A broker that implements it
// has its store to itself, so that no other subtest sees the moves.
type TimeMover interface {
	// StopClock stops the store's clock, if it runs, and returns its
	// time; from then on only Advance moves it.
	StopClock() time.Time
	// Advance moves the stopped clock on by d, at once: keys whose TTL it
	// passes are gone and scripts read the later time. By the time it
	// returns, what came due by then (a scheduled task, an aggregation
	// group, an announcement's end) has been handled as the queues'
	// maintenance handles it.
	Advance(ctx context.Context, d time.Duration) error
}

// storeClock is a broker's store clock as a check reads and moves it:
// stopped, and moved at once, on a broker that implements TimeMover; else
// the wall clock, which the check waits for.
type storeClock struct {
	t     *testing.T
	mover TimeMover // nil: the wall clock
}

// stopClock returns b's store clock, stopped if b can move it. A check
// calls it before it makes what it times.
func stopClock(t *testing.T, b Broker) *storeClock {
	t.Helper()
	c := &storeClock{t: t}
	if m, ok := b.(TimeMover); ok {
		c.mover = m
		m.StopClock()
	}
	return c
}

// Now is the store's time.
func (c *storeClock) Now() time.Time {
	if c.mover == nil {
		return time.Now()
	}
	return c.mover.StopClock() // stopped already: only read
}

// stopped reports whether the clock is the store's, stopped: only
// Advance moves it.
func (c *storeClock) stopped() bool { return c.mover != nil }

// Since is the store's time elapsed since t.
func (c *storeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// before reports whether the store's clock is still before at, after what
// the check did. The wall clock allows a millisecond for a store that
// counts whole ones.
func (c *storeClock) before(at time.Time) bool {
	if c.mover == nil {
		return time.Now().Add(time.Millisecond).Before(at)
	}
	return c.Now().Before(at)
}

// advanceTo moves the clock to at, if it is before it: a stopped clock at
// once, the wall clock by waiting for it.
func (c *storeClock) advanceTo(at time.Time) {
	c.t.Helper()
	if c.mover == nil {
		waitUntil(at)
		return
	}
	if d := at.Sub(c.Now()); d > 0 {
		must(c.t, "Advance", c.mover.Advance(context.Background(), d))
	}
}

// advance moves the clock on by d (advanceTo).
func (c *storeClock) advance(d time.Duration) {
	c.t.Helper()
	c.advanceTo(c.Now().Add(d))
}

type suite struct {
	newBroker func(t *testing.T, cnf *config.Config) Broker
}

// leaseDuration is the suite's lease: long enough that no lease ends
// unless a test ends it (endLease).
const leaseDuration = time.Minute

// broker returns a fresh broker configured with the suite's lease
// (leaseDuration), recovery every 50ms and a per-test default queue,
// changed by opts. It is closed when the test ends.
func (s *suite) broker(t *testing.T, opts ...func(*config.Config)) Broker {
	t.Helper()
	cnf := &config.Config{
		DefaultQueue:    queueName(t, "default"),
		LeaseDuration:   leaseDuration,
		RecoverInterval: 50 * time.Millisecond,
	}
	for _, o := range opts {
		o(cnf)
	}
	b := s.newBroker(t, cnf.WithDefaults())
	t.Cleanup(func() { _ = b.Close() })
	return b
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// queueName returns a queue name unique to this test run, so that suites
// sharing one Redis do not see each other's tasks.
func queueName(t *testing.T, label string) string {
	t.Helper()
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	return fmt.Sprintf("bt_%s_%s_%s", name, label, strings.ReplaceAll(uuid.NewString()[:8], "-", ""))
}

// newSig returns a signature for queue with a fresh UUID.
func newSig(queue, name string) *tasks.Signature {
	return &tasks.Signature{UUID: "task_" + uuid.NewString(), Name: name, RoutingKey: queue}
}

// newSigs returns n signatures for queue named name0, name1, …
func newSigs(queue, name string, n int) []*tasks.Signature {
	out := make([]*tasks.Signature, n)
	for i := range out {
		out[i] = newSig(queue, fmt.Sprintf("%s%d", name, i))
	}
	return out
}

func publish(t *testing.T, b Broker, sigs ...*tasks.Signature) {
	t.Helper()
	if err := b.PublishTasks(context.Background(), sigs...); err != nil {
		t.Fatalf("Publish: %v", err)
	}
}

// fetch takes up to n tasks from queues, failing the test when none comes
// within waitLong.
func fetch(t *testing.T, b Broker, queues []string, n int) []*brokers.Delivery {
	t.Helper()
	return fetchFor(t, b, nil, queues, n)
}

// fetchFor is fetch for a worker with names.
func fetchFor(t *testing.T, b Broker, names *brokers.TaskNames, queues []string, n int) []*brokers.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	ds, err := b.Fetch(ctx, queues, n, names)
	if err != nil {
		t.Fatalf("Fetch(%v, %d): %v", queues, n, err)
	}
	if len(ds) == 0 || len(ds) > max(n, 1) {
		t.Fatalf("Fetch(%v, %d) returned %d deliveries", queues, n, len(ds))
	}
	for _, d := range ds {
		if d == nil || d.Signature == nil || d.Lease == nil {
			t.Fatalf("Fetch returned an incomplete delivery: %+v", d)
		}
	}
	return ds
}

// fetchOne takes one task from queue.
func fetchOne(t *testing.T, b Broker, queue string) *brokers.Delivery {
	t.Helper()
	return fetch(t, b, []string{queue}, 1)[0]
}

// fetchNone checks that Fetch finds nothing in queues for waitShort.
func fetchNone(t *testing.T, b Broker, queues ...string) {
	t.Helper()
	fetchNoneFor(t, b, nil, queues...)
}

// fetchNoneFor is fetchNone for a worker with names.
func fetchNoneFor(t *testing.T, b Broker, names *brokers.TaskNames, queues ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	ds, err := b.Fetch(ctx, queues, 10, names)
	if len(ds) != 0 {
		t.Fatalf("Fetch(%v) took %d tasks (first %s), want none", queues, len(ds), ds[0].Signature.UUID)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch(%v) with nothing to take: err = %v, want context.DeadlineExceeded", queues, err)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func ack(t *testing.T, b Broker, ds ...*brokers.Delivery) {
	t.Helper()
	for _, d := range ds {
		if err := b.Ack(context.Background(), d); err != nil {
			t.Fatalf("Ack(%s): %v", d.Signature.UUID, err)
		}
	}
}

// wantLeaseLost checks that err wraps ErrLeaseLost and that d's lease was
// marked lost.
func wantLeaseLost(t *testing.T, what string, err error, d *brokers.Delivery) {
	t.Helper()
	wantLost(t, what, err, d.Lease)
}

// wantLost checks that err is ErrLeaseLost and l is marked lost.
func wantLost(t *testing.T, what string, err error, l *brokers.Lease) {
	t.Helper()
	if !errors.Is(err, brokers.ErrLeaseLost) {
		t.Fatalf("%s: err = %v, want ErrLeaseLost", what, err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatalf("%s: lease not marked lost (Done not closed)", what)
	}
}

// endLease ends d's lease now, in the broker and in d, as an unrenewed
// lease ends when its time runs out.
func endLease(t *testing.T, b Broker, d *brokers.Delivery) {
	t.Helper()
	must(t, "EndLease", b.EndLease(context.Background(), d))
	d.Lease.Lose()
}

// endBatchLease is endLease for an aggregation batch.
func endBatchLease(t *testing.T, b Broker, batch *brokers.Batch) {
	t.Helper()
	must(t, "EndBatchLease", b.EndBatchLease(context.Background(), batch))
	batch.Lease.Lose()
}

// waitDone waits for the lease to be lost.
func waitDone(t *testing.T, l *brokers.Lease, what string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(waitLong):
		t.Fatalf("%s: lease still held after %s", what, waitLong)
	}
}

// eventually polls cond until it holds, failing the test with msg after
// waitLong.
func eventually(t *testing.T, msg string, cond func() bool) {
	t.Helper()
	waitfor.True(t, waitLong, msg, cond)
}

// waitUntil blocks until the clock has passed ts. It waits for time to pass,
// not for anything to happen: the suite uses it to give two events distinct
// timestamps, and to let a time run out on a store whose clock it cannot
// move (storeClock).
func waitUntil(ts time.Time) {
	if d := time.Until(ts); d > 0 {
		<-time.After(d)
	}
}

func list(t *testing.T, b Broker, queue string, status brokers.TaskStatus) []*brokers.TaskInfo {
	t.Helper()
	infos, err := b.ListTasks(context.Background(), queue, status, 0, 0)
	if err != nil {
		t.Fatalf("ListTasks(%s, %s): %v", queue, status, err)
	}
	return infos
}

func getTask(t *testing.T, b Broker, queue, id string) *brokers.TaskInfo {
	t.Helper()
	info, err := b.GetTask(context.Background(), queue, id)
	if err != nil {
		t.Fatalf("GetTask(%s, %s): %v", queue, id, err)
	}
	return info
}

func queueInfo(t *testing.T, b Broker, queue string) brokers.QueueInfo {
	t.Helper()
	info, err := b.QueueInfo(context.Background(), queue)
	if err != nil {
		t.Fatalf("QueueInfo(%s): %v", queue, err)
	}
	if info.Queue != queue {
		t.Fatalf("QueueInfo(%s).Queue = %q", queue, info.Queue)
	}
	return *info
}

func wantSizes(t *testing.T, b Broker, queue string, want brokers.QueueInfo) {
	t.Helper()
	want.Queue = queue
	if got := queueInfo(t, b, queue); !reflect.DeepEqual(got, want) {
		t.Fatalf("QueueInfo(%s) = %+v, want %+v", queue, got, want)
	}
}

func infoUUIDs(infos []*brokers.TaskInfo) []string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.Signature.UUID
	}
	return out
}

func deliveryUUIDs(ds []*brokers.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Signature.UUID
	}
	return out
}

func sigUUIDs(sigs []*tasks.Signature) []string {
	out := make([]string, len(sigs))
	for i, s := range sigs {
		out[i] = s.UUID
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func wantOrder(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !equalStrings(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// between checks that got falls between lo and hi, to the millisecond
// (brokers keep times in ms).
func between(t *testing.T, what string, got, lo, hi time.Time) {
	t.Helper()
	if got.Before(lo.Add(-time.Millisecond)) || got.After(hi.Add(time.Millisecond)) {
		t.Fatalf("%s = %s, want between %s and %s", what, got, lo, hi)
	}
}

// near reports whether a and b are within tol of each other.
func near(a, b time.Time, tol time.Duration) bool {
	d := a.Sub(b)
	return d <= tol && d >= -tol
}

// sameSignature checks that got carries want's contents. Values are compared
// by their printed form, so that a broker that stores JSON (numbers come back
// as json.Number, slices as []interface{}) passes.
func sameSignature(t *testing.T, what string, got, want *tasks.Signature) {
	t.Helper()
	if got == want {
		t.Fatalf("%s: the broker handed out the caller's own *Signature", what)
	}
	if g, w := describe(got), describe(want); g != w {
		t.Fatalf("%s: signature\n got  %s\n want %s", what, g, w)
	}
}

// describe prints the fields of sig that a broker must keep.
func describe(sig *tasks.Signature) string {
	if sig == nil {
		return "<nil>"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "{UUID:%s Name:%s RoutingKey:%s GroupUUID:%s GroupTaskCount:%d Immutable:%t RetryCount:%d RetryTimeout:%d Timeout:%s",
		sig.UUID, sig.Name, sig.RoutingKey, sig.GroupUUID, sig.GroupTaskCount, sig.Immutable, sig.RetryCount, sig.RetryTimeout, sig.Timeout)
	if sig.ETA != nil {
		fmt.Fprintf(&sb, " ETA:%s", sig.ETA.UTC().Format(time.RFC3339Nano))
	}
	sb.WriteString(" Args:[")
	for _, a := range sig.Args {
		fmt.Fprintf(&sb, "{%s %s %v}", a.Name, a.Type, a.Value)
	}
	sb.WriteString("] Headers:")
	fmt.Fprint(&sb, map[string]interface{}(sig.Headers))
	for _, cb := range sig.OnSuccess {
		fmt.Fprintf(&sb, " OnSuccess:%s", describe(cb))
	}
	for _, cb := range sig.OnError {
		fmt.Fprintf(&sb, " OnError:%s", describe(cb))
	}
	if sig.ChordCallback != nil {
		fmt.Fprintf(&sb, " Chord:%s", describe(sig.ChordCallback))
	}
	sb.WriteString("}")
	return sb.String()
}
