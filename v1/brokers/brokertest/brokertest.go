// Package brokertest is the conformance suite of brokers: every
// implementation of brokers.LeaseBroker runs Exercise in its tests, so that the
// memory and Redis brokers are held to the same semantics.
//
//	func TestConformance(t *testing.T) {
//		brokertest.Exercise(t, func(t *testing.T, cnf *config.Config) brokertest.Broker {
//			b := memory.New(memory.OptionsFrom(cnf))
//			t.Cleanup(func() { b.Close() })
//			return b
//		})
//	}
//
// The suite holds a broker to brokers.LeaseBroker and to the optional
// interfaces Inspector, Pauser, Claimer, Aggregator, Canceller, Monitor
// and Relay, which both shipped brokers implement.
// Beyond what they document, the suite fixes these choices: a
// signature needs a UUID, and a RoutingKey (else ErrNoQueue); Fetch with a
// ctx that has already ended takes nothing even when tasks are pending; a
// task whose lease ran out goes to the head of pending with Recovered+1,
// and is archived once it would exceed MaxRecoveries, with a reason that
// names recoveries and the limit; a lease past its expiry is refused even
// before the recoverer takes the task back; Requeue(d1, d2) puts d1 first at the head;
// ExtendLeases marks the lease of a settled or recovered delivery lost; an
// archived task is deleted from the archive when its UUID is published
// again; a closed broker fails blocked and later calls with ErrClosed.
package brokertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Exercise runs the conformance suite against the brokers newBroker makes.
//
// Each subtest calls newBroker once, with its own *testing.T and a config
// that has been through WithDefaults (with LeaseDuration 1m and
// RecoverInterval 50ms unless the subtest needs otherwise), and closes the
// broker when it ends. Subtests run in parallel and use queue names unique
// to the run, so the brokers may share one store (one Redis); newBroker must
// therefore register its own teardown with t.Cleanup rather than defer it in
// the calling test. The brokers it returns implement LeaseEnder: no lease
// ends in the suite unless a test ends it, so that no test waits for time
// to pass. They may implement TimeMover, each on a store of its own: the
// checks that something lasts its time then move the store's clock rather
// than wait for it.
func Exercise(t *testing.T, newBroker func(t *testing.T, cnf *config.Config) Broker) {
	t.Helper()
	s := &suite{newBroker: newBroker}
	for _, tc := range append([]struct {
		name string
		run  func(*testing.T, *suite)
	}{
		{"PublishFetchAck", testPublishFetchAck},
		{"PublishValidation", testPublishValidation},
		{"MessageTooLarge", testMessageTooLarge},
		{"SignatureCopies", testSignatureCopies},
		{"FIFO", testFIFO},
		{"FetchBlocksUntilPublish", testFetchBlocksUntilPublish},
		{"FetchContextEnds", testFetchContextEnds},
		{"FetchMaxAndQueueOrder", testFetchMaxAndQueueOrder},
		{"PauseResume", testPauseResume},
		{"ETA", testETA},
		{"Retry", testRetry},
		{"Archive", testArchive},
		{"ArchiveMaxSize", testArchiveMaxSize},
		{"ArchiveMaxAge", testArchiveMaxAge},
		{"RequeueToHead", testRequeueToHead},
		{"LeaseExpiryRecovers", testLeaseExpiryRecovers},
		{"ExtendLeasesKeepsTask", testExtendLeasesKeepsTask},
		{"ExtendLeasesOfSettledDelivery", testExtendLeasesOfSettledDelivery},
		{"MaxRecoveries", testMaxRecoveries},
		{"DuplicateTask", testDuplicateTask},
		{"ConcurrentFetchers", testConcurrentFetchers},
		{"Claim", testClaim},
		{"QueueInfo", testQueueInfo},
		{"GetTask", testGetTask},
		{"ListRerouted", testListRerouted},
		{"Monitor", testMonitor},
		{"ListTasksPaging", testListTasksPaging},
		{"PendingAndDelayedTasks", testPendingAndDelayedTasks},
		{"Close", testClose},
		{"ExpiredLeaseRefusedBeforeRecovery", testExpiredLeaseRefusedBeforeRecovery},
		{"CommitTravelsToNextHolder", testCommitTravelsToNextHolder},
		{"Reroute", testReroute},
		{"UniqueTask", testUniqueTask},
		{"UniqueFreedByCommit", testUniqueFreedByCommit},
		{"UniqueRace", testUniqueRace},
		{"UniqueReplace", testUniqueReplace},
		{"TakeWaiting", testTakeWaiting},
		{"CancelTask", testCancelTask},
		{"CancelTaskBar", testCancelTaskBar},
		{"LimitConcurrency", testLimitConcurrency},
		{"LimitDeadHolder", testLimitDeadHolder},
		{"LimitRate", testLimitRate},
		{"AckTake", testAckTake},
		{"AckTakeRerouted", testAckTakeRerouted},
	}, append(aggregationTests(), bandTests()...)...) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, s)
		})
	}
}

func testPublishFetchAck(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")
	sig := newSig(q, "add")
	sig.Args = []tasks.Arg{
		{Name: "a", Type: "int64", Value: 1},
		{Name: "b", Type: "string", Value: "two"},
		{Name: "c", Type: "[]string", Value: []string{"x", "y"}},
		{Name: "d", Type: "float64", Value: 1.5},
	}
	sig.Headers = tasks.Headers{"traceparent": "00-abc-def-01"}
	sig.RetryCount, sig.RetryTimeout, sig.Immutable = 3, 5, true
	sig.Timeout = 2 * time.Second
	sig.OnSuccess = []*tasks.Signature{newSig(q, "on_success")}
	sig.OnError = []*tasks.Signature{newSig(q, "on_error")}
	want := tasks.CopySignature(sig)

	publish(t, b, sig)
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1})

	before := time.Now()
	d := fetchOne(t, b, q)
	sameSignature(t, "fetched task", d.Signature, want)
	if d.Queue != q || d.Retried != 0 || d.Recovered != 0 {
		t.Fatalf("delivery: Queue %q Retried %d Recovered %d, want %q 0 0", d.Queue, d.Retried, d.Recovered, q)
	}
	if d.Lease.Token() == "" || !d.Lease.Valid() {
		t.Fatalf("lease: token %q valid %t, want a token and valid", d.Lease.Token(), d.Lease.Valid())
	}
	if exp := d.Lease.ExpiresAt(); exp.Before(before.Add(leaseDuration)) || exp.After(time.Now().Add(leaseDuration)) {
		t.Fatalf("lease expires at %s, want LeaseDuration (%s) after the fetch at %s", exp, leaseDuration, before)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Active: 1})
	if got := list(t, b, q, brokers.StatusActive); len(got) != 1 || got[0].Signature.UUID != sig.UUID || got[0].Status != brokers.StatusActive {
		t.Fatalf("active tasks = %v, want [%s]", infoUUIDs(got), sig.UUID)
	}

	ack(t, b, d)
	wantSizes(t, b, q, brokers.QueueInfo{})
	if got := list(t, b, q, brokers.StatusPending); len(got) != 0 {
		t.Fatalf("pending after Ack = %v, want none", infoUUIDs(got))
	}
	fetchNone(t, b, q)
	if err := b.Ack(context.Background(), d); !errors.Is(err, brokers.ErrLeaseLost) {
		t.Fatalf("second Ack: err = %v, want ErrLeaseLost", err)
	}
}

func testPublishValidation(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()

	noQueue := newSig("", "no_queue")
	if err := b.Publish(ctx, noQueue); !errors.Is(err, brokers.ErrNoQueue) {
		t.Fatalf("Publish without RoutingKey: err = %v, want ErrNoQueue", err)
	}
	noUUID := newSig(queueName(t, "q"), "no_uuid")
	noUUID.UUID = ""
	if err := b.Publish(ctx, noUUID); err == nil {
		t.Fatal("Publish without UUID: err = nil, want an error")
	}
	if _, err := b.Fetch(ctx, nil, 1, nil); !errors.Is(err, brokers.ErrNoQueue) {
		t.Fatalf("Fetch without queues: err = %v, want ErrNoQueue", err)
	}
}

// testMessageTooLarge: a task whose message is larger than MaxMessageSize
// is refused with a *MessageTooLargeError naming the task, the message's
// size and the limit, and nothing of its publish is queued; one within the
// limit is published.
func testMessageTooLarge(t *testing.T, s *suite) {
	const limit = 4096
	b := s.broker(t, func(cnf *config.Config) { cnf.MaxMessageSize = limit })
	ctx := context.Background()
	q := queueName(t, "q")
	big := newSig(q, "big")
	big.Args = []tasks.Arg{{Type: "string", Value: strings.Repeat("x", 2*limit)}}
	small := newSig(q, "small")
	small.Args = []tasks.Arg{{Type: "string", Value: strings.Repeat("x", limit/2)}}
	err := b.PublishTasks(ctx, small, big)
	var tooLarge *brokers.MessageTooLargeError
	if !errors.Is(err, brokers.ErrMessageTooLarge) || !errors.As(err, &tooLarge) {
		t.Fatalf("Publish of a message over the limit: %v, want a *MessageTooLargeError", err)
	}
	if tooLarge.Task != big.UUID || tooLarge.Name != "big" || tooLarge.Limit != limit || tooLarge.Size <= 2*limit {
		t.Fatalf("MessageTooLargeError %+v, want task %s (big), a size over %d and the limit %d", tooLarge, big.UUID, 2*limit, limit)
	}
	for _, want := range []string{big.UUID, "big", strconv.Itoa(tooLarge.Size), strconv.Itoa(limit)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	wantSizes(t, b, q, brokers.QueueInfo{})
	publish(t, b, small)
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1})
}

// testSignatureCopies checks that the broker shares no memory with its
// callers: changing a published, fetched or listed signature changes nothing
// the broker holds (only Retry stores the delivery's signature).
func testSignatureCopies(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")
	sig := newSig(q, "copy")
	sig.Args = []tasks.Arg{{Type: "[]int64", Value: []int64{1, 2}}}
	sig.Headers = tasks.Headers{"k": "v"}
	want := tasks.CopySignature(sig)
	publish(t, b, sig)

	sig.Name = "changed"
	sig.Args[0].Value.([]int64)[0] = 99
	sig.Headers["k"] = "changed"

	listed := list(t, b, q, brokers.StatusPending)
	sameSignature(t, "listed after the caller changed its signature", listed[0].Signature, want)
	listed[0].Signature.Name = "changed by lister"

	d := fetchOne(t, b, q)
	sameSignature(t, "fetched after the caller changed its signature", d.Signature, want)
	d.Signature.Name = "changed by worker"
	d.Signature.Headers["k"] = "changed by worker"
	if err := b.Requeue(context.Background(), d); err != nil {
		t.Fatalf("Requeue: %v", err)
	}
	d = fetchOne(t, b, q)
	sameSignature(t, "fetched after Requeue", d.Signature, want)
	ack(t, b, d)
}

func testFIFO(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")

	one := newSigs(q, "one", 10)
	for _, sig := range one { // one Publish per task
		publish(t, b, sig)
	}
	var got []string
	for range one {
		d := fetchOne(t, b, q)
		got = append(got, d.Signature.UUID)
		ack(t, b, d)
	}
	wantOrder(t, "fetch order", got, sigUUIDs(one))

	batch := newSigs(q, "batch", 6)
	publish(t, b, batch...) // one Publish for all
	wantOrder(t, "pending order", infoUUIDs(list(t, b, q, brokers.StatusPending)), sigUUIDs(batch))
	got = got[:0]
	for len(got) < len(batch) {
		ds := fetch(t, b, []string{q}, 4)
		got = append(got, deliveryUUIDs(ds)...)
		ack(t, b, ds...)
	}
	wantOrder(t, "batch fetch order", got, sigUUIDs(batch))
}

type fetchResult struct {
	ds  []*brokers.Delivery
	err error
	at  time.Time
}

// goFetch runs Fetch in a goroutine and returns the channel its result
// arrives on.
func goFetch(ctx context.Context, b brokers.LeaseBroker, queues []string, max int) <-chan fetchResult {
	ch := make(chan fetchResult, 1)
	go func() {
		ds, err := b.Fetch(ctx, queues, max, nil)
		ch <- fetchResult{ds, err, time.Now()}
	}()
	return ch
}

// stillBlocked checks that nothing arrives on ch for waitShort.
func stillBlocked(t *testing.T, ch <-chan fetchResult, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: Fetch returned early: %d deliveries, err %v", what, len(r.ds), r.err)
	case <-time.After(waitShort):
	}
}

// result waits for the result on ch.
func result(t *testing.T, ch <-chan fetchResult, what string) fetchResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitLong):
		t.Fatalf("%s: Fetch did not return within %s", what, waitLong)
		return fetchResult{}
	}
}

func testFetchBlocksUntilPublish(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()

	ch := goFetch(ctx, b, []string{q}, 1)
	stillBlocked(t, ch, "empty queue")

	sig := newSig(q, "wake")
	publishedAt := time.Now()
	publish(t, b, sig)
	r := result(t, ch, "after Publish")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].Signature.UUID != sig.UUID {
		t.Fatalf("blocked Fetch after Publish: %d deliveries, err %v; want %s", len(r.ds), r.err, sig.UUID)
	}
	// Promptly: a woken fetcher, not a poll period. The bound is generous
	// for loaded machines; it is normally a millisecond.
	if lat := r.at.Sub(publishedAt); lat > time.Second {
		t.Fatalf("blocked Fetch returned %s after Publish, want promptly", lat)
	}
	ack(t, b, r.ds...)
}

func testFetchContextEnds(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")

	// Cancelled while blocked: ctx's error, nothing taken.
	ctx, cancel := context.WithCancel(context.Background())
	ch := goFetch(ctx, b, []string{q}, 1)
	stillBlocked(t, ch, "empty queue")
	cancel()
	r := result(t, ch, "after cancel")
	if !errors.Is(r.err, context.Canceled) || len(r.ds) != 0 {
		t.Fatalf("cancelled Fetch: %d deliveries, err %v; want none and context.Canceled", len(r.ds), r.err)
	}

	// Deadline: ctx's error.
	fetchNone(t, b, q)

	// Already cancelled with a task pending: ctx's error, the task stays.
	sig := newSig(q, "stays")
	publish(t, b, sig)
	ds, err := b.Fetch(ctx, []string{q}, 1, nil)
	if !errors.Is(err, context.Canceled) || len(ds) != 0 {
		t.Fatalf("Fetch with a cancelled ctx: %d deliveries, err %v; want none and context.Canceled", len(ds), err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1})
	d := fetchOne(t, b, q)
	if d.Signature.UUID != sig.UUID {
		t.Fatalf("fetched %s, want %s", d.Signature.UUID, sig.UUID)
	}
	ack(t, b, d)
}

func testFetchMaxAndQueueOrder(t *testing.T, s *suite) {
	b := s.broker(t)
	q1, q2 := queueName(t, "q1"), queueName(t, "q2")
	a := newSigs(q1, "a", 2)
	c := newSigs(q2, "c", 3)
	publish(t, b, a...)
	publish(t, b, c...)

	ds := fetch(t, b, []string{q1, q2}, 4)
	wantOrder(t, "Fetch([q1 q2], 4)", deliveryUUIDs(ds), []string{a[0].UUID, a[1].UUID, c[0].UUID, c[1].UUID})
	for i, wantQ := range []string{q1, q1, q2, q2} {
		if ds[i].Queue != wantQ {
			t.Fatalf("delivery %d: Queue %q, want %q", i, ds[i].Queue, wantQ)
		}
	}
	if ds[0].Lease.Token() == ds[1].Lease.Token() {
		t.Fatal("two deliveries share a lease token")
	}
	ack(t, b, ds...)

	ds = fetch(t, b, []string{q1, q2}, 0) // max < 1 means 1
	wantOrder(t, "Fetch([q1 q2], 0)", deliveryUUIDs(ds), []string{c[2].UUID})
	ack(t, b, ds...)

	// The order given wins over the order of publishing.
	a2, c2 := newSig(q1, "a2"), newSig(q2, "c2")
	publish(t, b, a2)
	publish(t, b, c2)
	ds = fetch(t, b, []string{q2, q1}, 1)
	wantOrder(t, "Fetch([q2 q1], 1)", deliveryUUIDs(ds), []string{c2.UUID})
	ack(t, b, ds...)

	// max caps a long queue.
	more := newSigs(q1, "more", 4)
	publish(t, b, more...)
	ds = fetch(t, b, []string{q1}, 3)
	wantOrder(t, "Fetch([q1], 3)", deliveryUUIDs(ds), []string{a2.UUID, more[0].UUID, more[1].UUID})
	wantSizes(t, b, q1, brokers.QueueInfo{Pending: 2, Active: 3})
	ack(t, b, ds...)
}

func testPauseResume(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q1, q2 := queueName(t, "q1"), queueName(t, "q2")
	if err := b.PauseQueue(ctx, q1); err != nil {
		t.Fatalf("PauseQueue: %v", err)
	}
	a, c := newSig(q1, "a"), newSig(q2, "c")
	publish(t, b, a, c)
	wantSizes(t, b, q1, brokers.QueueInfo{Paused: true, Pending: 1})

	ds := fetch(t, b, []string{q1, q2}, 10)
	wantOrder(t, "Fetch([paused q1, q2])", deliveryUUIDs(ds), []string{c.UUID})
	ack(t, b, ds...)
	fetchNone(t, b, q1)

	fctx, cancel := context.WithTimeout(ctx, 2*waitLong)
	defer cancel()
	ch := goFetch(fctx, b, []string{q1}, 1)
	stillBlocked(t, ch, "paused queue")
	if err := b.ResumeQueue(ctx, q1); err != nil {
		t.Fatalf("ResumeQueue: %v", err)
	}
	r := result(t, ch, "after ResumeQueue")
	if r.err != nil || len(r.ds) != 1 || r.ds[0].Signature.UUID != a.UUID {
		t.Fatalf("Fetch after resume: %d deliveries, err %v; want %s", len(r.ds), r.err, a.UUID)
	}
	wantSizes(t, b, q1, brokers.QueueInfo{Active: 1})
	ack(t, b, r.ds...)
}

func testETA(t *testing.T, s *suite) {
	b := s.broker(t)
	clk := stopClock(t, b)
	q := queueName(t, "q")

	// One task waits an hour, for the checks of a task not yet due,
	// which hold however slow the machine; the other is due soon, and is
	// taken then, never before.
	eta := clk.Now().Add(300 * time.Millisecond)
	hour := clk.Now().Add(time.Hour)
	sig, later := newSig(q, "soon"), newSig(q, "later")
	sig.ETA, later.ETA = &eta, &hour
	publish(t, b, later)

	got := list(t, b, q, brokers.StatusScheduled)
	if len(got) != 1 || got[0].Signature.UUID != later.UUID || got[0].Status != brokers.StatusScheduled {
		t.Fatalf("scheduled tasks = %v, want [%s]", infoUUIDs(got), later.UUID)
	}
	if !near(got[0].NextProcessAt, hour, time.Millisecond) {
		t.Fatalf("NextProcessAt = %s, want the ETA %s", got[0].NextProcessAt, hour)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Scheduled: 1})
	fetchNone(t, b, q)

	publish(t, b, sig)
	if clk.stopped() {
		clk.advanceTo(eta.Add(-time.Millisecond))
		fetchNone(t, b, q) // a millisecond before its ETA
	}
	clk.advanceTo(eta)
	d := fetchOne(t, b, q)
	if clk.before(eta) {
		t.Fatalf("task fetched at %s, before its ETA %s", clk.Now(), eta)
	}
	if d.Signature.UUID != sig.UUID || d.Signature.ETA == nil || !d.Signature.ETA.Equal(eta) {
		t.Fatalf("fetched %s with ETA %v, want %s with ETA %s", d.Signature.UUID, d.Signature.ETA, sig.UUID, eta)
	}
	ack(t, b, d)
	wantSizes(t, b, q, brokers.QueueInfo{Scheduled: 1})

	past := clk.Now().Add(-time.Hour)
	now := newSig(q, "past_eta")
	now.ETA = &past
	publish(t, b, now)
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1, Scheduled: 1})
	ack(t, b, fetchOne(t, b, q))
}

func testRetry(t *testing.T, s *suite) {
	b := s.broker(t)
	clk := stopClock(t, b)
	ctx := context.Background()
	q := queueName(t, "q")
	sig, later := newSig(q, "flaky"), newSig(q, "later")
	sig.RetryCount = 2
	publish(t, b, sig, later)

	// later is retried in an hour, for the checks of a task waiting for
	// its retry, which hold however slow the machine; sig soon, and it is
	// pending then, never before.
	ds := fetch(t, b, []string{q}, 2)
	wantOrder(t, "fetched", deliveryUUIDs(ds), []string{sig.UUID, later.UUID})
	d, dl := ds[0], ds[1]
	dl.Signature.RetryCount = 1
	dl.Signature.RetryTimeout = 1
	dl.Signature.Args = append(dl.Signature.Args, tasks.Arg{Type: "string", Value: "added by the worker"})
	want := tasks.CopySignature(dl.Signature)
	hour := clk.Now().Add(time.Hour)
	if err := b.Retry(ctx, dl, hour, "boom"); err != nil {
		t.Fatalf("Retry: %v", err)
	}

	got := list(t, b, q, brokers.StatusRetry)
	if len(got) != 1 {
		t.Fatalf("retry tasks = %v, want [%s]", infoUUIDs(got), later.UUID)
	}
	in := got[0]
	if in.Status != brokers.StatusRetry || in.Retried != 1 || in.LastError != "boom" || in.Queue != q {
		t.Fatalf("retry task: %+v, want status retry, Retried 1, LastError boom, Queue %s", in, q)
	}
	if !near(in.NextProcessAt, hour, time.Millisecond) || !near(in.LastFailedAt, clk.Now(), 5*time.Second) {
		t.Fatalf("retry task: NextProcessAt %s LastFailedAt %s, want %s and about now", in.NextProcessAt, in.LastFailedAt, hour)
	}
	sameSignature(t, "listed retry task", in.Signature, want)
	wantSizes(t, b, q, brokers.QueueInfo{Active: 1, Retry: 1})
	wantLeaseLost(t, "Ack after Retry", b.Ack(ctx, dl), dl)

	d.Signature.Args = append(d.Signature.Args, tasks.Arg{Type: "string", Value: "added by the worker"})
	want = tasks.CopySignature(d.Signature)
	at := clk.Now().Add(300 * time.Millisecond)
	if err := b.Retry(ctx, d, at, "boom"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	// Pending at its time, never before.
	clk.advanceTo(at.Add(-time.Millisecond))
	if len(list(t, b, q, brokers.StatusPending)) != 0 && clk.before(at) {
		t.Fatalf("retry task pending at %s, before its time %s", clk.Now(), at)
	}
	clk.advanceTo(at)
	eventually(t, "retry task becomes pending", func() bool {
		return len(list(t, b, q, brokers.StatusPending)) == 1
	})
	pending := list(t, b, q, brokers.StatusPending)[0]
	if pending.Retried != 1 || pending.LastError != "boom" {
		t.Fatalf("pending after retry: Retried %d LastError %q, want 1 and boom", pending.Retried, pending.LastError)
	}

	d2 := fetchOne(t, b, q)
	if d2.Retried != 1 || d2.Recovered != 0 {
		t.Fatalf("retried delivery: Retried %d Recovered %d, want 1 0", d2.Retried, d2.Recovered)
	}
	sameSignature(t, "fetched after Retry (the worker's changes are kept)", d2.Signature, want)
	ack(t, b, d2)
	wantSizes(t, b, q, brokers.QueueInfo{Retry: 1})
}

func testArchive(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	sigs := newSigs(q, "doomed", 3)
	publish(t, b, sigs...)

	ds := fetch(t, b, []string{q}, 3)
	var last time.Time
	for i, d := range ds {
		waitUntil(last.Add(2 * time.Millisecond)) // distinct archive times
		if err := b.Archive(ctx, d, "reason "+strconv.Itoa(i)); err != nil {
			t.Fatalf("Archive: %v", err)
		}
		last = time.Now()
	}
	wantLeaseLost(t, "Ack after Archive", b.Ack(ctx, ds[0]), ds[0])

	got := list(t, b, q, brokers.StatusArchived)
	wantOrder(t, "archived (newest first)", infoUUIDs(got), []string{sigs[2].UUID, sigs[1].UUID, sigs[0].UUID})
	for i, in := range got {
		if wantReason := "reason " + strconv.Itoa(2-i); in.Status != brokers.StatusArchived || in.LastError != wantReason || in.Queue != q {
			t.Fatalf("archived %d: status %s LastError %q Queue %s, want archived %q %s", i, in.Status, in.LastError, in.Queue, wantReason, q)
		}
		if !near(in.LastFailedAt, time.Now(), 5*time.Second) {
			t.Fatalf("archived %d: LastFailedAt %s, want about now", i, in.LastFailedAt)
		}
	}
	wantSizes(t, b, q, brokers.QueueInfo{Archived: 3})
	fetchNone(t, b, q)

	n, err := b.RequeueArchived(ctx, q, sigs[0].UUID, "task_unknown")
	if err != nil || n != 1 {
		t.Fatalf("RequeueArchived(one): %d, %v; want 1", n, err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1, Archived: 2})
	d := fetchOne(t, b, q)
	if d.Signature.UUID != sigs[0].UUID {
		t.Fatalf("fetched %s after RequeueArchived, want %s", d.Signature.UUID, sigs[0].UUID)
	}
	ack(t, b, d)

	n, err = b.DeleteArchived(ctx, q, sigs[1].UUID)
	if err != nil || n != 1 {
		t.Fatalf("DeleteArchived(one): %d, %v; want 1", n, err)
	}
	wantOrder(t, "archived after DeleteArchived", infoUUIDs(list(t, b, q, brokers.StatusArchived)), []string{sigs[2].UUID})

	n, err = b.RequeueArchived(ctx, q)
	if err != nil || n != 1 {
		t.Fatalf("RequeueArchived(all): %d, %v; want 1", n, err)
	}
	d = fetchOne(t, b, q)
	if d.Signature.UUID != sigs[2].UUID {
		t.Fatalf("fetched %s after RequeueArchived, want %s", d.Signature.UUID, sigs[2].UUID)
	}
	if err := b.Archive(ctx, d, "again"); err != nil {
		t.Fatalf("Archive: %v", err)
	}
	n, err = b.DeleteArchived(ctx, q)
	if err != nil || n != 1 {
		t.Fatalf("DeleteArchived(all): %d, %v; want 1", n, err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{})
}

// archiveAll publishes sigs and archives them one by one, at distinct times.
func archiveAll(t *testing.T, b Broker, q string, sigs []*tasks.Signature) {
	t.Helper()
	publish(t, b, sigs...)
	var last time.Time
	for range sigs {
		d := fetchOne(t, b, q)
		waitUntil(last.Add(2 * time.Millisecond))
		if err := b.Archive(context.Background(), d, "dead"); err != nil {
			t.Fatalf("Archive: %v", err)
		}
		last = time.Now()
	}
}

func testArchiveMaxSize(t *testing.T, s *suite) {
	b := s.broker(t, func(c *config.Config) { c.ArchiveMaxSize = 2 })
	q := queueName(t, "q")
	sigs := newSigs(q, "dead", 3)
	archiveAll(t, b, q, sigs)
	wantOrder(t, "archive trimmed to 2, oldest gone", infoUUIDs(list(t, b, q, brokers.StatusArchived)),
		[]string{sigs[2].UUID, sigs[1].UUID})
}

// A dead letter is kept while younger than ArchiveMaxAge, and dropped by
// the next archive once it is not.
func testArchiveMaxAge(t *testing.T, s *suite) {
	const maxAge = 200 * time.Millisecond
	b := s.broker(t, func(c *config.Config) { c.ArchiveMaxAge = maxAge })
	clk := stopClock(t, b)
	q := queueName(t, "q")
	old, young, younger := newSig(q, "old"), newSig(q, "young"), newSig(q, "younger")
	// old is archived between before and after (the store's clock).
	before := clk.Now()
	archiveAll(t, b, q, []*tasks.Signature{old})
	after := clk.Now()

	clk.advanceTo(before.Add(maxAge - time.Millisecond))
	archiveAll(t, b, q, []*tasks.Signature{young})
	got := infoUUIDs(list(t, b, q, brokers.StatusArchived))
	if clk.before(before.Add(maxAge)) && !equalStrings(got, []string{young.UUID, old.UUID}) {
		t.Fatalf("archived = %v, want [%s %s]: a dead letter younger than ArchiveMaxAge was dropped", got, young.UUID, old.UUID)
	}

	clk.advanceTo(after.Add(maxAge))
	if !clk.stopped() {
		// The store counts whole milliseconds: on the wall clock, young
		// may have been archived late enough (a loaded machine) to share
		// younger's millisecond, and the archive lists ties by UUID.
		waitUntil(time.Now().Add(2 * time.Millisecond))
	}
	archiveAll(t, b, q, []*tasks.Signature{younger})
	got = infoUUIDs(list(t, b, q, brokers.StatusArchived))
	if len(got) == 0 || got[0] != younger.UUID || slices.Contains(got, old.UUID) {
		t.Fatalf("archived = %v, want %s first and without %s, older than ArchiveMaxAge", got, younger.UUID, old.UUID)
	}
}

func testRequeueToHead(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	sigs := newSigs(q, "t", 3)
	publish(t, b, sigs...)

	d := fetchOne(t, b, q)
	if err := b.Requeue(ctx, d); err != nil {
		t.Fatalf("Requeue: %v", err)
	}
	wantLeaseLost(t, "Ack after Requeue", b.Ack(ctx, d), d)
	wantOrder(t, "pending after Requeue", infoUUIDs(list(t, b, q, brokers.StatusPending)), sigUUIDs(sigs))

	ds := fetch(t, b, []string{q}, 2)
	if err := b.Requeue(ctx, ds...); err != nil {
		t.Fatalf("Requeue(2): %v", err)
	}
	ds = fetch(t, b, []string{q}, 3)
	wantOrder(t, "fetch after Requeue of two", deliveryUUIDs(ds), sigUUIDs(sigs))
	for _, d := range ds {
		if d.Retried != 0 || d.Recovered != 0 {
			t.Fatalf("requeued %s: Retried %d Recovered %d, want nothing counted", d.Signature.UUID, d.Retried, d.Recovered)
		}
	}
	ack(t, b, ds...)
}

// testLeaseExpiryRecovers checks that a task whose lease ran out goes back
// to the head of pending (it is the oldest work in the queue, and it runs
// again at once rather than behind everything sent since; one that keeps
// killing its worker is stopped by MaxRecoveries), never before the lease
// ended, with Recovered counted, and that only its new holder can settle it.
func testLeaseExpiryRecovers(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	sig := newSig(q, "orphan")
	publish(t, b, sig)

	stale := fetchOne(t, b, q)
	must(t, "PauseQueue", b.PauseQueue(ctx, q)) // so that the order can be seen
	other := newSig(q, "other")
	publish(t, b, other)
	waitUntil(time.Now().Add(waitShort)) // recoveries run meanwhile (RecoverInterval 50ms)
	wantSizes(t, b, q, brokers.QueueInfo{Paused: true, Pending: 1, Active: 1})
	endLease(t, b, stale)
	eventually(t, "task with an expired lease back in pending", func() bool {
		return queueInfo(t, b, q).Pending == 2
	})
	wantSizes(t, b, q, brokers.QueueInfo{Paused: true, Pending: 2})
	wantOrder(t, "pending after recovery (recovered task at the head)", infoUUIDs(list(t, b, q, brokers.StatusPending)),
		[]string{sig.UUID, other.UUID})
	if in := list(t, b, q, brokers.StatusPending)[0]; in.Recovered != 1 || in.Retried != 0 {
		t.Fatalf("recovered task listed with Recovered %d Retried %d, want 1 0", in.Recovered, in.Retried)
	}
	must(t, "ResumeQueue", b.ResumeQueue(ctx, q))

	ds := fetch(t, b, []string{q}, 2)
	wantOrder(t, "fetch after recovery", deliveryUUIDs(ds), []string{sig.UUID, other.UUID})
	fresh := ds[0]
	if fresh.Recovered != 1 || fresh.Retried != 0 {
		t.Fatalf("recovered delivery: Recovered %d Retried %d, want 1 0", fresh.Recovered, fresh.Retried)
	}
	if fresh.Lease.Token() == stale.Lease.Token() {
		t.Fatal("the recovered task kept its old lease token")
	}
	must(t, "ExtendLeases", b.ExtendLeases(ctx, stale, fresh))
	if !fresh.Lease.Valid() {
		t.Fatal("ExtendLeases lost the new holder's lease")
	}
	wantLeaseLost(t, "stale holder's Ack", b.Ack(ctx, stale), stale)
	ack(t, b, ds...)
	wantSizes(t, b, q, brokers.QueueInfo{})
}

func testExtendLeasesKeepsTask(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	publish(t, b, newSig(q, "long"))

	d := fetchOne(t, b, q)
	first := d.Lease.ExpiresAt()
	for i := range 3 {
		// Each renewal runs LeaseDuration from when it is made, by the
		// broker's clock and by the lease's: both move past the expiry
		// before it.
		waitUntil(time.Now().Add(5 * time.Millisecond))
		before := time.Now()
		must(t, "ExtendLeases", b.ExtendLeases(ctx, d))
		if !d.Lease.Valid() {
			t.Fatalf("renewal %d: lease lost", i)
		}
		if exp := d.Lease.ExpiresAt(); exp.Before(before.Add(leaseDuration)) || !exp.After(first) {
			t.Fatalf("renewal %d at %s: lease expires at %s, want LeaseDuration from the renewal, after %s", i, before, exp, first)
		}
		got := getTask(t, b, q, d.Signature.UUID)
		if got.LeaseExpiresAt.Before(before.Add(leaseDuration-time.Millisecond)) || !got.LeaseExpiresAt.After(first) {
			t.Fatalf("renewal %d at %s: the broker's lease ends at %s, want LeaseDuration from the renewal", i, before, got.LeaseExpiresAt)
		}
		first = d.Lease.ExpiresAt()
	}
	fetchNone(t, b, q)
	active := list(t, b, q, brokers.StatusActive)
	if len(active) != 1 || active[0].Recovered != 0 {
		t.Fatalf("active tasks = %+v, want the renewed task, never recovered", active)
	}
	ack(t, b, d)
}

func testExtendLeasesOfSettledDelivery(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	publish(t, b, newSig(q, "settled"), newSig(q, "running"))
	ds := fetch(t, b, []string{q}, 2)
	ack(t, b, ds[0])
	if err := b.ExtendLeases(ctx, ds...); err != nil {
		t.Fatalf("ExtendLeases: %v", err)
	}
	select {
	case <-ds[0].Lease.Done():
	default:
		t.Fatal("ExtendLeases of an acknowledged task did not mark its lease lost")
	}
	if !ds[1].Lease.Valid() {
		t.Fatal("ExtendLeases lost the lease of a running task")
	}
	ack(t, b, ds[1])
}

func testMaxRecoveries(t *testing.T, s *suite) {
	const maxRecoveries = 2
	b := s.broker(t, func(c *config.Config) { c.MaxRecoveries = maxRecoveries })
	ctx := context.Background()
	q := queueName(t, "q")
	sig := newSig(q, "killer")
	publish(t, b, sig)

	var last *brokers.Delivery
	for i := 0; i <= maxRecoveries; i++ {
		last = fetchOne(t, b, q)
		if last.Recovered != i {
			t.Fatalf("fetch %d: Recovered %d, want %d", i, last.Recovered, i)
		}
		endLease(t, b, last)
	}
	eventually(t, "task archived after MaxRecoveries", func() bool {
		return len(list(t, b, q, brokers.StatusArchived)) == 1
	})
	in := list(t, b, q, brokers.StatusArchived)[0]
	if in.Signature.UUID != sig.UUID {
		t.Fatalf("archived %s, want %s", in.Signature.UUID, sig.UUID)
	}
	if r := strings.ToLower(in.LastError); !strings.Contains(r, "recover") || !strings.Contains(r, strconv.Itoa(maxRecoveries)) {
		t.Fatalf("archive reason %q does not name recoveries and their count (%d)", in.LastError, maxRecoveries)
	}
	if in.Recovered != maxRecoveries+1 {
		t.Fatalf("archived with Recovered %d, want %d (every lease that ended)", in.Recovered, maxRecoveries+1)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Archived: 1})
	fetchNone(t, b, q)
	wantLeaseLost(t, "Ack after archiving", b.Ack(ctx, last), last)
}

func testDuplicateTask(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q, other := queueName(t, "q"), queueName(t, "other")
	sig := newSig(q, "once")
	publish(t, b, sig)

	wantDup := func(what string, sigs ...*tasks.Signature) {
		t.Helper()
		if err := b.PublishTasks(ctx, sigs...); !errors.Is(err, brokers.ErrDuplicateTask) {
			t.Fatalf("Publish %s: err = %v, want ErrDuplicateTask", what, err)
		}
	}
	wantDup("while pending", sig)
	twice := newSig(other, "twice")
	wantDup("twice in one call", twice, tasks.CopySignature(twice))

	d := fetchOne(t, b, q)
	wantDup("while active", sig)

	later := newSig(q, "later")
	eta := time.Now().Add(time.Hour)
	later.ETA = &eta
	publish(t, b, later)
	wantDup("while scheduled", later)

	ack(t, b, d)
	publish(t, b, sig) // forgotten after Ack
	d = fetchOne(t, b, q)
	if err := b.Archive(ctx, d, "dead"); err != nil {
		t.Fatalf("Archive: %v", err)
	}
	publish(t, b, sig) // archived tasks do not count, and are replaced
	if got := list(t, b, q, brokers.StatusArchived); len(got) != 0 {
		t.Fatalf("archived after publishing the same UUID again = %v, want none", infoUUIDs(got))
	}
	d = fetchOne(t, b, q)
	if d.Signature.UUID != sig.UUID {
		t.Fatalf("fetched %s, want %s", d.Signature.UUID, sig.UUID)
	}
	ack(t, b, d)
}

func testConcurrentFetchers(t *testing.T, s *suite) {
	const (
		total    = 500
		fetchers = 8
		batch    = 50
	)
	b := s.broker(t, func(c *config.Config) { c.LeaseDuration = 30 * time.Second })
	q := queueName(t, "q")
	sigs := newSigs(q, "t", total)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()

	var (
		mu   sync.Mutex
		seen = make(map[string]int, total)
		errs []error
		got  atomic.Int64
		wg   sync.WaitGroup
	)
	for range fetchers {
		wg.Go(func() {
			for {
				ds, err := b.Fetch(ctx, []string{q}, 7, nil)
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
					return
				}
				for _, d := range ds {
					err := b.Ack(context.Background(), d)
					mu.Lock()
					seen[d.Signature.UUID]++
					if err != nil {
						errs = append(errs, err)
					}
					mu.Unlock()
				}
				if got.Add(int64(len(ds))) >= total {
					cancel()
				}
			}
		})
	}
	// Publish while the fetchers run, a batch at a time.
	for i := 0; i < total; i += batch {
		if err := b.PublishTasks(context.Background(), sigs[i:i+batch]...); err != nil {
			t.Errorf("Publish: %v", err)
			cancel()
			break
		}
	}
	wg.Wait()
	if errs != nil {
		t.Fatalf("fetchers failed: %v", errors.Join(errs...))
	}
	if len(seen) != total {
		t.Fatalf("fetchers received %d distinct tasks, want %d", len(seen), total)
	}
	for _, sig := range sigs {
		if n := seen[sig.UUID]; n != 1 {
			t.Fatalf("task %s received %d times, want once", sig.UUID, n)
		}
	}
	wantSizes(t, b, q, brokers.QueueInfo{})
}

func testClaim(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()

	// One winner among concurrent claimers.
	k := queueName(t, "concurrent")
	var wins atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if r, err := b.ClaimLease(ctx, k, time.Minute, time.Minute); err == nil && r.Status == brokers.ClaimWon {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d of 20 concurrent claims won, want 1", n)
	}

	t.Run("Lease", func(t *testing.T) { testClaimLease(t, b) })
	t.Run("TakeOver", func(t *testing.T) { testClaimTakeOver(t, b) })
	t.Run("Keep", func(t *testing.T) { testClaimKeep(t, b) })
	t.Run("Holds", func(t *testing.T) { testClaimHolds(t, b) })
	t.Run("Records", func(t *testing.T) { testClaimRecords(t, b) })
}

// Periodic entries are listed by name, then spec, each with the tick
// recorded last for its name and spec (recorded before the entry too); an
// entry recorded again is replaced but keeps its tick, and a tick alone
// lists nothing.
func testClaimRecords(t *testing.T, b Broker) {
	ctx := context.Background()
	a, z := queueName(t, "a"), queueName(t, "z") // names only this test records
	registered := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	entry := func(name, spec, kind string, tasks ...string) *brokers.PeriodicEntry {
		return &brokers.PeriodicEntry{Name: name, Spec: spec, Kind: kind, Tasks: tasks, Queues: []string{"q"},
			Host: "host", PID: 42, Registered: registered}
	}
	record := func(e *brokers.PeriodicEntry) {
		t.Helper()
		if err := b.RecordPeriodic(ctx, e); err != nil {
			t.Fatalf("RecordPeriodic(%s, %s): %v", e.Name, e.Spec, err)
		}
	}
	tick := func(name, spec string, last brokers.PeriodicTick) {
		t.Helper()
		if err := b.RecordPeriodicTick(ctx, name, spec, last); err != nil {
			t.Fatalf("RecordPeriodicTick(%s, %s): %v", name, spec, err)
		}
	}
	// list returns the entries of this test's names, as text.
	list := func() []string {
		t.Helper()
		all, err := b.PeriodicEntries(ctx)
		if err != nil {
			t.Fatalf("PeriodicEntries: %v", err)
		}
		var out []string
		for _, e := range all {
			if e.Name != a && e.Name != z {
				continue
			}
			if !e.Registered.Equal(registered) {
				t.Errorf("entry %s %s registered at %v, want %v", e.Name, e.Spec, e.Registered, registered)
			}
			at := "-"
			if !e.Last.At.IsZero() {
				at = e.Last.At.Sub(registered).String()
			}
			name := "a"
			if e.Name == z {
				name = "z"
			}
			out = append(out, fmt.Sprintf("%s %s %s %v %v %s:%d last(%s %s %s %d)", name, e.Spec, e.Kind, e.Tasks, e.Queues,
				e.Host, e.PID, at, e.Last.Task, e.Last.Group, e.Last.GroupCount))
		}
		return out
	}
	want := func(what string, lines ...string) {
		t.Helper()
		if got := list(); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", lines) {
			t.Fatalf("%s: PeriodicEntries\n%q\nwant\n%q", what, got, lines)
		}
	}

	want("before any record")
	tick(a, "@every 1m", brokers.PeriodicTick{At: registered, Task: "task_1"})
	want("a tick of an entry not recorded")
	record(entry(z, "@every 1m", "task", "t"))
	record(entry(a, "@hourly", "chord", "m", "cb"))
	record(entry(a, "@every 1m", "chain", "x", "y"))
	want("recorded",
		"a @every 1m chain [x y] [q] host:42 last(0s task_1  0)",
		"a @hourly chord [m cb] [q] host:42 last(-   0)",
		"z @every 1m task [t] [q] host:42 last(-   0)")

	tick(a, "@hourly", brokers.PeriodicTick{At: registered.Add(time.Hour), Group: "group_1", GroupCount: 3})
	tick(a, "@every 1m", brokers.PeriodicTick{At: registered.Add(time.Minute), Task: "task_2"})
	again := entry(a, "@every 1m", "task", "x")
	again.Last = brokers.PeriodicTick{At: registered.Add(time.Hour), Task: "task_ignored"} // not recorded
	record(again)
	want("ticks recorded, an entry recorded again",
		"a @every 1m task [x] [q] host:42 last(1m0s task_2  0)",
		"a @hourly chord [m cb] [q] host:42 last(1h0m0s  group_1 3)",
		"z @every 1m task [t] [q] host:42 last(-   0)")
}

// claimLease calls ClaimLease, failing the test on an error.
func claimLease(t *testing.T, b Broker, k string, lease, keep time.Duration) brokers.ClaimResult {
	t.Helper()
	r, err := b.ClaimLease(context.Background(), k, lease, keep)
	if err != nil {
		t.Fatalf("ClaimLease(%s): %v", k, err)
	}
	return r
}

// A lease is won once, held against every other caller, and completed by
// its holder only.
func testClaimLease(t *testing.T, b Broker) {
	ctx := context.Background()
	k := queueName(t, "lease")
	first := claimLease(t, b, k, time.Minute, time.Hour)
	if first.Status != brokers.ClaimWon || first.TakenOver || first.Token == "" {
		t.Fatalf("first ClaimLease = %+v, want won, not taken over, with a token", first)
	}
	second := claimLease(t, b, k, time.Minute, time.Hour)
	if second.Status != brokers.ClaimHeld || second.Remaining <= 0 || second.Remaining > time.Minute || second.Token != "" {
		t.Fatalf("ClaimLease of a held key = %+v, want held for at most 1m", second)
	}
	if err := b.CompleteClaim(ctx, k, "not-the-token"); !errors.Is(err, brokers.ErrLeaseLost) {
		t.Fatalf("CompleteClaim with another token: %v, want ErrLeaseLost", err)
	}
	if err := b.CompleteClaim(ctx, queueName(t, "never"), first.Token); !errors.Is(err, brokers.ErrLeaseLost) {
		t.Fatalf("CompleteClaim of a key never claimed: %v, want ErrLeaseLost", err)
	}
	must(t, "CompleteClaim", b.CompleteClaim(ctx, k, first.Token))
	must(t, "CompleteClaim again", b.CompleteClaim(ctx, k, first.Token))
	if r := claimLease(t, b, k, time.Minute, time.Hour); r.Status != brokers.ClaimDone {
		t.Fatalf("ClaimLease of a completed key = %+v, want done", r)
	}

	// One winner among concurrent claimers; the others are told it is held.
	k2 := queueName(t, "race")
	var won, held atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			r, err := b.ClaimLease(ctx, k2, time.Minute, time.Hour)
			switch {
			case err != nil:
			case r.Status == brokers.ClaimWon:
				won.Add(1)
			case r.Status == brokers.ClaimHeld:
				held.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 || held.Load() != 19 {
		t.Fatalf("20 concurrent ClaimLease: %d won, %d held; want 1 and 19", won.Load(), held.Load())
	}
}

// A lease that ends without CompleteClaim goes to the next caller, taken
// over; the earlier holder can no longer complete the key. (The first
// lease is short, for the test to see it end; the one that takes over is
// long, for the test to see it held however slow the machine.)
func testClaimTakeOver(t *testing.T, b Broker) {
	ctx := context.Background()
	clk := stopClock(t, b)
	const lease = 200 * time.Millisecond
	k := queueName(t, "takeover")
	claimedAt := clk.Now()
	first := claimLease(t, b, k, lease, time.Minute)
	if first.Status != brokers.ClaimWon {
		t.Fatalf("first ClaimLease = %+v, want won", first)
	}
	var next brokers.ClaimResult
	takenOver := func() bool {
		next = claimLease(t, b, k, leaseDuration, time.Minute)
		if next.Status == brokers.ClaimHeld && next.Remaining > lease {
			t.Fatalf("ClaimLease = %+v, held for longer than the lease (%v)", next, lease)
		}
		if next.Status == brokers.ClaimWon && clk.before(claimedAt.Add(lease)) {
			t.Fatalf("lease taken over %v after it was won, before it ended (%v)", clk.Since(claimedAt), lease)
		}
		return next.Status == brokers.ClaimWon
	}
	// A lease runs through its last millisecond.
	clk.advanceTo(claimedAt.Add(lease))
	if !takenOver() {
		if clk.before(claimedAt.Add(lease+time.Millisecond)) && next.Status != brokers.ClaimHeld {
			t.Fatalf("ClaimLease in the lease's last millisecond = %+v, want held", next)
		}
		clk.advanceTo(claimedAt.Add(lease + time.Millisecond))
		eventually(t, "the lease taken over once it ended", takenOver)
	}
	if !next.TakenOver || next.Token == "" || next.Token == first.Token {
		t.Fatalf("ClaimLease after the lease ended = %+v, want won with a new token, taken over", next)
	}
	if err := b.CompleteClaim(ctx, k, first.Token); !errors.Is(err, brokers.ErrLeaseLost) {
		t.Fatalf("CompleteClaim by the holder whose lease was taken over: %v, want ErrLeaseLost", err)
	}
	if r := claimLease(t, b, k, leaseDuration, time.Minute); r.Status != brokers.ClaimHeld {
		t.Fatalf("ClaimLease during the new lease = %+v, want held", r)
	}
	must(t, "CompleteClaim by the new holder", b.CompleteClaim(ctx, k, next.Token))
	if r := claimLease(t, b, k, leaseDuration, time.Minute); r.Status != brokers.ClaimDone {
		t.Fatalf("ClaimLease after CompleteClaim = %+v, want done", r)
	}
}

// A key's record, completed or not, ends keep after it was taken, however
// sooner its lease ended: the key is then free, and not taken over.
func testClaimKeep(t *testing.T, b Broker) {
	ctx := context.Background()
	clk := stopClock(t, b)
	const lease, keep = 300 * time.Millisecond, 500 * time.Millisecond
	var k string
	var claimedAt time.Time
	var first brokers.ClaimResult
	for attempt := 1; ; attempt++ {
		k = queueName(t, "keep")
		claimedAt = clk.Now()
		first = claimLease(t, b, k, lease, keep)
		err := b.CompleteClaim(ctx, k, first.Token)
		if err == nil {
			break
		}
		// A machine that held the test up past the lease makes the
		// completion come too late: that run shows nothing.
		if !errors.Is(err, brokers.ErrLeaseLost) || clk.Since(claimedAt) < lease || attempt == 3 {
			t.Fatalf("CompleteClaim %v after the claim (lease %v): %v", clk.Since(claimedAt), lease, err)
		}
	}
	var again brokers.ClaimResult
	won := func() bool {
		again = claimLease(t, b, k, lease, keep)
		if again.Status == brokers.ClaimWon && clk.before(claimedAt.Add(keep)) {
			t.Fatalf("completed key won again %v after it was taken, before its record ended (%v)", clk.Since(claimedAt), keep)
		}
		return again.Status == brokers.ClaimWon
	}
	clk.advanceTo(claimedAt.Add(keep - time.Millisecond))
	if !won() {
		if clk.before(claimedAt.Add(keep)) && again.Status != brokers.ClaimDone {
			t.Fatalf("ClaimLease of a completed key 1ms before its record ends = %+v, want done", again)
		}
		clk.advanceTo(claimedAt.Add(keep))
		eventually(t, "a completed key free once its record ended", won)
	}
	if again.TakenOver {
		t.Fatalf("ClaimLease of a key whose record ended = %+v, want not taken over", again)
	}
	if err := b.CompleteClaim(ctx, k, first.Token); !errors.Is(err, brokers.ErrLeaseLost) {
		t.Fatalf("CompleteClaim with the token of a record that ended: %v, want ErrLeaseLost", err)
	}
}

// Holds sees a task while its queue holds it: pending, scheduled, running;
// not once it was acknowledged or archived.
func testClaimHolds(t *testing.T, b Broker) {
	ctx := context.Background()
	q := queueName(t, "q")
	holds := func(what string, sigs []*tasks.Signature, want ...bool) {
		t.Helper()
		got, err := b.Holds(ctx, sigs...)
		if err != nil {
			t.Fatalf("Holds %s: %v", what, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("Holds %s = %v, want %v", what, got, want)
		}
	}
	a, c := newSig(q, "a"), newSig(q, "c")
	later := newSig(q, "later")
	eta := time.Now().Add(time.Hour)
	later.ETA = &eta
	holds("before any publish", []*tasks.Signature{a, c, later}, false, false, false)
	publish(t, b, a, later)
	holds("pending and scheduled", []*tasks.Signature{a, c, later}, true, false, true)
	d := fetchOne(t, b, q)
	holds("running", []*tasks.Signature{a}, true)
	if err := b.Archive(ctx, d, "dead"); err != nil {
		t.Fatalf("Archive: %v", err)
	}
	holds("archived", []*tasks.Signature{a}, false)
	publish(t, b, c)
	ack(t, b, fetchOne(t, b, q))
	holds("acknowledged", []*tasks.Signature{c, later}, false, true)
	if _, err := b.Holds(ctx, &tasks.Signature{UUID: "task_x", Name: "x"}); !errors.Is(err, brokers.ErrNoQueue) {
		t.Fatalf("Holds of a task with no RoutingKey: %v, want ErrNoQueue", err)
	}
}

func testQueueInfo(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	sigs := newSigs(q, "t", 4)
	later := newSig(q, "later")
	eta := time.Now().Add(time.Hour)
	later.ETA = &eta
	publish(t, b, append(sigs, later)...)
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 4, Scheduled: 1})

	ds := fetch(t, b, []string{q}, 3)
	if err := b.Retry(ctx, ds[1], time.Now().Add(time.Hour), "again"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if err := b.Archive(ctx, ds[2], "dead"); err != nil {
		t.Fatalf("Archive: %v", err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1, Active: 1, Scheduled: 1, Retry: 1, Archived: 1})
	if err := b.PauseQueue(ctx, q); err != nil {
		t.Fatalf("PauseQueue: %v", err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Paused: true, Pending: 1, Active: 1, Scheduled: 1, Retry: 1, Archived: 1})

	queues, err := b.Queues(ctx)
	if err != nil {
		t.Fatalf("Queues: %v", err)
	}
	found := false
	for _, name := range queues {
		found = found || name == q
	}
	if !found {
		t.Fatalf("Queues() = %v, want it to include %s", queues, q)
	}
	ack(t, b, ds[0])
}

func testListTasksPaging(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	sigs := newSigs(q, "t", 5)
	publish(t, b, sigs...)

	page := func(offset, limit int) []string {
		t.Helper()
		infos, err := b.ListTasks(ctx, q, brokers.StatusPending, offset, limit)
		if err != nil {
			t.Fatalf("ListTasks(%d, %d): %v", offset, limit, err)
		}
		for _, in := range infos {
			if in.Status != brokers.StatusPending || in.Queue != q {
				t.Fatalf("listed %s with status %s queue %s, want pending in %s", in.Signature.UUID, in.Status, in.Queue, q)
			}
		}
		return infoUUIDs(infos)
	}
	wantOrder(t, "page (1, 2)", page(1, 2), []string{sigs[1].UUID, sigs[2].UUID})
	wantOrder(t, "page (4, 10)", page(4, 10), []string{sigs[4].UUID})
	wantOrder(t, "page (10, 2)", page(10, 2), []string{})

	// Scheduled tasks by time, whatever the publishing order.
	var sched []*tasks.Signature
	for _, h := range []int{3, 1, 2} {
		sig := newSig(q, fmt.Sprintf("in_%dh", h))
		eta := time.Now().Add(time.Duration(h) * time.Hour)
		sig.ETA = &eta
		sched = append(sched, sig)
	}
	publish(t, b, sched...)
	wantOrder(t, "scheduled by time", infoUUIDs(list(t, b, q, brokers.StatusScheduled)),
		[]string{sched[1].UUID, sched[2].UUID, sched[0].UUID})
}

func testPendingAndDelayedTasks(t *testing.T, s *suite) {
	defaultQueue := ""
	b := s.broker(t, func(c *config.Config) { defaultQueue = c.DefaultQueue })
	ctx := context.Background()
	q, other := queueName(t, "q"), queueName(t, "other")
	pending := newSigs(q, "p", 2)
	eta := time.Now().Add(time.Hour)
	s1, s2 := newSig(q, "s1"), newSig(other, "s2")
	s1.ETA, s2.ETA = &eta, &eta
	retry := newSig(q, "r")
	publish(t, b, retry)
	d := fetchOne(t, b, q)
	if err := b.Retry(ctx, d, eta, "later"); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	publish(t, b, append(pending, s1, s2)...)

	got, err := b.GetPendingTasks(q)
	if err != nil {
		t.Fatalf("GetPendingTasks: %v", err)
	}
	wantOrder(t, "GetPendingTasks", sigUUIDs(got), sigUUIDs(pending))
	sameSignature(t, "GetPendingTasks[0]", got[0], pending[0])

	delayed, err := b.GetDelayedTasks()
	if err != nil {
		t.Fatalf("GetDelayedTasks: %v", err)
	}
	have := make(map[string]bool)
	for _, sig := range delayed {
		have[sig.UUID] = true
	}
	for _, want := range []*tasks.Signature{s1, s2, retry} {
		if !have[want.UUID] {
			t.Fatalf("GetDelayedTasks() lacks %s (%s)", want.UUID, want.Name)
		}
	}
	for _, p := range pending {
		if have[p.UUID] {
			t.Fatalf("GetDelayedTasks() lists the pending task %s", p.UUID)
		}
	}

	def := newSig(defaultQueue, "in_default")
	publish(t, b, def)
	got, err = b.GetPendingTasks("")
	if err != nil {
		t.Fatalf(`GetPendingTasks(""): %v`, err)
	}
	wantOrder(t, `GetPendingTasks("") (the default queue)`, sigUUIDs(got), []string{def.UUID})

	// Every task, however many (machinery's LRANGE 0 -1): past any page.
	many := queueName(t, "many")
	all := newSigs(many, "m", 2500)
	publish(t, b, all...)
	got, err = b.GetPendingTasks(many)
	if err != nil {
		t.Fatalf("GetPendingTasks of %d tasks: %v", len(all), err)
	}
	wantOrder(t, "GetPendingTasks of 2500 tasks", sigUUIDs(got), sigUUIDs(all))
}

func testClose(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()

	ch := goFetch(ctx, b, []string{q}, 1)
	stillBlocked(t, ch, "empty queue")
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := result(t, ch, "after Close")
	if !errors.Is(r.err, brokers.ErrClosed) || len(r.ds) != 0 {
		t.Fatalf("Fetch blocked at Close: %d deliveries, err %v; want none and ErrClosed", len(r.ds), r.err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := b.Publish(context.Background(), newSig(q, "late")); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("Publish after Close: err = %v, want ErrClosed", err)
	}
	if _, err := b.Fetch(ctx, []string{q}, 1, nil); !errors.Is(err, brokers.ErrClosed) {
		t.Fatalf("Fetch after Close: err = %v, want ErrClosed", err)
	}
}
