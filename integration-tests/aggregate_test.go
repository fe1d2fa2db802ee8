package integration_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	machinery "github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/backends/result"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// Members sent with an aggregation key run as one task per batch, built by
// the registered aggregator; each member's result is its aggregate's, and
// every member is in exactly one aggregate.
func TestAggregationRunsOneTaskPerBatch(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		ctx := testCtx(t)
		var mu sync.Mutex
		ran := map[string][]string{} // aggregate UUID → member UUIDs
		if err := s.RegisterTask("notify_many", func(ctx context.Context, members []string) (int64, error) {
			mu.Lock()
			defer mu.Unlock()
			ran[tasks.SignatureFromContext(ctx).UUID] = members
			return int64(len(members)), nil
		}); err != nil {
			t.Fatal(err)
		}
		err := s.RegisterAggregator("notify", machinery.AggregationPolicy{MaxSize: 10, GracePeriod: 200 * time.Millisecond},
			func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
				uuids := make([]string, len(members))
				for i, m := range members {
					if m.AggregationKey != key {
						return nil, fmt.Errorf("member %s of key %q in a batch of %q", m.UUID, m.AggregationKey, key)
					}
					uuids[i] = m.UUID
				}
				return &tasks.Signature{Name: "notify_many", Args: []tasks.Arg{{Type: "[]string", Value: uuids}}}, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		// No worker aggregates yet: a member is refused at once.
		if _, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "notify", AggregationKey: "alice"}); !errors.Is(err, brokers.ErrNoAggregator) {
			t.Fatalf("SendTask of a member with no worker running: %v, want ErrNoAggregator", err)
		}
		w := s.NewWorker("aggregator", 4)
		launch(t, w)
		<-w.Started()

		var results []*result.AsyncResult
		for i := 0; i < 30; i++ {
			key := "alice"
			if i%6 == 5 {
				key = "bob"
			}
			r, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "notify", AggregationKey: key})
			if err != nil {
				t.Fatalf("member %d: %v", i, err)
			}
			results = append(results, r)
		}
		for _, r := range results {
			out, err := r.GetWithContext(ctx, poll)
			if err != nil {
				t.Fatalf("member %s: %v", r.Signature.UUID, err)
			}
			if n := out[0].Int(); n < 1 || n > 10 {
				t.Fatalf("member %s: its aggregate had %d members, want 1 to 10", r.Signature.UUID, n)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]int{}
		var sizes []int
		for _, members := range ran {
			sizes = append(sizes, len(members))
			for _, m := range members {
				seen[m]++
			}
		}
		for _, r := range results {
			if seen[r.Signature.UUID] != 1 {
				t.Fatalf("member %s ran in %d aggregates, want 1", r.Signature.UUID, seen[r.Signature.UUID])
			}
		}
		// Full groups go as 10; a group whose sends paused for the grace
		// period goes with fewer (a slow machine may pause anywhere).
		total := 0
		for _, n := range sizes {
			if n < 1 || n > 10 {
				t.Fatalf("aggregate sizes %v, want 1 to 10 members each", sizes)
			}
			total += n
		}
		if total != 30 {
			t.Fatalf("aggregate sizes %v add up to %d, want the 30 members", sizes, total)
		}
	})
}

// An aggregator that keeps failing has its batch tried again, then its
// members archived: their results are FAILURE with the reason; nothing is
// lost and nothing hangs.
func TestFailingAggregatorArchivesTheMembers(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p, func(c *config.Config) { c.AggregatorRetries = 1 })
		ctx := testCtx(t)
		var calls sync.Map
		if err := s.RegisterAggregator("notify", machinery.AggregationPolicy{MaxSize: 3},
			func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
				n, _ := calls.LoadOrStore(key, new(int))
				*n.(*int)++
				if *n.(*int) == 1 {
					return nil, errors.New("the aggregator failed")
				}
				panic("the aggregator panicked")
			}); err != nil {
			t.Fatal(err)
		}
		w := s.NewWorker("aggregator", 1)
		launch(t, w)
		<-w.Started()
		results := sendMembers(ctx, t, s, "k", 3)
		for _, r := range results {
			_, err := r.GetWithContext(ctx, poll)
			if err == nil || !strings.Contains(err.Error(), "panicked") || !strings.Contains(err.Error(), "2 times") {
				t.Fatalf("member %s: %v, want the aggregator's failure, after 2 tries", r.Signature.UUID, err)
			}
		}
		archived, err := s.GetBroker().(brokers.Inspector).ListTasks(ctx, config.DefaultQueueName, brokers.StatusArchived, 0, 10)
		if err != nil || len(archived) != 3 {
			t.Fatalf("archived: %d, %v; want the 3 members", len(archived), err)
		}
	})
}

// A group filled by its last member is built at once: the member's publish
// wakes the worker, which is not left to find it at its next look, nor
// woken by the maintainer's next forward (both here a minute away).
func TestAggregationOfAFullGroupIsPrompt(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p, func(c *config.Config) {
			if c.Redis == nil {
				c.Redis = &config.RedisConfig{}
			}
			c.Redis.NormalTasksPollPeriod = 60000
			c.Redis.DelayedTasksPollPeriod = 60000
		})
		ctx := testCtx(t)
		if err := s.RegisterTask("count", func(members []string) (int64, error) { return int64(len(members)), nil }); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterAggregator("notify", machinery.AggregationPolicy{MaxSize: 3}, countMembers("")); err != nil {
			t.Fatal(err)
		}
		w := s.NewWorker("aggregator", 2)
		launch(t, w)
		<-w.Started()
		last := sendMembers(ctx, t, s, "k", 3)[2]
		out, err := last.GetWithContext(ctx, poll)
		if err != nil || out[0].Int() != 3 {
			t.Fatalf("the full group's aggregate: %v, %v; want 3 members, before the worker's next look", out, err)
		}
	})
}

// An aggregate may go to another queue, consumed by other workers (on
// Redis Cluster another slot: the broker hands it over in steps); each
// member's result is still its aggregate's.
func TestAggregateToAnotherQueue(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		s := bareServer(t, p)
		ctx := testCtx(t)
		const bulk = "bulk"
		ranOn := make(chan string, 4)
		if err := s.RegisterTask("count", func(ctx context.Context, members []string) (int64, error) {
			ranOn <- tasks.SignatureFromContext(ctx).RoutingKey
			return int64(len(members)), nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.RegisterAggregator("notify", machinery.AggregationPolicy{MaxSize: 3}, countMembers(bulk)); err != nil {
			t.Fatal(err)
		}
		for _, w := range []*machinery.Worker{s.NewWorker("aggregator", 1), s.NewCustomQueueWorker("bulk", 1, bulk)} {
			launch(t, w)
			<-w.Started()
		}
		results := sendMembers(ctx, t, s, "k", 6)
		for _, r := range results {
			out, err := r.GetWithContext(ctx, poll)
			if err != nil || out[0].Int() != 3 {
				t.Fatalf("member %s: %v, %v; want its aggregate's 3 members", r.Signature.UUID, out, err)
			}
		}
		for range 2 {
			if q := <-ranOn; q != bulk {
				t.Fatalf("an aggregate ran from queue %q, want %q", q, bulk)
			}
		}
		// Once both queues are empty, any aggregate published twice has
		// run: none has.
		in := s.GetBroker().(brokers.Inspector)
		waitFor(t, "both queues to be empty", func() bool {
			for _, q := range []string{config.DefaultQueueName, bulk} {
				info, err := in.QueueInfo(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if info.Pending+info.Active+info.Scheduled+info.Retry+info.Aggregating > 0 {
					return false
				}
			}
			return true
		})
		select {
		case q := <-ranOn:
			t.Fatalf("a third aggregate ran (from %q), want 2", q)
		default:
		}
	})
}

// Members whose aggregating process is gone are not left waiting: when
// their group is due and no worker alive aggregates their task, a worker of
// the queue (here another Server's, without the aggregator) tries each
// again, then fails it saying why; waiting on one returns that failure.
func TestMembersWithoutAnAggregatorFail(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		shared := sharedPair(t, p)
		fast := func(c *config.Config) {
			c.LeaseDuration = time.Second // the aggregator's announcement lives as long
			c.UnregisteredTaskTries = 2
			c.UnregisteredTaskDelay = 10 * time.Millisecond
		}
		ctx := testCtx(t)
		aggregating := bareServer(t, shared, fast)
		var calls sync.Map
		if err := aggregating.RegisterAggregator("notify", machinery.AggregationPolicy{MaxSize: 10, MaxDelay: 100 * time.Millisecond},
			func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
				calls.Store(key, true)
				return &tasks.Signature{Name: "notify_many"}, nil
			}); err != nil {
			t.Fatal(err)
		}
		w := aggregating.NewWorker("aggregator", 1)
		stop := launch(t, w)
		<-w.Started()
		if err := stop(); err != nil {
			t.Fatalf("stopping the aggregating worker: %v", err)
		}
		results := sendMembers(ctx, t, aggregating, "k", 2) // accepted: the announcement lives on for a second
		other := bareServer(t, shared, fast)
		if err := other.RegisterTask("other", func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		launch(t, other.NewWorker("other", 1))
		for _, r := range results {
			_, err := r.GetWithContext(ctx, poll)
			if err == nil || !strings.Contains(err.Error(), `no worker alive aggregates task "notify"`) || !strings.Contains(err.Error(), "2 tries") {
				t.Fatalf("member %s: %v, want a failure saying no worker aggregates it, after 2 tries", r.Signature.UUID, err)
			}
		}
		if _, ok := calls.Load("k"); ok {
			t.Fatal("the aggregator ran after its worker stopped")
		}
	})
}

// sendMembers sends n members of task "notify" with aggregation key key
// through s, and returns their results.
func sendMembers(ctx context.Context, t *testing.T, s *machinery.Server, key string, n int) []*result.AsyncResult {
	t.Helper()
	results := make([]*result.AsyncResult, n)
	for i := range results {
		r, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "notify", AggregationKey: key})
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		results[i] = r
	}
	return results
}

// countMembers is an aggregator whose aggregate is task "count" of the
// members' UUIDs, sent to queue (the members' when "").
func countMembers(queue string) func(context.Context, string, []*tasks.Signature) (*tasks.Signature, error) {
	return func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
		ids := make([]string, len(members))
		for i, m := range members {
			ids[i] = m.UUID
		}
		return &tasks.Signature{Name: "count", RoutingKey: queue, Args: []tasks.Arg{{Type: "[]string", Value: ids}}}, nil
	}
}

// TestAggregationMemberGetIsWoken: a member's Get is woken when the batch
// it joined is built (its state then names the aggregate), then when the
// aggregate finishes: with an hour between polls it returns within the
// test's deadline. On a Cluster results only poll.
func TestAggregationMemberGetIsWoken(t *testing.T) {
	forEachQueuedPair(t, func(t *testing.T, p pair) {
		if p.name == "cluster" {
			t.Skip("on a Cluster, a result's wait polls")
		}
		s := bareServer(t, p)
		ctx := testCtx(t)
		if err := s.RegisterTask("count", func(members []string) (int64, error) { return int64(len(members)), nil }); err != nil {
			t.Fatal(err)
		}
		err := s.RegisterAggregator("member", machinery.AggregationPolicy{MaxSize: 3},
			func(ctx context.Context, key string, members []*tasks.Signature) (*tasks.Signature, error) {
				uuids := make([]string, len(members))
				for i, m := range members {
					uuids[i] = m.UUID
				}
				return &tasks.Signature{Name: "count", Args: []tasks.Arg{{Type: "[]string", Value: uuids}}}, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		w := s.NewWorker("aggregator", 2)
		launch(t, w)
		<-w.Started()
		send := func() *result.AsyncResult {
			r, err := s.SendTaskWithContext(ctx, &tasks.Signature{Name: "member", AggregationKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		// The first member's Get waits while its group is not full.
		first := send()
		type got struct {
			out []reflect.Value
			err error
		}
		waited := make(chan got, 1)
		go func() {
			out, err := first.GetWithContext(ctx, time.Hour)
			waited <- got{out, err}
		}()
		send()
		send()
		g := <-waited
		if g.err != nil || len(g.out) != 1 || g.out[0].Int() != 3 {
			t.Fatalf("member %s: %v, %v; want its aggregate of 3", first.Signature.UUID, g.out, g.err)
		}
	})
}
