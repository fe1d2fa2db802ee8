package rdb

import (
	"context"
	"errors"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
	"github.com/b6192125/machinist/internal/rdb/transport/transporttest"
	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestPublishesEndAtTheirDeadline: a publish returns at its deadline
// while Redis does not answer, saying whether it may have been sent: a
// publish whose call went out may have been (and is, once Redis answers);
// one whose call waited behind busy lanes was not (and is not).
func TestPublishesEndAtTheirDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	proxy := redistest.StartProxy(t, srv.Addr())
	client := goredis.NewClient(&goredis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	s := New(client, Options{KeyPrefix: srv.Prefix(t), ResultsExpireIn: time.Hour, LeaseDuration: 10 * time.Second}, false)
	t.Cleanup(func() { _ = s.Close() })
	t.Cleanup(proxy.Unstall) // before s.Close, which waits for the lanes
	ctx := context.Background()
	const queue = "q"
	sig := func(id string) []*tasks.Signature {
		return []*tasks.Signature{{UUID: id, Name: "n", RoutingKey: queue}}
	}
	if err := s.Publish(ctx, PublishParams{Tasks: sig("first"), Pending: true}); err != nil { // the queue known, its shards read
		t.Fatal(err)
	}

	proxy.Stall()
	err := transporttest.ReturnsBy(t, 300*time.Millisecond, proxy.Unstall, func(ctx context.Context) error {
		return s.Publish(ctx, PublishParams{Tasks: sig("sent"), Pending: true})
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrMaybeSent) || errors.Is(err, store.ErrNotSent) {
		t.Errorf("publish whose call went out: %v, want context.DeadlineExceeded and ErrMaybeSent only", err)
	}
	// Its call holds a lane until Redis answers: with every other lane
	// held, the next publish waits behind them.
	hold, free := transporttest.LaneHolder(t, s.batch, queue)
	for range transport.Lanes - 1 {
		hold()
	}
	err = transporttest.ReturnsBy(t, 300*time.Millisecond, func() { free(); proxy.Unstall() }, func(ctx context.Context) error {
		return s.Publish(ctx, PublishParams{Tasks: sig("unsent"), Pending: true})
	})
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, store.ErrNotSent) || errors.Is(err, store.ErrMaybeSent) {
		t.Errorf("publish whose call waited for a lane: %v, want context.DeadlineExceeded and ErrNotSent only", err)
	}
	proxy.Unstall()
	free()
	// Through the lanes again, after the held calls.
	if err := s.Publish(ctx, PublishParams{Tasks: sig("last"), Pending: true}); err != nil {
		t.Fatal(err)
	}
	pending, err := srv.Client(t).LRange(ctx, s.keys.queue(queue).pending, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, id := range pending {
		got[id] = true
	}
	if !got["sent"] || got["unsent"] || !got["last"] {
		t.Errorf("pending %v: want sent (its reply was held up) and last, not unsent (never sent)", pending)
	}
}
