package redisbroker_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/redistest"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

func shardedConfig(shards map[string]int) *config.Config {
	cnf := (&config.Config{Redis: &config.RedisConfig{QueueShards: shards}}).WithDefaults()
	return cnf
}

// A sharded queue reads as one queue: its tasks spread over its shards,
// and every method that names the queue acts on all of them. Run on one
// server and on a cluster of three masters.
func TestShardedQueue(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"standalone", "cluster"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			var client goredis.UniversalClient
			var prefix string
			if where == "cluster" {
				c := redistest.SharedCluster(t)
				client, prefix = c.Client(t), c.Prefix(t)
			} else {
				srv := redistest.Shared(t)
				client, prefix = srv.Client(t), srv.Prefix(t)
			}
			testShardedQueue(t, client, prefix)
		})
	}
}

func testShardedQueue(t *testing.T, client goredis.UniversalClient, prefix string) {
	ctx := ctxFor(t)
	sender := newBroker(t, client, prefix, shardedConfig(map[string]int{"wide": 3}))
	// The worker's broker has no QueueShards: it reads the record.
	worker := newBroker(t, client, prefix, nil)

	const n = 90
	sent := map[string]bool{}
	var sigs []*tasks.Signature
	for i := range n {
		sig, _ := tasks.NewSignature("job", []tasks.Arg{{Type: "int64", Value: i}})
		sig.RoutingKey = "wide"
		sigs = append(sigs, sig)
		sent[sig.UUID] = true
	}
	if err := sender.PublishTasks(ctx, sigs...); err != nil {
		t.Fatal(err)
	}
	shards := map[string]int{}
	for _, sig := range sigs {
		if q, ok := brokers.ShardOf(sig.RoutingKey); sig.RoutingKey != "wide" && (!ok || q != "wide") {
			t.Fatalf("a sent task's RoutingKey is %q, want wide or a shard of it", sig.RoutingKey)
		}
		shards[sig.RoutingKey]++
	}
	if len(shards) != 3 {
		t.Fatalf("90 tasks went to %v, want three shards", shards)
	}
	for sh, k := range shards {
		if sh == "wide" {
			continue // the queue's name: all of its shards
		}
		info, err := sender.QueueInfo(ctx, sh)
		if err != nil || info.Pending != k {
			t.Fatalf("QueueInfo(%s) = %+v, %v; want %d pending", sh, info, err, k)
		}
	}
	wantInfo(t, worker, "wide", brokers.QueueInfo{Queue: "wide", Pending: n})
	qs, err := worker.Queues(ctx)
	if err != nil || !slices.Equal(qs, []string{"wide"}) {
		t.Fatalf("Queues() = %q, %v; want [wide]", qs, err)
	}

	// Listing pages through the shards, each task once.
	listed := map[string]bool{}
	for offset := 0; ; offset += 7 {
		page, err := worker.ListTasks(ctx, "wide", brokers.StatusPending, offset, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, info := range page {
			if listed[info.Signature.UUID] || !sent[info.Signature.UUID] {
				t.Fatalf("ListTasks at %d lists %s again, or a task not sent", offset, info.Signature.UUID)
			}
			listed[info.Signature.UUID] = true
		}
	}
	if len(listed) != n {
		t.Fatalf("ListTasks paged %d tasks, want %d", len(listed), n)
	}

	// Found in whichever shard holds it.
	last := sigs[n-1]
	info, err := worker.GetTask(ctx, "wide", last.UUID)
	if err != nil || info.Queue != last.RoutingKey || info.Signature.UUID != last.UUID {
		t.Fatalf("GetTask(wide, %s) = %+v, %v; want it in %s", last.UUID, info, err, last.RoutingKey)
	}
	if _, err := worker.GetTask(ctx, "wide", "nobody"); !errors.Is(err, brokers.ErrTaskNotFound) {
		t.Fatalf("GetTask of a task not sent: %v, want ErrTaskNotFound", err)
	}
	if _, _, err := worker.CancelTask(ctx, "wide", last.UUID, "not wanted", 0); err != nil {
		t.Fatal(err)
	}
	delete(sent, last.UUID)
	// A bar keeps a task out of whichever shard it would be sent to (ten
	// tasks: all three shards, but for a chance of 3^-9).
	for range 10 {
		barred, _ := tasks.NewSignature("job", nil)
		barred.RoutingKey = "wide"
		if _, _, err := worker.CancelTask(ctx, "wide", barred.UUID, "kept out", time.Minute); err != nil {
			t.Fatal(err)
		}
		var kept *brokers.CancelledError
		if err := sender.Publish(ctx, barred); !errors.As(err, &kept) {
			t.Fatalf("Publish of a task barred from its queue (to %s): %v, want a CancelledError", barred.RoutingKey, err)
		}
	}

	// Acting on tasks by UUID finds them in any shard.
	var other *tasks.Signature // a task of a shard other than the first
	for _, sig := range sigs[:n-1] {
		if sig.RoutingKey != "wide" {
			other = sig
			break
		}
	}
	if _, err := worker.TakeWaiting(ctx, "wide", other.UUID, brokers.TakeArchive, "by hand"); err != nil {
		t.Fatal(err)
	}
	wantInfo(t, worker, "wide", brokers.QueueInfo{Queue: "wide", Pending: n - 2, Archived: 1})
	if got, err := worker.RequeueArchived(ctx, "wide", other.UUID); err != nil || got != 1 {
		t.Fatalf("RequeueArchived(%s) = %d, %v; want 1", other.UUID, got, err)
	}
	if _, err := worker.TakeWaiting(ctx, "wide", other.UUID, brokers.TakeArchive, "by hand"); err != nil {
		t.Fatal(err)
	}
	if got, err := worker.DeleteArchived(ctx, "wide", other.UUID); err != nil || got != 1 {
		t.Fatalf("DeleteArchived(%s) = %d, %v; want 1", other.UUID, got, err)
	}
	delete(sent, other.UUID)
	if _, err := worker.TakeWaiting(ctx, "wide", "nobody", brokers.TakeDelete, ""); !errors.Is(err, brokers.ErrTaskNotFound) {
		t.Fatalf("TakeWaiting of a task not sent: %v, want ErrTaskNotFound", err)
	}
	// Held wherever it is.
	var still *tasks.Signature // a task still pending, in another shard than other's
	for _, sig := range sigs[:n-1] {
		if sig.RoutingKey != other.RoutingKey {
			still = sig
			break
		}
	}
	held, err := worker.Holds(ctx, &tasks.Signature{UUID: still.UUID, RoutingKey: "wide"}, &tasks.Signature{UUID: other.UUID, RoutingKey: "wide"})
	if err != nil || !held[0] || held[1] {
		t.Fatalf("Holds = %v, %v; want [true false]", held, err)
	}

	// One shard paused is not the queue paused.
	if err := worker.PauseQueue(ctx, other.RoutingKey); err != nil {
		t.Fatal(err)
	}
	wantInfo(t, worker, "wide", brokers.QueueInfo{Queue: "wide", Pending: n - 2})
	// Paused: every shard; a fetch takes nothing.
	if err := worker.PauseQueue(ctx, "wide"); err != nil {
		t.Fatal(err)
	}
	wantInfo(t, worker, "wide", brokers.QueueInfo{Queue: "wide", Paused: true, Pending: n - 2})
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	ds, err := worker.Fetch(short, []string{"wide"}, 10, nil)
	cancel()
	if len(ds) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch from a paused sharded queue: %d tasks, %v", len(ds), err)
	}
	if err := worker.ResumeQueue(ctx, "wide"); err != nil {
		t.Fatal(err)
	}

	// A fetch from the queue takes from every shard.
	fetchedFrom := map[string]int{}
	for len(sent) > 0 {
		ds, err := worker.Fetch(ctx, []string{"wide"}, 8, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if !sent[d.Signature.UUID] {
				t.Fatalf("fetched %s from %s: not sent, or twice", d.Signature.UUID, d.Queue)
			}
			delete(sent, d.Signature.UUID)
			fetchedFrom[d.Queue]++
			if d.Signature.RoutingKey != d.Queue {
				t.Fatalf("delivery of queue %s has RoutingKey %s", d.Queue, d.Signature.RoutingKey)
			}
			if err := worker.Ack(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(fetchedFrom) != 3 {
		t.Fatalf("fetched from %v, want three shards", fetchedFrom)
	}
	wantInfo(t, worker, "wide", brokers.QueueInfo{Queue: "wide"})
}

func wantInfo(t *testing.T, b interface {
	QueueInfo(context.Context, string) (*brokers.QueueInfo, error)
}, queue string, want brokers.QueueInfo) {
	t.Helper()
	got, err := b.QueueInfo(ctxFor(t), queue)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("QueueInfo(%s) = %+v, want %+v", queue, *got, want)
	}
}

// A Fetch that waits on a queue takes a task published to a shard added
// while it waited.
func TestFetchTakesFromShardsAddedWhileItWaits(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	prefix := srv.Prefix(t)
	cnf := (&config.Config{Redis: &config.RedisConfig{NormalTasksPollPeriod: 200}}).WithDefaults()
	worker := newBroker(t, client, prefix, cnf)
	ctx := ctxFor(t)
	if names, err := worker.Shards(ctx, "grows"); err != nil || len(names) != 1 {
		t.Fatalf("Shards(grows) = %q, %v; want grows alone", names, err)
	}
	got := make(chan []*brokers.Delivery, 1)
	go func() {
		ds, err := worker.Fetch(ctx, []string{"grows"}, 1, nil)
		if err != nil {
			t.Error(err)
		}
		got <- ds
	}()
	sender := newBroker(t, client, prefix, shardedConfig(map[string]int{"grows": 2}))
	names, err := sender.Shards(ctx, "grows")
	if err != nil || len(names) != 2 {
		t.Fatalf("Shards(grows) = %q, %v; want two", names, err)
	}
	sig, _ := tasks.NewSignature("job", nil)
	sig.RoutingKey = names[1] // the new shard
	if err := sender.Publish(ctx, sig); err != nil {
		t.Fatal(err)
	}
	ds := <-got
	if len(ds) != 1 || ds[0].Signature.UUID != sig.UUID || ds[0].Queue != names[1] {
		t.Fatalf("Fetch returned %d tasks, want %s from %s", len(ds), sig.UUID, names[1])
	}
}

// Pause, resume and cancel reach a shard added a moment ago, which the
// shards a process read less than 5 s ago do not have.
func TestPauseReachesAShardJustAdded(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client, prefix := srv.Client(t), srv.Prefix(t)
	ctx := ctxFor(t)
	operator := newBroker(t, client, prefix, shardedConfig(map[string]int{"late": 2}))
	if names, err := operator.Shards(ctx, "late"); err != nil || len(names) != 2 {
		t.Fatalf("Shards(late) = %q, %v; want two", names, err)
	}
	raiser := newBroker(t, client, prefix, shardedConfig(map[string]int{"late": 3}))
	names, err := raiser.Shards(ctx, "late")
	if err != nil || len(names) != 3 {
		t.Fatalf("Shards(late) = %q, %v; want three", names, err)
	}
	if err := operator.PauseQueue(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	if info, err := raiser.QueueInfo(ctx, names[2]); err != nil || !info.Paused {
		t.Fatalf("QueueInfo(%s) after the queue's pause = %+v, %v; want paused", names[2], info, err)
	}
	if err := operator.ResumeQueue(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	if info, err := raiser.QueueInfo(ctx, names[2]); err != nil || info.Paused {
		t.Fatalf("QueueInfo(%s) after the queue's resume = %+v, %v; want running", names[2], info, err)
	}
}

// A task of a sharded queue may not carry two keys that could choose
// different shards; the error says so.
func TestShardedQueueRefusesTwoKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	b := newBroker(t, srv.Client(t), srv.Prefix(t), shardedConfig(map[string]int{"keys": 2}))
	sig, _ := tasks.NewSignature("job", nil)
	sig.RoutingKey, sig.AggregationKey = "keys", "k"
	sig.Limit = &tasks.Limit{Key: "l", Concurrency: 1}
	err := b.Publish(ctxFor(t), sig)
	if err == nil || !strings.Contains(err.Error(), "only one of an aggregation key") {
		t.Fatalf("Publish with two keys to a sharded queue: %v", err)
	}
}

// Aggregation on a sharded queue: each key's members meet in one shard,
// and a worker claiming from the queue gets every group's batch.
func TestShardedQueueAggregates(t *testing.T) {
	t.Parallel()
	cluster := redistest.SharedCluster(t)
	client := cluster.Client(t)
	prefix := cluster.Prefix(t)
	ctx := ctxFor(t)
	b := newBroker(t, client, prefix, shardedConfig(map[string]int{"agg": 3}))
	names := brokers.NewTaskNames([]string{"m"})
	if err := b.AnnounceAggregators(ctx, []string{"agg"}, map[string]brokers.AggregationPolicy{"m": {MaxSize: 3}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	const keys = 12
	byKey := map[string]string{} // key → shard
	for k := range keys {
		for i := range 3 {
			sig, _ := tasks.NewSignature("m", nil)
			sig.RoutingKey, sig.AggregationKey = "agg", fmt.Sprint("k", k)
			if err := b.Publish(ctx, sig); err != nil {
				t.Fatal(err)
			}
			if sh, ok := byKey[sig.AggregationKey]; ok && sh != sig.RoutingKey {
				t.Fatalf("member %d of %s went to %s, the others to %s", i, sig.AggregationKey, sig.RoutingKey, sh)
			}
			byKey[sig.AggregationKey] = sig.RoutingKey
		}
	}
	wantInfo(t, b, "agg", brokers.QueueInfo{Queue: "agg", Aggregating: 3 * keys})
	if infos, err := b.Aggregations(ctx, "agg"); err != nil || len(infos) != keys {
		t.Fatalf("Aggregations(agg): %d groups, %v; want %d", len(infos), err, keys)
	}
	claimed := map[string]bool{}
	for len(claimed) < keys {
		batch, err := b.ClaimBatch(ctx, []string{"agg"}, names)
		if err != nil {
			t.Fatal(err)
		}
		if batch == nil {
			t.Fatalf("no batch after %d of %d", len(claimed), keys)
		}
		if claimed[batch.Key] || len(batch.Members) != 3 || batch.Queue != byKey[batch.Key] {
			t.Fatalf("batch of %s in %s with %d members (claimed before: %t), want 3 in %s",
				batch.Key, batch.Queue, len(batch.Members), claimed[batch.Key], byKey[batch.Key])
		}
		claimed[batch.Key] = true
		agg, _ := tasks.NewSignature("sum", nil)
		agg.RoutingKey = batch.Queue
		if len(claimed)%2 == 0 {
			agg.RoutingKey = "agg" // to the shard of its UUID: on a cluster, handed over
		}
		if err := b.CompleteBatch(ctx, batch, agg); err != nil {
			t.Fatal(err)
		}
	}
	wantInfo(t, b, "agg", brokers.QueueInfo{Queue: "agg", Pending: keys})
}
