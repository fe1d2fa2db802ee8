package rdb

import (
	"context"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// Forward, run by a queue's maintainer, wakes the workers of a name whose
// group came due by time, except while the queue is paused: its workers
// would not take the batch, and would be woken again at every tick.
func TestForwardWakesAggregatorsUnlessPaused(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	s := New(client, Options{KeyPrefix: srv.Prefix(t), ResultsExpireIn: time.Hour, LeaseDuration: 10 * time.Second}, false)
	defer s.Close()
	ctx := context.Background()
	const queue = "q"
	qk := s.keys.queue(queue)
	policy := brokers.AggregationPolicy{GracePeriod: time.Millisecond}
	if err := s.AnnounceAggregators(ctx, []string{queue}, map[string]brokers.AggregationPolicy{"m": policy}, time.Minute); err != nil {
		t.Fatal(err)
	}
	member := &tasks.Signature{UUID: "m1", Name: "m", RoutingKey: queue, AggregationKey: "k"}
	if err := s.Publish(ctx, []*tasks.Signature{member}, true); err != nil {
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
	if _, err := s.Forward(ctx, queue); err != nil {
		t.Fatal(err)
	}
	if n := tokens(); n != 0 {
		t.Fatalf("%d wake-up tokens after forward on a paused queue, want 0", n)
	}
	if err := client.Del(ctx, qk.paused).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forward(ctx, queue); err != nil {
		t.Fatal(err)
	}
	if n := tokens(); n != 1 {
		t.Fatalf("%d wake-up tokens after forward with the group due, want 1", n)
	}
}
