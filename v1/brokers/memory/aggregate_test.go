package memory_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/brokers/memory"
	"github.com/b6192125/machinist/v1/tasks"
)

// What the conformance suite leaves to the memory broker: these tests run
// on a fake clock, so due times are exact.

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

type aggFixture struct {
	t     *testing.T
	b     *memory.Broker
	clk   *clock.Fake
	names *iface.TaskNames
	n     int
}

// newAggFixture returns a broker on a fake clock at t0 whose queue "q"
// aggregates "notify" by policy, announced for a day.
func newAggFixture(t *testing.T, policy iface.AggregationPolicy) *aggFixture {
	t.Helper()
	clk := clock.NewFake(t0)
	b := memory.New(memory.Options{LeaseDuration: time.Hour, RecoverInterval: time.Hour, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { _ = b.Close() })
	f := &aggFixture{t: t, b: b, clk: clk, names: iface.NewTaskNames([]string{"notify"})}
	f.announce(policy)
	return f
}

func (f *aggFixture) announce(policy iface.AggregationPolicy) {
	f.t.Helper()
	if err := f.b.AnnounceAggregators(context.Background(), []string{"q"}, map[string]iface.AggregationPolicy{"notify": policy}, 24*time.Hour); err != nil {
		f.t.Fatal(err)
	}
}

// publish publishes n members of key and returns their UUIDs.
func (f *aggFixture) publish(key string, n int) []string {
	f.t.Helper()
	var uuids []string
	for range n {
		f.n++
		sig := &tasks.Signature{UUID: fmt.Sprintf("task_%d", f.n), Name: "notify", RoutingKey: "q", AggregationKey: key}
		if err := f.b.Publish(context.Background(), sig); err != nil {
			f.t.Fatal(err)
		}
		uuids = append(uuids, sig.UUID)
	}
	return uuids
}

func (f *aggFixture) claim() *iface.Batch {
	f.t.Helper()
	batch, err := f.b.ClaimBatch(context.Background(), []string{"q"}, f.names)
	if err != nil {
		f.t.Fatal(err)
	}
	return batch
}

func (f *aggFixture) wantClaim(what string, want []string) *iface.Batch {
	f.t.Helper()
	batch := f.claim()
	if batch == nil {
		f.t.Fatalf("%s: no batch, want %v", what, want)
	}
	var got []string
	for _, m := range batch.Members {
		got = append(got, m.UUID)
	}
	if !slices.Equal(got, want) {
		f.t.Fatalf("%s: batch of %v, want %v", what, got, want)
	}
	return batch
}

func (f *aggFixture) wantNoClaim(what string) {
	f.t.Helper()
	if batch := f.claim(); batch != nil {
		f.t.Fatalf("%s: took a batch of %d members, want none", what, len(batch.Members))
	}
}

func (f *aggFixture) wantNextDue(what string, want time.Time) {
	f.t.Helper()
	got, err := f.b.NextDue(context.Background(), []string{"q"}, f.names)
	if err != nil || !got.Equal(want) {
		f.t.Fatalf("%s: NextDue = %v, %v; want %v", what, got, err, want)
	}
}

// A group holding more than MaxSize members gives its oldest MaxSize; the
// rest are due by their own oldest member.
func TestAggregationBatchTakesAtMostMaxSize(t *testing.T) {
	t.Parallel()
	f := newAggFixture(t, iface.AggregationPolicy{MaxSize: 3, MaxDelay: time.Minute})
	first := f.publish("k", 1)
	f.wantNoClaim("one of three")
	f.wantNextDue("one of three", t0.Add(time.Minute))
	f.clk.Advance(10 * time.Second)
	later := f.publish("k", 3)
	other := f.publish("other", 1)
	f.wantNextDue("full since its third member joined", t0.Add(10*time.Second))
	f.wantClaim("the full group", append(first, later[:2]...))
	info, err := f.b.Aggregations(context.Background(), "q")
	if err != nil || len(info) != 2 || info[0].Key != "k" || info[0].Size != 1 ||
		!info[0].Due.Equal(t0.Add(70*time.Second)) || !info[0].Oldest.Equal(t0.Add(10*time.Second)) || info[1].Key != "other" {
		t.Fatalf("Aggregations = %+v, %v; want k of 1 due at +70s, then other", info, err)
	}
	f.wantNoClaim("the rest before its own MaxDelay")
	f.clk.Advance(time.Minute)
	f.wantClaim("the rest, at its MaxDelay", later[2:])
	f.wantClaim("the other group", other)
	f.wantNextDue("no group left: the first batch's lease end", t0.Add(10*time.Second+time.Hour))
}

// A group is due by the policy last announced for its name.
func TestAggregationPolicyChangeReschedules(t *testing.T) {
	t.Parallel()
	f := newAggFixture(t, iface.AggregationPolicy{GracePeriod: time.Hour})
	m := f.publish("k", 1)
	f.wantNextDue("by the first policy", t0.Add(time.Hour))
	f.announce(iface.AggregationPolicy{GracePeriod: time.Second})
	f.wantNextDue("by the new policy", t0.Add(time.Second))
	f.announce(iface.AggregationPolicy{MaxSize: 2})
	f.wantNextDue("by size only, not full", time.Time{})
	f.announce(iface.AggregationPolicy{MaxSize: 2, GracePeriod: time.Second})
	f.clk.Advance(time.Second)
	f.wantClaim("after the grace period", m)
}

// An aggregate that cannot be published leaves the batch held and
// unchanged.
func TestAggregationCompleteBatchRefusedAggregate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newAggFixture(t, iface.AggregationPolicy{MaxSize: 2})
	batch := f.wantClaim("the full group", f.publish("k", 2))
	if err := f.b.Publish(ctx, &tasks.Signature{UUID: "task_other", Name: "x", RoutingKey: "q"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		aggregate *tasks.Signature
		want      error
	}{
		{&tasks.Signature{UUID: "task_other", Name: "agg", RoutingKey: "q"}, iface.ErrDuplicateTask},
		{&tasks.Signature{UUID: "task_agg", Name: "agg"}, iface.ErrNoQueue},
		{&tasks.Signature{UUID: "task_agg", Name: "agg", RoutingKey: "q", AggregationKey: "k"}, iface.ErrNoAggregator},
		{nil, tasks.ErrNilSignature},
	} {
		if err := f.b.CompleteBatch(ctx, batch, tc.aggregate); !errors.Is(err, tc.want) {
			t.Fatalf("CompleteBatch(%+v) = %v, want %v", tc.aggregate, err, tc.want)
		}
		if !batch.Lease.Valid() {
			t.Fatalf("CompleteBatch(%+v) lost the lease", tc.aggregate)
		}
	}
	if info, _ := f.b.QueueInfo(ctx, "q"); info.Aggregating != 2 || info.Pending != 1 {
		t.Fatalf("QueueInfo = %+v, want 2 aggregating, 1 pending", info)
	}
	if err := f.b.CompleteBatch(ctx, batch, &tasks.Signature{UUID: "task_agg", Name: "agg", RoutingKey: "q"}); err != nil {
		t.Fatal(err)
	}
	if info, _ := f.b.QueueInfo(ctx, "q"); info.Aggregating != 0 || info.Pending != 2 {
		t.Fatalf("QueueInfo = %+v, want 0 aggregating, 2 pending", info)
	}
}

// Members are held, so Holds reports them, but listed under no status but
// archived.
func TestAggregationMembersHeldNotListed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newAggFixture(t, iface.AggregationPolicy{MaxSize: 2})
	waiting := f.publish("a", 1)
	f.wantClaim("the full group", f.publish("b", 2))
	for _, st := range []iface.TaskStatus{iface.StatusPending, iface.StatusActive, iface.StatusScheduled, iface.StatusRetry, iface.StatusArchived} {
		if list, err := f.b.ListTasks(ctx, "q", st, 0, 0); err != nil || len(list) != 0 {
			t.Fatalf("ListTasks(%s) = %d tasks, %v; want none", st, len(list), err)
		}
	}
	held, err := f.b.Holds(ctx, &tasks.Signature{UUID: waiting[0], RoutingKey: "q"}, &tasks.Signature{UUID: "task_2", RoutingKey: "q"})
	if err != nil || !held[0] || !held[1] {
		t.Fatalf("Holds = %v, %v; want both held", held, err)
	}
}

// NextDue counts a leased batch when its lease ends: it is taken again then.
func TestAggregationNextDueOfALeasedBatch(t *testing.T) {
	t.Parallel()
	f := newAggFixture(t, iface.AggregationPolicy{MaxSize: 2})
	members := f.publish("k", 2)
	batch := f.wantClaim("the full group", members)
	f.wantNextDue("a leased batch", t0.Add(time.Hour))
	f.clk.Advance(time.Hour)
	again := f.wantClaim("after its lease", members)
	if again.ID != batch.ID || again.Recovered != 1 {
		t.Fatalf("batch %s (Recovered %d), want %s (Recovered 1)", again.ID, again.Recovered, batch.ID)
	}
}

// A paused queue gives no batch, and a nil names takes nothing.
func TestAggregationClaimSkips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newAggFixture(t, iface.AggregationPolicy{MaxSize: 2})
	members := f.publish("k", 2)
	if batch, err := f.b.ClaimBatch(ctx, []string{"q"}, nil); batch != nil || err != nil {
		t.Fatalf("ClaimBatch with nil names = %v, %v; want nil, nil", batch, err)
	}
	if err := f.b.PauseQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	f.wantNoClaim("paused")
	if err := f.b.ResumeQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	f.wantClaim("resumed", members)
}

// A closed broker fails every Aggregator method with ErrClosed.
func TestAggregationClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newAggFixture(t, iface.AggregationPolicy{MaxSize: 2})
	batch := f.wantClaim("the full group", f.publish("k", 2))
	_ = f.b.Close()
	_, claimErr := f.b.ClaimBatch(ctx, []string{"q"}, f.names)
	_, dueErr := f.b.NextDue(ctx, []string{"q"}, f.names)
	_, aggErr := f.b.Aggregations(ctx, "q")
	for what, err := range map[string]error{
		"AnnounceAggregators": f.b.AnnounceAggregators(ctx, []string{"q"}, map[string]iface.AggregationPolicy{"notify": {MaxSize: 2}}, time.Minute),
		"ClaimBatch":          claimErr,
		"NextDue":             dueErr,
		"Aggregations":        aggErr,
		"CompleteBatch":       f.b.CompleteBatch(ctx, batch, &tasks.Signature{UUID: "task_agg", Name: "agg", RoutingKey: "q"}),
		"RetryBatch":          f.b.RetryBatch(ctx, batch, t0, "x"),
		"ArchiveBatch":        f.b.ArchiveBatch(ctx, batch, "x"),
	} {
		if !errors.Is(err, iface.ErrClosed) {
			t.Errorf("%s on a closed broker: %v, want ErrClosed", what, err)
		}
	}
}

// AnnounceAggregators refuses a policy that would never release a group.
func TestAggregationAnnounceValidates(t *testing.T) {
	t.Parallel()
	f := newAggFixture(t, iface.AggregationPolicy{MaxSize: 2})
	err := f.b.AnnounceAggregators(context.Background(), []string{"q"}, map[string]iface.AggregationPolicy{"notify": {}}, time.Minute)
	if err == nil {
		t.Fatal("AnnounceAggregators of an empty policy: nil error")
	}
}
