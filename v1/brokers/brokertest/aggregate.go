package brokertest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// The aggregation suite: brokers.Aggregator's contract (see the top of
// iface/aggregate.go).

func aggregationTests() []struct {
	name string
	run  func(*testing.T, *suite)
} {
	return []struct {
		name string
		run  func(*testing.T, *suite)
	}{
		{"AggregationNeedsAnAggregator", testAggregationNeedsAnAggregator},
		{"AggregationMaxSize", testAggregationMaxSize},
		{"AggregationGracePeriod", testAggregationGracePeriod},
		{"AggregationGracePeriodMovesOn", testAggregationGraceMovesOn},
		{"AggregationMaxDelay", testAggregationMaxDelay},
		{"AggregationCompleteBatch", testAggregationCompleteBatch},
		{"AggregationCompleteBatchToAnotherQueue", testAggregationCompleteToAnotherQueue},
		{"AggregationLeaseEndsBatchTakenAgainWhole", testAggregationLeaseEnds},
		{"AggregationExtendBatch", testAggregationExtendBatch},
		{"AggregationRetryBatch", testAggregationRetryBatch},
		{"AggregationArchiveBatch", testAggregationArchiveBatch},
		{"AggregationETA", testAggregationETA},
		{"AggregationConcurrentClaimers", testAggregationConcurrentClaimers},
		{"AggregationPaused", testAggregationPaused},
		{"AggregationWaitDue", testAggregationWaitDue},
		{"AggregationWaitDueByTime", testAggregationWaitDueByTime},
		{"AggregationWaitDueByName", testAggregationWaitDueByName},
		{"AggregationStrandedWithoutAggregator", testAggregationStranded},
		{"AggregationWaitDueOnEveryQueue", testAggregationWaitDueOnEveryQueue},
	}
}

// aggregation returns the broker of an aggregation test, its queue, and the
// names of the worker the test plays: those of "notify".
func aggregation(t *testing.T, s *suite) (Broker, string, *brokers.TaskNames) {
	return s.broker(t), queueName(t, "q"), brokers.NewTaskNames([]string{"notify"})
}

// member returns a member of the group name/key of queue.
func member(queue, name, key string) *tasks.Signature {
	sig := newSig(queue, name)
	sig.AggregationKey = key
	return sig
}

// fullGroupOfTwo announces "notify" with MaxSize 2 on queue and publishes a full
// group of two members of key.
func fullGroupOfTwo(t *testing.T, b Broker, queue, key string) []*tasks.Signature {
	t.Helper()
	announce(t, b, queue, map[string]brokers.AggregationPolicy{"notify": {MaxSize: 2}})
	members := []*tasks.Signature{member(queue, "notify", key), member(queue, "notify", key)}
	publish(t, b, members...)
	return members
}

func announce(t *testing.T, b Broker, queue string, policies map[string]brokers.AggregationPolicy) {
	t.Helper()
	must(t, "AnnounceAggregators", b.AnnounceAggregators(context.Background(), []string{queue}, policies, time.Minute))
}

// claim calls ClaimBatch once, failing the test on an error.
func claim(t *testing.T, b Broker, names *brokers.TaskNames, queues ...string) *brokers.Batch {
	t.Helper()
	batch, err := b.ClaimBatch(context.Background(), queues, names)
	if err != nil {
		t.Fatalf("ClaimBatch(%v): %v", queues, err)
	}
	return batch
}

// claimEventually polls ClaimBatch until it returns a batch.
func claimEventually(t *testing.T, b Broker, names *brokers.TaskNames, queues ...string) *brokers.Batch {
	t.Helper()
	var batch *brokers.Batch
	eventually(t, fmt.Sprintf("a batch of %v to be due", queues), func() bool {
		batch = claim(t, b, names, queues...)
		return batch != nil
	})
	return batch
}

func wantBatch(t *testing.T, what string, batch *brokers.Batch, queue, name, key string, members ...*tasks.Signature) {
	t.Helper()
	if batch == nil {
		t.Fatalf("%s: no batch, want one of %d members", what, len(members))
	}
	if batch.ID == "" || batch.Queue != queue || batch.Name != name || batch.Key != key {
		t.Fatalf("%s: batch %q of %q %q/%q, want an ID and %q %q/%q", what, batch.ID, batch.Queue, batch.Name, batch.Key, queue, name, key)
	}
	if batch.Lease == nil || !batch.Lease.Valid() {
		t.Fatalf("%s: batch without a valid lease", what)
	}
	wantOrder(t, what, sigUUIDs(batch.Members), sigUUIDs(members))
	for i, m := range batch.Members {
		sameSignature(t, fmt.Sprintf("%s: member %d", what, i), m, members[i])
	}
}

// claimNotBefore claims a batch once, failing the test when it takes one
// while clk is before at; it returns the batch it took (after at: the
// machine held the test up), or nil.
func claimNotBefore(t *testing.T, clk *storeClock, b Broker, names *brokers.TaskNames, at time.Time, queues ...string) *brokers.Batch {
	t.Helper()
	batch := claim(t, b, names, queues...)
	if batch != nil && clk.before(at) {
		t.Fatalf("ClaimBatch took batch %s of %d members %v before it was due", batch.ID, len(batch.Members), at.Sub(clk.Now()))
	}
	return batch
}

func noBatch(t *testing.T, what string, b Broker, names *brokers.TaskNames, queues ...string) {
	t.Helper()
	if batch := claim(t, b, names, queues...); batch != nil {
		t.Fatalf("%s: ClaimBatch took batch %s of %d members (%s/%s), want none", what, batch.ID, len(batch.Members), batch.Name, batch.Key)
	}
}

func testAggregationNeedsAnAggregator(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")
	m := member(q, "notify", "alice")
	if err := b.Publish(context.Background(), m); !errors.Is(err, brokers.ErrNoAggregator) {
		t.Fatalf("Publish of a member no worker aggregates: %v, want ErrNoAggregator", err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{})
	// An announcement on another queue, or of another name, does not do.
	other := queueName(t, "other")
	must(t, "AnnounceAggregators", b.AnnounceAggregators(context.Background(), []string{other}, map[string]brokers.AggregationPolicy{"notify": {MaxSize: 2}}, time.Minute))
	announce(t, b, q, map[string]brokers.AggregationPolicy{"index": {MaxSize: 2}})
	if err := b.Publish(context.Background(), m); !errors.Is(err, brokers.ErrNoAggregator) {
		t.Fatalf("Publish of a member aggregated on another queue only: %v, want ErrNoAggregator", err)
	}
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {MaxSize: 2}})
	publish(t, b, m)
	wantSizes(t, b, q, brokers.QueueInfo{Aggregating: 1})
	if err := b.Publish(context.Background(), m); !errors.Is(err, brokers.ErrDuplicateTask) {
		t.Fatalf("Publish of a member already waiting: %v, want ErrDuplicateTask", err)
	}
	// A member is no pending task: Fetch does not take it.
	fetchNone(t, b, q)
	// An announcement lasts its ttl.
	const ttl = 100 * time.Millisecond
	clk := stopClock(t, b)
	expiring := queueName(t, "expiring")
	before := clk.Now()
	must(t, "AnnounceAggregators", b.AnnounceAggregators(context.Background(), []string{expiring}, map[string]brokers.AggregationPolicy{"notify": {MaxSize: 2}}, ttl))
	after := clk.Now()
	clk.advanceTo(before.Add(ttl - time.Millisecond))
	err := b.Publish(context.Background(), member(expiring, "notify", "bob"))
	if clk.before(before.Add(ttl)) && err != nil {
		t.Fatalf("Publish of a member 1ms before the announcement ends: %v", err)
	}
	clk.advanceTo(after.Add(ttl))
	eventually(t, "the announcement to end", func() bool {
		return errors.Is(b.Publish(context.Background(), member(expiring, "notify", "bob")), brokers.ErrNoAggregator)
	})
}

func testAggregationMaxSize(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {MaxSize: 3}})
	var alice []*tasks.Signature
	for i := 0; i < 7; i++ {
		alice = append(alice, member(q, "notify", "alice"))
	}
	bob := member(q, "notify", "bob")
	publish(t, b, alice[0], alice[1], bob)
	noBatch(t, "two members of 3", b, names, q)
	if due, err := b.NextDue(context.Background(), []string{q}, names); err != nil || !due.IsZero() {
		t.Fatalf("NextDue of groups due by size only: %v, %v; want the zero time", due, err)
	}
	publish(t, b, alice[2])
	noBatch(t, "a full group, to a worker without its name", b, brokers.NewTaskNames([]string{"index"}), q)
	first := claim(t, b, names, q)
	wantBatch(t, "the full group", first, q, "notify", "alice", alice[:3]...)
	noBatch(t, "after the full group was taken", b, names, q)

	// Four more: a batch takes the oldest 3, the fourth waits.
	publish(t, b, alice[3:]...)
	second := claim(t, b, names, q)
	wantBatch(t, "the group refilled", second, q, "notify", "alice", alice[3:6]...)
	if second.ID == first.ID {
		t.Fatalf("two batches share ID %s", first.ID)
	}
	noBatch(t, "one member left", b, names, q)
	info := aggregations(t, b, q)
	if len(info) != 2 || info[0].Key != "alice" || info[0].Size != 1 || info[1].Key != "bob" || info[1].Size != 1 {
		t.Fatalf("Aggregations: %s, want alice (1) and bob (1)", describeAggregations(info))
	}
	wantSizes(t, b, q, brokers.QueueInfo{Aggregating: 8})
}

func testAggregationGracePeriod(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	clk := stopClock(t, b)
	const grace = 300 * time.Millisecond
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {GracePeriod: grace}})
	m1 := member(q, "notify", "alice")
	joined := clk.Now()
	publish(t, b, m1)
	published := clk.Now()
	due, err := b.NextDue(context.Background(), []string{q}, names)
	if err != nil {
		t.Fatalf("NextDue: %v", err)
	}
	between(t, "NextDue", due, joined.Add(grace), published.Add(grace))
	info := aggregations(t, b, q)
	if len(info) != 1 || info[0].Size != 1 || !near(info[0].Due, due, 5*time.Millisecond) {
		t.Fatalf("Aggregations: %s, want one group of 1 due %v", describeAggregations(info), due)
	}
	clk.advanceTo(joined.Add(grace - time.Millisecond))
	batch := claimNotBefore(t, clk, b, names, joined.Add(grace), q) // nil, unless the machine held the test up
	if batch == nil {
		clk.advanceTo(published.Add(grace))
		batch = claimEventually(t, b, names, q)
	}
	wantBatch(t, "after the grace period", batch, q, "notify", "alice", m1)
}

// testAggregationGraceMovesOn: a member that joins within the grace period
// moves the group's due time on; a broker may answer NextDue early (the
// Redis broker files a group by its first member), but ClaimBatch takes
// the group only a grace period after its newest member.
//
// The claim that must find nothing has to fall between the two members'
// grace periods' ends. A run in which the machine held the test up past
// that window shows nothing and is made again, with a new group.
func testAggregationGraceMovesOn(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	clk := stopClock(t, b)
	const grace = 400 * time.Millisecond
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {GracePeriod: grace}})
	for attempt := 1; ; attempt++ {
		key := fmt.Sprintf("alice%d", attempt)
		m1, m2 := member(q, "notify", key), member(q, "notify", key)
		publish(t, b, m1)
		clk.advance(grace / 2)
		// m2 joins between joined and published: its grace period ends
		// between joined + grace and published + grace.
		joined := clk.Now()
		publish(t, b, m2)
		published := clk.Now()
		info := aggregations(t, b, q)
		if len(info) != 1 || info[0].Size != 2 {
			t.Fatalf("Aggregations: %s, want one group of 2", describeAggregations(info))
		}
		between(t, "the group's due time", info[0].Due, joined.Add(grace), published.Add(grace))

		// Past the first member's grace period, before the second's.
		clk.advanceTo(published.Add(grace * 3 / 4))
		batch := claimNotBefore(t, clk, b, names, joined.Add(grace), q)
		if batch != nil {
			// Held up past the window: the claim shows nothing.
			if attempt == 3 {
				t.Fatalf("three runs held up past the window between the grace periods' ends; the last claimed %v after the newest member joined", clk.Since(joined))
			}
			must(t, "CompleteBatch", b.CompleteBatch(context.Background(), batch, newSig(q, "agg")))
			continue
		}
		due, err := b.NextDue(context.Background(), []string{q}, names)
		if err != nil || !near(due, info[0].Due, 5*time.Millisecond) {
			t.Fatalf("NextDue after a claim found the group early = %v, %v; want %v", due, err, info[0].Due)
		}
		clk.advanceTo(joined.Add(grace - time.Millisecond))
		if batch = claimNotBefore(t, clk, b, names, joined.Add(grace), q); batch == nil {
			clk.advanceTo(published.Add(grace))
			batch = claimEventually(t, b, names, q)
		}
		wantBatch(t, "after the newest member's grace period", batch, q, "notify", key, m1, m2)
		return
	}
}

func testAggregationMaxDelay(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	clk := stopClock(t, b)
	const maxDelay = 400 * time.Millisecond
	// The grace period alone would keep the group waiting while members
	// arrive more often than it; MaxDelay releases it, counted from when
	// the oldest joined, between first and joined.
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {MaxDelay: maxDelay, GracePeriod: time.Hour}})
	first := clk.Now()
	var joined time.Time
	var members []*tasks.Signature
	var batch *brokers.Batch
	for at := first; batch == nil && at.Before(first.Add(maxDelay)); at = at.Add(50 * time.Millisecond) {
		clk.advanceTo(at)
		m := member(q, "notify", "alice")
		publish(t, b, m)
		if members = append(members, m); len(members) == 1 {
			joined = clk.Now()
		}
		batch = claimNotBefore(t, clk, b, names, first.Add(maxDelay), q)
	}
	if batch == nil {
		clk.advanceTo(first.Add(maxDelay - time.Millisecond))
		batch = claimNotBefore(t, clk, b, names, first.Add(maxDelay), q)
	}
	if batch == nil {
		clk.advanceTo(joined.Add(maxDelay))
		batch = claimEventually(t, b, names, q)
	}
	wantBatch(t, "after MaxDelay", batch, q, "notify", "alice", members...)
}

func testAggregationCompleteBatch(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	ctx := context.Background()
	members := fullGroupOfTwo(t, b, q, "alice")
	batch := claim(t, b, names, q)
	wantBatch(t, "the full group", batch, q, "notify", "alice", members...)

	aggregate := newSig(q, "notify_many")
	must(t, "CompleteBatch", b.CompleteBatch(ctx, batch, aggregate))
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1})
	d := fetchOne(t, b, q)
	sameSignature(t, "the aggregate", d.Signature, aggregate)
	ack(t, b, d)
	wantSizes(t, b, q, brokers.QueueInfo{})
	if info := aggregations(t, b, q); len(info) != 0 {
		t.Fatalf("Aggregations after the batch completed: %s, want none", describeAggregations(info))
	}
	// The members are forgotten: their UUIDs can be published again.
	publish(t, b, members[0])
	wantSizes(t, b, q, brokers.QueueInfo{Aggregating: 1})
	// A batch is completed once.
	err := b.CompleteBatch(ctx, batch, newSig(q, "notify_many"))
	wantLost(t, "CompleteBatch of a completed batch", err, batch.Lease)
	wantSizes(t, b, q, brokers.QueueInfo{Aggregating: 1})
}

// An aggregate may go to another queue (on Redis Cluster, another slot:
// the broker hands it over in steps): it is published there once, and the
// batch's queue forgets the members.
func testAggregationCompleteToAnotherQueue(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	ctx := context.Background()
	other := queueName(t, "bulk")
	members := fullGroupOfTwo(t, b, q, "alice")
	batch := claim(t, b, names, q)
	wantBatch(t, "the full group", batch, q, "notify", "alice", members...)
	aggregate := newSig(other, "notify_many")
	must(t, "CompleteBatch to another queue", b.CompleteBatch(ctx, batch, aggregate))
	wantSizes(t, b, q, brokers.QueueInfo{})
	wantSizes(t, b, other, brokers.QueueInfo{Pending: 1})
	d := fetchOne(t, b, other)
	sameSignature(t, "the aggregate", d.Signature, aggregate)
	ack(t, b, d)
	if info := aggregations(t, b, q); len(info) != 0 {
		t.Fatalf("Aggregations after the batch completed: %s, want none", describeAggregations(info))
	}
	noBatch(t, "after the batch completed", b, names, q)
	// The members are forgotten: their UUIDs can be published again.
	publish(t, b, members[0])
	wantSizes(t, b, q, brokers.QueueInfo{Aggregating: 1})
	wantSizes(t, b, other, brokers.QueueInfo{})
}

func testAggregationLeaseEnds(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	ctx := context.Background()
	members := fullGroupOfTwo(t, b, q, "k")
	stale := claim(t, b, names, q)
	wantBatch(t, "the full group", stale, q, "notify", "k", members...)
	// More members wait meanwhile, in a group of their own.
	later := member(q, "notify", "k")
	publish(t, b, later)
	noBatch(t, "while its lease runs", b, names, q)
	endBatchLease(t, b, stale)

	// The worker holding it dies: when its lease ends the batch is taken
	// again whole, under a new lease; the member that joined later is not
	// in it.
	again := claimEventually(t, b, names, q)
	if again.ID != stale.ID || again.Recovered != 1 {
		t.Fatalf("batch taken again as %s (Recovered %d), want %s (Recovered 1)", again.ID, again.Recovered, stale.ID)
	}
	wantBatch(t, "the batch taken again", again, q, "notify", "k", members...)
	if again.Lease.Token() == stale.Lease.Token() {
		t.Fatal("the batch taken again has its first lease's token")
	}
	err := b.CompleteBatch(ctx, stale, newSig(q, "agg"))
	wantLost(t, "CompleteBatch under the ended lease", err, stale.Lease)
	wantSizes(t, b, q, brokers.QueueInfo{Aggregating: 3})
	must(t, "CompleteBatch", b.CompleteBatch(ctx, again, newSig(q, "agg")))
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1, Aggregating: 1})
}

// A batch lease's renewal runs LeaseDuration from when it is made, and the
// batch is not taken meanwhile; a stale holder's renewal is refused and
// leaves the new holder's lease alone.
func testAggregationExtendBatch(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	ctx := context.Background()
	members := fullGroupOfTwo(t, b, q, "k")
	batch := claim(t, b, names, q)
	wantBatch(t, "the full group", batch, q, "notify", "k", members...)
	first := batch.Lease.ExpiresAt()
	for i := range 3 {
		// Each renewal runs LeaseDuration from when it is made.
		waitUntil(time.Now().Add(5 * time.Millisecond))
		before := time.Now()
		must(t, "ExtendBatch", b.ExtendBatch(ctx, batch))
		if exp := batch.Lease.ExpiresAt(); !batch.Lease.Valid() || exp.Before(before.Add(leaseDuration)) || !exp.After(first) {
			t.Fatalf("renewal %d at %s: batch lease valid %v, expiring at %s; want LeaseDuration from the renewal, after %s",
				i, before, batch.Lease.Valid(), exp, first)
		}
		first = batch.Lease.ExpiresAt()
		noBatch(t, "while its lease is renewed", b, names, q)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Aggregating: 2})
	endBatchLease(t, b, batch)

	// Its holder dies: the batch is taken again, and the stale lease
	// cannot be renewed.
	again := claimEventually(t, b, names, q)
	if again.ID != batch.ID || again.Recovered != 1 {
		t.Fatalf("batch taken again as %s (Recovered %d), want %s (Recovered 1)", again.ID, again.Recovered, batch.ID)
	}
	wantLost(t, "ExtendBatch of the ended lease", b.ExtendBatch(ctx, batch), batch.Lease)
	must(t, "ExtendBatch of the new lease", b.ExtendBatch(ctx, again))
	must(t, "CompleteBatch", b.CompleteBatch(ctx, again, newSig(q, "agg")))
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1})
	wantLost(t, "ExtendBatch of a completed batch", b.ExtendBatch(ctx, again), again.Lease)
}

func testAggregationRetryBatch(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	clk := stopClock(t, b)
	ctx := context.Background()
	members := fullGroupOfTwo(t, b, q, "k")
	batch := claim(t, b, names, q)
	at := clk.Now().Add(300 * time.Millisecond)
	must(t, "RetryBatch", b.RetryBatch(ctx, batch, at, "the aggregator failed"))
	err := b.RetryBatch(ctx, batch, at, "again")
	wantLost(t, "RetryBatch of a batch given back", err, batch.Lease)
	due, err := b.NextDue(ctx, []string{q}, names)
	if err != nil || !near(due, at, time.Millisecond) {
		t.Fatalf("NextDue with a batch to retry = %v, %v; want %v", due, err, at)
	}
	clk.advanceTo(at.Add(-time.Millisecond))
	again := claimNotBefore(t, clk, b, names, at, q)
	if again == nil {
		clk.advanceTo(at)
		again = claimEventually(t, b, names, q)
	}
	if clk.before(at) {
		t.Fatal("the batch was taken again before its retry")
	}
	if again.ID != batch.ID || again.Failed != 1 {
		t.Fatalf("batch taken again as %s (Failed %d), want %s (Failed 1)", again.ID, again.Failed, batch.ID)
	}
	wantBatch(t, "the retried batch", again, q, "notify", "k", members...)
	wantSizes(t, b, q, brokers.QueueInfo{Aggregating: 2})
}

func testAggregationArchiveBatch(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	ctx := context.Background()
	members := fullGroupOfTwo(t, b, q, "k")
	batch := claim(t, b, names, q)
	must(t, "ArchiveBatch", b.ArchiveBatch(ctx, batch, "the aggregator panicked"))
	wantSizes(t, b, q, brokers.QueueInfo{Archived: 2})
	archived := list(t, b, q, brokers.StatusArchived)
	got := infoUUIDs(archived)
	sort.Strings(got)
	want := sigUUIDs(members)
	sort.Strings(want)
	wantOrder(t, "archived members", got, want)
	for _, info := range archived {
		if info.LastError != "the aggregator panicked" {
			t.Fatalf("archived member %s: LastError %q, want the reason", info.Signature.UUID, info.LastError)
		}
	}
	err := b.ArchiveBatch(ctx, batch, "again")
	wantLost(t, "ArchiveBatch of an archived batch", err, batch.Lease)
	// Requeued, they join their group again, in their first places: before
	// a member that joined meanwhile.
	later := member(q, "notify", "k")
	publish(t, b, later)
	n, err := b.RequeueArchived(ctx, q)
	if err != nil || n != 2 {
		t.Fatalf("RequeueArchived: %d, %v; want 2", n, err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Aggregating: 3})
	wantBatch(t, "the requeued members", claimEventually(t, b, names, q), q, "notify", "k", members...)
}

func testAggregationETA(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	clk := stopClock(t, b)
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {MaxSize: 2}})
	eta := clk.Now().Add(300 * time.Millisecond)
	later := member(q, "notify", "k")
	later.ETA = &eta
	now := member(q, "notify", "k")
	publish(t, b, later, now)
	published := clk.Now()
	// The member sent for later waits for its ETA (a machine that held
	// the test up may have let it come).
	if info := queueInfo(t, b, q); info.Scheduled+info.Aggregating != 2 || (info.Scheduled == 0 && clk.before(eta)) {
		t.Fatalf("QueueInfo = %+v, want 1 scheduled and 1 aggregating", info)
	}
	clk.advanceTo(eta.Add(-time.Millisecond))
	batch := claimNotBefore(t, clk, b, names, eta, q)
	if batch == nil {
		clk.advanceTo(eta)
		batch = claimEventually(t, b, names, q)
	}
	if clk.before(eta) {
		t.Fatal("a member joined its group before its ETA")
	}
	if published.After(eta) && len(batch.Members) == 2 && batch.Members[0].UUID == later.UUID {
		// Its ETA had come before the publish returned (a machine that
		// held the publish up): it may have joined first.
		wantBatch(t, "with the member due when it was sent", batch, q, "notify", "k", later, now)
		return
	}
	wantBatch(t, "with the member that became due", batch, q, "notify", "k", now, later)
}

func testAggregationConcurrentClaimers(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	ctx := context.Background()
	const keys, perKey = 20, 5
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {MaxSize: perKey}})
	var all []*tasks.Signature
	for k := 0; k < keys; k++ {
		for i := 0; i < perKey; i++ {
			all = append(all, member(q, "notify", fmt.Sprintf("key%d", k)))
		}
	}
	publish(t, b, all...)
	var mu sync.Mutex
	seen := map[string]int{}
	var batches int
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for {
				batch, err := b.ClaimBatch(ctx, []string{q}, names)
				if err != nil {
					t.Errorf("ClaimBatch: %v", err)
					return
				}
				if batch == nil {
					return
				}
				if err := b.CompleteBatch(ctx, batch, newSig(q, "agg")); err != nil {
					t.Errorf("CompleteBatch: %v", err)
					return
				}
				mu.Lock()
				batches++
				for _, m := range batch.Members {
					seen[m.UUID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if batches != keys {
		t.Fatalf("%d batches, want %d", batches, keys)
	}
	for _, m := range all {
		if seen[m.UUID] != 1 {
			t.Fatalf("member %s in %d batches, want 1", m.UUID, seen[m.UUID])
		}
	}
	wantSizes(t, b, q, brokers.QueueInfo{Pending: keys})
}

func aggregations(t *testing.T, b Broker, queue string) []*brokers.AggregationInfo {
	t.Helper()
	info, err := b.Aggregations(context.Background(), queue)
	if err != nil {
		t.Fatalf("Aggregations(%s): %v", queue, err)
	}
	return info
}

func describeAggregations(info []*brokers.AggregationInfo) string {
	s := "["
	for i, a := range info {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s/%s size %d due %v", a.Name, a.Key, a.Size, a.Due)
	}
	return s + "]"
}

// A paused queue's batches wait, as its pending tasks do.
func testAggregationPaused(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	ctx := context.Background()
	members := fullGroupOfTwo(t, b, q, "k")
	must(t, "PauseQueue", b.PauseQueue(ctx, q))
	noBatch(t, "a due group of a paused queue", b, names, q)
	if due, err := b.NextDue(ctx, []string{q}, names); err != nil || !due.IsZero() {
		t.Fatalf("NextDue of a paused queue = %v, %v; want the zero time", due, err)
	}
	must(t, "ResumeQueue", b.ResumeQueue(ctx, q))
	wantBatch(t, "after resuming", claim(t, b, names, q), q, "notify", "k", members...)
}

// WaitDue returns once a member fills a group, without waiting for max, and
// returns by max when nothing happens.
func testAggregationWaitDue(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	ctx := context.Background()
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {MaxSize: 2}})
	must(t, "WaitDue with nothing due", b.WaitDue(ctx, []string{q}, names, 50*time.Millisecond))

	woken := make(chan error, 1)
	go func() { woken <- b.WaitDue(ctx, []string{q}, names, time.Hour) }()
	publish(t, b, member(q, "notify", "k"), member(q, "notify", "k"))
	select {
	case err := <-woken:
		must(t, "WaitDue", err)
	case <-time.After(waitLong):
		t.Fatalf("WaitDue not woken %v after a member filled a group", waitLong)
	}
	if batch := claim(t, b, names, q); batch == nil {
		t.Fatal("no batch after WaitDue was woken")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.WaitDue(cctx, []string{q}, names, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitDue with an ended context: %v, want context.Canceled", err)
	}
}

// WaitDue returns when a group's due time comes (its grace period ends),
// with no member filling it: the broker watches the due times, so that a
// waiting worker need not poll for them.
func testAggregationWaitDueByTime(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	clk := stopClock(t, b)
	ctx := context.Background()
	const grace = 200 * time.Millisecond
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {GracePeriod: grace}})
	m := member(q, "notify", "k")
	publish(t, b, m)
	joined := clk.Now()
	woken := make(chan error, 1)
	go func() {
		// A spurious wake-up (the group filed early) is allowed: wait
		// again until a batch is due, as a worker does.
		for {
			if err := b.WaitDue(ctx, []string{q}, names, time.Hour); err != nil || clk.Since(joined) >= grace {
				woken <- err
				return
			}
		}
	}()
	clk.advanceTo(joined.Add(grace))
	select {
	case err := <-woken:
		must(t, "WaitDue", err)
	case <-time.After(waitLong):
		t.Fatalf("WaitDue not woken %v after a group's grace period (%v) ended", waitLong, grace)
	}
	wantBatch(t, "after WaitDue returned", claimEventually(t, b, names, q), q, "notify", "k", m)
}

// WaitDue wakes a waiter of the name whose group is due, even while a
// waiter of another name waits too (a wake-up it took would leave the
// right one asleep).
func testAggregationWaitDueByName(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	ctx := context.Background()
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {MaxSize: 2}, "other": {MaxSize: 2}})
	others := brokers.NewTaskNames([]string{"other"})
	wait := func(names *brokers.TaskNames) chan error {
		woken := make(chan error, 1)
		go func() { woken <- b.WaitDue(ctx, []string{q}, names, time.Hour) }()
		return woken
	}
	woken := func(what string, ch chan error) {
		t.Helper()
		select {
		case err := <-ch:
			must(t, what, err)
		case <-time.After(waitLong):
			t.Fatalf("%s not woken %v after its name's group filled", what, waitLong)
		}
	}
	notifyWoken := wait(names)
	otherWoken := wait(others)
	publish(t, b, member(q, "other", "k"), member(q, "other", "k"))
	woken("WaitDue of other's worker", otherWoken)
	if batch := claim(t, b, others, q); batch == nil || batch.Name != "other" {
		t.Fatalf("claim of other's worker: %+v, want a batch of other", batch)
	}
	publish(t, b, member(q, "notify", "k"), member(q, "notify", "k"))
	woken("WaitDue of notify's worker", notifyWoken) // or earlier, spuriously
}

// testAggregationStranded: when no worker alive aggregates a task name any
// more (its announcement ended), the members of its due groups, and of its
// batches whose lease ended, go to pending as plain tasks, never before the
// announcement ended (a worker fails them, or tries them again); a member
// tried again joins its group again.
func testAggregationStranded(t *testing.T, s *suite) {
	b, q, names := aggregation(t, s)
	clk := stopClock(t, b)
	ctx := context.Background()
	const grace, ttl = 50 * time.Millisecond, 500 * time.Millisecond
	policy := map[string]brokers.AggregationPolicy{"notify": {MaxSize: 2, GracePeriod: grace}}
	announced := clk.Now()
	must(t, "AnnounceAggregators", b.AnnounceAggregators(ctx, []string{q}, policy, ttl))
	full := []*tasks.Signature{member(q, "notify", "full"), member(q, "notify", "full")}
	publish(t, b, full...)
	batch := claim(t, b, names, q) // its worker dies
	wantBatch(t, "the full group", batch, q, "notify", "full", full...)
	waiting := member(q, "notify", "waiting") // due in 50ms, never taken
	publish(t, b, waiting)
	publish(t, b, newSig(q, "plain"))

	// The plain task comes first; the waiting member once the announcement
	// ended; the batch's members once its lease ended too.
	ack(t, b, fetchOne(t, b, q))
	clk.advanceTo(announced.Add(ttl - time.Millisecond))
	if info := queueInfo(t, b, q); info.Pending > 0 && clk.before(announced.Add(ttl)) {
		t.Fatalf("QueueInfo 1ms before the announcement ends = %+v, want no member stranded yet", info)
	}
	clk.advanceTo(announced.Add(ttl))
	stranded := fetchOne(t, b, q)
	if clk.before(announced.Add(ttl)) {
		t.Fatalf("member stranded %s after the announcement, before it ended (%v)", clk.Since(announced), ttl)
	}
	endBatchLease(t, b, batch)
	must(t, "Archive", b.Archive(ctx, stranded, "no worker alive aggregates it"))
	var fromBatch []*brokers.Delivery
	for len(fromBatch) < 2 {
		fromBatch = append(fromBatch, fetch(t, b, []string{q}, 2-len(fromBatch))...)
	}
	for i, d := range append(fromBatch, stranded) {
		sameSignature(t, "stranded member", d.Signature, append(full, waiting)[i])
		if d.Retried != 0 || d.Recovered != 0 {
			t.Fatalf("stranded member delivered with Retried %d Recovered %d, want 0 0", d.Retried, d.Recovered)
		}
	}
	wantLost(t, "CompleteBatch of a stranded batch", b.CompleteBatch(ctx, batch, newSig(q, "agg")), batch.Lease)

	// An aggregator is back: a member tried again joins its group and is
	// taken in a batch, once its grace period ended.
	announce(t, b, q, policy)
	retried := clk.Now()
	must(t, "Retry", b.Retry(ctx, fromBatch[0], retried, "no worker alive aggregates it"))
	ack(t, b, fromBatch[1])
	clk.advanceTo(retried.Add(grace))
	again := claimEventually(t, b, names, q)
	wantBatch(t, "the member tried again", again, q, "notify", "full", full[0])
	must(t, "CompleteBatch", b.CompleteBatch(ctx, again, newSig(q, "agg")))
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1, Archived: 1})
}

// testAggregationWaitDueOnEveryQueue: a WaitDue on several queues is woken
// by a group filled on any of them, the last included (on Redis Cluster
// the queues live in different slots).
func testAggregationWaitDueOnEveryQueue(t *testing.T, s *suite) {
	b, q1, names := aggregation(t, s)
	q2 := queueName(t, "second")
	ctx := context.Background()
	for _, q := range []string{q1, q2} {
		announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {MaxSize: 2}})
	}
	woken := make(chan error, 1)
	go func() { woken <- b.WaitDue(ctx, []string{q1, q2}, names, time.Hour) }()
	publish(t, b, member(q2, "notify", "k"), member(q2, "notify", "k"))
	select {
	case err := <-woken:
		must(t, "WaitDue", err)
	case <-time.After(waitLong):
		t.Fatalf("WaitDue on two queues not woken %v after a member filled a group of the second", waitLong)
	}
	if batch := claim(t, b, names, q2); batch == nil {
		t.Fatal("no batch after WaitDue was woken")
	}
}
