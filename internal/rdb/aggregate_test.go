package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Forward, run by a queue's maintainer, wakes the workers of a name whose
// group came due by time, except while the queue is paused: its workers
// would not take the batch, and would be woken again at every tick.
func TestForwardWakesAggregatorsUnlessPaused(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	const queue = "q"
	qk := s.keys.queue(queue)
	policy := store.AggregationPolicy{GracePeriod: time.Millisecond}
	if err := s.AnnounceAggregators(ctx, []string{queue}, map[string]store.AggregationPolicy{"m": policy}, time.Minute); err != nil {
		t.Fatal(err)
	}
	member := &tasks.Signature{UUID: "m1", Name: "m", RoutingKey: queue, AggregationKey: "k"}
	if err := s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{member}, Pending: true}); err != nil {
		t.Fatal(err)
	}
	<-time.After(5 * time.Millisecond) // past the grace period
	tokens := func() int64 {
		t.Helper()
		n, err := client.LLen(ctx, qk.aggNotify("m")).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := client.Set(ctx, qk.paused, 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward(ctx, queue, 0); err != nil {
		t.Fatal(err)
	}
	if n := tokens(); n != 0 {
		t.Fatalf("%d wake-up tokens after forward on a paused queue, want 0", n)
	}
	if err := client.Del(ctx, qk.paused).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward(ctx, queue, 0); err != nil {
		t.Fatal(err)
	}
	if n := tokens(); n != 1 {
		t.Fatalf("%d wake-up tokens after forward with the group due, want 1", n)
	}
}

// On Redis Cluster an aggregate bound for another queue (another slot) is
// handed over in steps; a worker that dies after any of them leaves a
// batch that the next worker finishes with the same aggregate, never
// built again: no member lost, the aggregate published once. While handed
// over, the batch is neither retried nor stranded.
func TestHandOverSurvivesDeathAfterEachStep(t *testing.T) {
	t.Parallel()
	cluster := redistest.SharedCluster(t)
	prefix := cluster.Prefix(t)
	ctx := context.Background()
	const lease = 300 * time.Millisecond
	newStore := func(t *testing.T) *Store {
		s := New(cluster.Client(t), Options{KeyPrefix: prefix, ResultsExpireIn: time.Hour, LeaseDuration: lease,
			ArchiveMaxAge: time.Hour, ArchiveMaxSize: 100}, false)
		t.Cleanup(func() { s.Close() })
		return s
	}
	for step := 1; step <= 3; step++ {
		t.Run(fmt.Sprintf("died after step %d", step), func(t *testing.T) {
			t.Parallel()
			from, to := fmt.Sprintf("from%d", step), fmt.Sprintf("to%d", step)
			dead, next := newStore(t), newStore(t)
			names := store.NewTaskNames([]string{"m"})
			policies := map[string]store.AggregationPolicy{"m": {MaxSize: 2}}
			if err := dead.AnnounceAggregators(ctx, []string{from}, policies, lease); err != nil {
				t.Fatal(err)
			}
			var members []*tasks.Signature
			for i := range 2 {
				m := &tasks.Signature{UUID: fmt.Sprintf("m%d-%d", step, i), Name: "m", RoutingKey: from, AggregationKey: "k"}
				members = append(members, m)
			}
			if err := dead.Publish(ctx, PublishParams{Tasks: members}); err != nil {
				t.Fatal(err)
			}
			b, err := dead.ClaimBatch(ctx, []string{from}, names)
			if err != nil || b == nil {
				t.Fatalf("ClaimBatch = %v, %v; want the full group", b, err)
			}
			died := errors.New("killed")
			dead.handOverStep = func(s int) error {
				if s == step {
					return died
				}
				return nil
			}
			aggregate := &tasks.Signature{UUID: "aggregate_" + b.ID, Name: "m_many", RoutingKey: to}
			if err := dead.CompleteBatch(ctx, b, aggregate); !errors.Is(err, died) {
				t.Fatalf("CompleteBatch = %v, want the death after step %d", err, step)
			}
			if b.Aggregate == nil {
				t.Fatal("Batch.Aggregate not set once handed over")
			}
			if step == 1 {
				// Handed over: no longer given back, even by its holder.
				if err := dead.RetryBatch(ctx, b, time.Now(), "x"); !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("RetryBatch of a handed-over batch = %v, want ErrLeaseLost", err)
				}
			}

			// Its lease and its aggregator's announcement end: the
			// maintainer strands nothing of a handed-over batch.
			<-time.After(2 * lease)
			if f, err := next.Forward(ctx, from, 0); err != nil || f.Stranded != 0 {
				t.Fatalf("Forward with the aggregator gone = %+v, %v; want nothing stranded", f, err)
			}
			if err := next.AnnounceAggregators(ctx, []string{from}, policies, time.Minute); err != nil {
				t.Fatal(err)
			}
			again, err := next.ClaimBatch(ctx, []string{from}, names)
			switch {
			case err != nil:
				t.Fatal(err)
			case step == 3:
				if again != nil {
					t.Fatalf("batch %s taken again after it was forgotten", again.ID)
				}
			case again == nil || again.ID != b.ID || again.Aggregate == nil || again.Aggregate.UUID != aggregate.UUID:
				t.Fatalf("taken again: %+v; want batch %s with its aggregate %s", again, b.ID, aggregate.UUID)
			default:
				if err := next.CompleteBatch(ctx, again, again.Aggregate); err != nil {
					t.Fatalf("CompleteBatch of the batch taken again: %v", err)
				}
			}
			ds, err := next.Dequeue(ctx, to, 10, nil)
			if err != nil || len(ds) != 1 || ds[0].Signature.UUID != aggregate.UUID {
				t.Fatalf("the aggregate's queue gave %d tasks, %v; want the aggregate once", len(ds), err)
			}
			if _, err := next.Ack(ctx, ds[0], nil); err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{from, to} {
				info, err := next.QueueInfo(ctx, s)
				if err != nil {
					t.Fatal(err)
				}
				if info.Pending+info.Aggregating+info.Active != 0 {
					t.Fatalf("queue %s holds %+v after the aggregate ran, want nothing", s, info)
				}
			}
			// The hand-over, finished again, publishes nothing more.
			if again != nil {
				err := next.CompleteBatch(ctx, again, again.Aggregate)
				if !errors.Is(err, store.ErrLeaseLost) {
					t.Fatalf("CompleteBatch of a finished hand-over = %v, want ErrLeaseLost", err)
				}
			}
			// So is the dead worker's, had it lived on: its lease is gone.
			if err := dead.CompleteBatch(ctx, b, aggregate); !errors.Is(err, store.ErrLeaseLost) {
				t.Fatalf("the first worker's CompleteBatch after the hand-over = %v, want ErrLeaseLost", err)
			}
			if ds, err := next.Dequeue(ctx, to, 10, nil); err != nil || len(ds) != 0 {
				t.Fatalf("the aggregate's queue gave %d more tasks, %v; want none", len(ds), err)
			}
		})
	}
}

// TestForgetBatchDeletesEveryMember: forgetting a batch deletes every
// member's task hash, more than one DEL holds (lib/aggregate.lua's
// agg_forget_batch deletes them 1000 at a time), and uncounts them.
func TestForgetBatchDeletesEveryMember(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	for _, members := range []int{0, 1, 999, 1000, 1001, 2500} {
		t.Run(fmt.Sprint(members), func(t *testing.T) { forgetBatchOf(t, srv, members) })
	}
}

// forgetBatchOf forgets a batch of members members (forget_batch.lua) and
// checks that their task hashes, and only theirs, are gone and uncounted.
func forgetBatchOf(t *testing.T, srv *redistest.Server, members int) {
	client := srv.Client(t)
	ctx := context.Background()
	qk := (&keys{prefix: strings.TrimSuffix(srv.Prefix(t), ":")}).queue("q")
	ids := make([]string, members)
	pipe := client.Pipeline()
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d", i)
		pipe.HSet(ctx, qk.task+ids[i], "state", "aggregating")
	}
	pipe.HSet(ctx, qk.task+"other", "state", "aggregating")
	msg, err := json.Marshal(ids)
	if err != nil {
		t.Fatal(err)
	}
	batch, batches := qk.agg+"batch:b", qk.agg+"batches:m"
	pipe.HSet(ctx, batch, "name", "m", "key", "k", "msg", msg, "handed", "agg")
	pipe.ZAdd(ctx, batches, goredis.Z{Score: 1, Member: "b"})
	pipe.Set(ctx, qk.aggCount, members+1, 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if err := forgetBatchScript.Run(ctx, client, []string{batch, batches, qk.aggCount}, "b", qk.task).Err(); err != nil {
		t.Fatal(err)
	}
	left, err := client.Keys(ctx, qk.task+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(left, []string{qk.task + "other"}) {
		t.Fatalf("%d task hashes left (%v…), want the one of no batch", len(left), left[:min(3, len(left))])
	}
	if n := client.Get(ctx, qk.aggCount).Val(); n != "1" {
		t.Fatalf("count %s, want 1", n)
	}
	if n := client.Exists(ctx, batch).Val() + client.ZCard(ctx, batches).Val(); n != 0 {
		t.Fatal("the batch is still there")
	}
}

// TestForwardStrandsPastHandedBatches: batches handed over (hand_batch.lua)
// wait for a worker of their name, and the maintainer passes them over
// when the name's announcement has ended; however many there are, they do
// not keep it from stranding the name's due groups, nor the batches it
// reads with them. A run reads forward.lua's ARGV[2] due batches a name at
// most: a batch behind that many handed ones is not reached while they wait.
func TestForwardStrandsPastHandedBatches(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	ctx := context.Background()
	qk := (&keys{prefix: strings.TrimSuffix(srv.Prefix(t), ":")}).queue("q")
	const most = 3 // forward.lua's ARGV[2]
	batches := qk.agg + "batches:m"
	pipe := client.Pipeline()
	pipe.HSet(ctx, qk.aggPolicies, "m", "1 2 0 0") // its announcement ended long ago
	batch := func(id string, score float64, member string, handed bool) {
		pipe.HSet(ctx, qk.agg+"batch:"+id, "name", "m", "key", "h", "msg", `["`+member+`"]`)
		if handed {
			pipe.HSet(ctx, qk.agg+"batch:"+id, "handed", "agg")
		}
		pipe.HSet(ctx, qk.task+member, "state", "aggregating", "group", "m\nh", "msg", "{}")
		pipe.ZAdd(ctx, batches, goredis.Z{Score: score, Member: id})
	}
	batch("first", 0, "c", false) // read with the handed ones: stranded
	for i := range most + 1 {
		batch(fmt.Sprintf("handed%d", i), 1, fmt.Sprintf("x%d", i), true)
	}
	batch("behind", 2, "d", false) // behind more than ARGV[2] handed ones
	g := "m\nk"
	for i, id := range []string{"a", "b"} {
		pipe.HSet(ctx, qk.task+id, "state", "aggregating", "group", g, "msg", "{}")
		pipe.ZAdd(ctx, qk.agg+"group:"+g, goredis.Z{Score: float64(1000 * (i + 1)), Member: id})
	}
	pipe.SAdd(ctx, qk.aggGroups, g)
	pipe.ZAdd(ctx, qk.agg+"due:m", goredis.Z{Score: 1, Member: "k"})
	pipe.Set(ctx, qk.aggCount, 2+1+most+1+1, 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	forward := func() (moved, stranded int64) {
		t.Helper()
		v, err := forwardScript.Run(ctx, client, []string{qk.scheduled, qk.retry, qk.pending, qk.notify, qk.paused}, qk.task, most, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		moved, _, stranded, err = parseForwardReply(v)
		if err != nil {
			t.Fatal(err)
		}
		return moved, stranded
	}
	count := func() string { return client.Get(ctx, qk.aggCount).Val() }
	if moved, stranded := forward(); moved != 3 || stranded != 3 {
		t.Fatalf("forward moved %d and stranded %d members; want the first batch's and the due group's 3 past %d handed batches", moved, stranded, most+1)
	}
	if pending := client.LRange(ctx, qk.pending, 0, -1).Val(); !slices.Equal(pending, []string{"c", "a", "b"}) {
		t.Fatalf("pending %v, want c (its batch), a, b (their group)", pending)
	}
	left := client.ZRange(ctx, batches, 0, -1).Val()
	if len(left) != most+2 || !slices.Contains(left, "behind") || slices.Contains(left, "first") {
		t.Fatalf("batches left %v, want the %d handed over, kept for a worker of their name, and the one behind them", left, most+1)
	}
	if n := count(); n != "5" {
		t.Fatalf("count %s after stranding 3 of 8 members, want 5", n)
	}
	if moved, stranded := forward(); moved != 0 || stranded != 0 || count() != "5" {
		t.Fatalf("forward again moved %d, stranded %d, count %s; want nothing, 5", moved, stranded, count())
	}
}
