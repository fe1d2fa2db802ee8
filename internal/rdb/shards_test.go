package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Slot must be Redis Cluster's hash slot of a queue's keys, or the shards
// would not land where pickShards means them to.
func TestSlotIsTheClusterKeySlot(t *testing.T) {
	t.Parallel()
	cluster := redistest.SharedCluster(t)
	client := cluster.Client(t)
	ctx := context.Background()
	for _, q := range []string{"a", "default", "machinery_tasks", "q{1", "q{77", "queue with spaces", "ünïcode", "x{123456"} {
		key := "p:{" + q + "}:pending"
		want, err := client.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := Slot(q); int64(got) != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT %q = %d", q, got, key, want)
		}
	}
}

func TestShardNamesAreValidQueuesAndNoOtherBraces(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"q", "q{1", "q{42", "a b{7", "q{999999999"} {
		if err := ValidQueue(ok); err != nil {
			t.Errorf("ValidQueue(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"q{", "{1", "q{x", "q{1}", "q}", "a}b{1", "q{1{2", "{q}", "q{0", "q{01", "q{1000000000"} {
		if err := ValidQueue(bad); err == nil {
			t.Errorf("ValidQueue(%q) = nil, want an error", bad)
		}
	}
}

// A name that reads as a shard is a queue only when its queue's record
// has it: any other is refused, not left where no worker looks.
func TestUnrecordedShardNamesAreRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	s := shardStore(t, srv.Client(t), srv.Prefix(t), map[string]int{"rec": 2})
	ctx := context.Background()
	names, err := s.Shards(ctx, "rec")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Shards(ctx, names[1]); err != nil || !slices.Equal(got, names[1:]) {
		t.Fatalf("Shards(%s) = %q, %v; want itself", names[1], got, err)
	}
	for _, q := range []string{"rec{2024", "other{1"} {
		sig := &tasks.Signature{UUID: "u-" + q, Name: "n", RoutingKey: q}
		if err := s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{sig}}); err == nil || !strings.Contains(err.Error(), "no such shard") {
			t.Fatalf("Publish to %s: %v, want a refusal", q, err)
		}
	}
}

func shardStore(t *testing.T, client UniversalClient, prefix string, want map[string]int) *Store {
	t.Helper()
	s := New(client, Options{KeyPrefix: strings.TrimSuffix(prefix, ":"), ResultsExpireIn: time.Hour, LeaseDuration: time.Minute,
		ArchiveMaxAge: time.Hour, ArchiveMaxSize: 100, QueueShards: want}, false)
	t.Cleanup(func() { s.Close() })
	return s
}

// On a cluster of three masters, three shards are on three masters, and
// more go round them; the record only grows, and every store reads it
// whatever its own configuration.
func TestShardsSpreadOverTheMastersAndOnlyGrow(t *testing.T) {
	t.Parallel()
	cluster := redistest.SharedCluster(t)
	client := cluster.Client(t)
	prefix := cluster.Prefix(t)
	ctx := context.Background()

	three := shardStore(t, client, prefix, map[string]int{"busy": 3})
	names, err := three.Shards(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 3 || names[0] != "busy" {
		t.Fatalf("Shards(busy) = %q, want busy and two shards", names)
	}
	masters := map[string]bool{}
	for _, n := range names {
		masters[cluster.MasterOf(t, "{"+n+"}").Addr()] = true
	}
	if len(masters) != 3 {
		t.Fatalf("shards %q are on %d masters, want 3", names, len(masters))
	}

	// A store configured with none, or fewer, reads the three.
	for _, want := range []map[string]int{nil, {"busy": 2}} {
		got, err := shardStore(t, client, prefix, want).Shards(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, names) {
			t.Fatalf("with QueueShards %v: Shards(busy) = %q, want %q", want, got, names)
		}
	}

	// Six keep the three and put two on each master.
	six, err := shardStore(t, client, prefix, map[string]int{"busy": 6}).Shards(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	if len(six) != 6 || !slices.Equal(six[:3], names) {
		t.Fatalf("Shards(busy) with 6 = %q, want %q and three more", six, names)
	}
	perMaster := map[string]int{}
	for _, n := range six {
		perMaster[cluster.MasterOf(t, "{"+n+"}").Addr()]++
	}
	for addr, n := range perMaster {
		if n != 2 {
			t.Fatalf("%d of the shards %q on %s, want 2 on each master (%v)", n, six, addr, perMaster)
		}
	}

	// A shard is a queue of its own: it has no shards.
	if got, err := three.Shards(ctx, six[4]); err != nil || !slices.Equal(got, six[4:5]) {
		t.Fatalf("Shards(%s) = %q, %v; want itself", six[4], got, err)
	}
}

// Processes that raise a queue's shards at once agree on one record: each
// sees the record it wrote or a longer one that begins with it.
func TestConcurrentRaisesAgree(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	prefix := srv.Prefix(t)
	ctx := context.Background()
	const raisers = 10
	got := make([][]string, raisers)
	var wg sync.WaitGroup
	for i := range raisers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			names, err := shardStore(t, client, prefix, map[string]int{"q": 2 + i%4}).Shards(ctx, "q")
			if err != nil {
				t.Error(err)
			}
			got[i] = names
		}()
	}
	wg.Wait()
	final, err := shardStore(t, client, prefix, nil).Shards(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if len(final) != 5 {
		t.Fatalf("final shards %q, want 5", final)
	}
	for i, names := range got {
		if len(names) < 2+i%4 || !slices.Equal(names, final[:len(names)]) {
			t.Fatalf("raiser %d (to %d) saw %q, want a prefix of %q of at least that many", i, 2+i%4, names, final)
		}
	}
}

// A growing queue that is paused stays paused: its new shards are too,
// whether the process that raised the record paused them or another found
// them first.
func TestNewShardsOfAPausedQueueArePaused(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	prefix := srv.Prefix(t)
	ctx := context.Background()
	s := shardStore(t, client, prefix, map[string]int{"p": 2})
	two, err := s.Shards(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range two {
		if err := s.PauseQueue(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	wantPaused := func(names []string) {
		t.Helper()
		for _, n := range names {
			if info, err := s.QueueInfo(ctx, n); err != nil || !info.Paused {
				t.Fatalf("QueueInfo(%s) = %+v, %v; want paused", n, info, err)
			}
		}
	}
	four, err := shardStore(t, client, prefix, map[string]int{"p": 4}).Shards(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	wantPaused(four)
	// A raiser that died after writing the record: the next store to read
	// it pauses the shard.
	rec := strings.TrimSuffix(prefix, ":") + ":shards"
	raw, err := client.HGet(ctx, rec, "p").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.HSet(ctx, rec, "p", raw+" 77").Err(); err != nil {
		t.Fatal(err)
	}
	five, err := shardStore(t, client, prefix, nil).Shards(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(five) != 5 || five[4] != "p{77" {
		t.Fatalf("Shards(p) = %q, want four and p{77", five)
	}
	wantPaused(five)
	// Resumed, it stays resumed: a process that starts after does not
	// pause the shards again.
	for _, n := range five {
		if err := s.ResumeQueue(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PauseQueue(ctx, "p"); err != nil { // the first shard alone
		t.Fatal(err)
	}
	if _, err := shardStore(t, client, prefix, nil).Shards(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	for _, n := range five[1:] {
		if info, err := s.QueueInfo(ctx, n); err != nil || info.Paused {
			t.Fatalf("QueueInfo(%s) = %+v, %v; want it running, as it was resumed", n, info, err)
		}
	}
}

// When the record cannot be read, the shards read before are used.
func TestShardsReadBeforeServeWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := shardStore(t, srv.Client(t), srv.Prefix(t), map[string]int{"d": 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before, err := s.Shards(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	if got, err := s.ShardsNow(ctx, "d"); err != nil || !slices.Equal(got, before) {
		t.Fatalf("ShardsNow with Redis down = %q, %v; want %q", got, err, before)
	}
	if _, err := s.ShardsNow(ctx, "never-read"); err == nil {
		t.Fatal("ShardsNow of a queue never read, with Redis down: no error")
	}
}

// Which shard a task goes to: its key's, or its UUID's; a raise moves a
// task only to a new shard.
func TestRoute(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client, prefix := srv.Client(t), srv.Prefix(t)
	s := shardStore(t, client, prefix, map[string]int{"r": 3})
	ctx := context.Background()
	names, err := s.Shards(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	route := func(s *Store, sig *tasks.Signature) string {
		t.Helper()
		q, err := s.route(ctx, sig)
		if err != nil {
			t.Fatalf("route %+v: %v", sig, err)
		}
		return q
	}
	const n = 3000
	before := make([]string, n)
	used := map[string]int{}
	for i := range n {
		sig := &tasks.Signature{UUID: fmt.Sprint("t", i), Name: "n", RoutingKey: "r"}
		before[i] = route(s, sig)
		used[before[i]]++
		if again := route(s, &tasks.Signature{UUID: sig.UUID, Name: "other", RoutingKey: "r"}); again != before[i] {
			t.Fatalf("task %s went to %s, then to %s", sig.UUID, before[i], again)
		}
	}
	for _, q := range names {
		if used[q] < n/3*8/10 {
			t.Fatalf("%d tasks over %q: %v, want about a third each", n, names, used)
		}
	}
	four := shardStore(t, client, prefix, map[string]int{"r": 4})
	moved := 0
	for i := range n {
		after := route(four, &tasks.Signature{UUID: fmt.Sprint("t", i), Name: "n", RoutingKey: "r"})
		if after != before[i] {
			moved++
			if after == names[0] || after == names[1] || after == names[2] {
				t.Fatalf("task t%d moved from %s to %s, an old shard", i, before[i], after)
			}
		}
	}
	if moved < n/4*8/10 || moved > n/4*12/10 {
		t.Fatalf("%d of %d tasks moved to the fourth shard, want about a quarter", moved, n)
	}
	for _, kind := range []string{"aggregation", "limit", "unique"} {
		first := ""
		for i := range 50 {
			sig := &tasks.Signature{UUID: fmt.Sprint(kind, i), Name: "n", RoutingKey: "r"}
			switch kind {
			case "aggregation":
				sig.AggregationKey = "k"
			case "limit":
				sig.Limit = &tasks.Limit{Key: "k", Concurrency: 1}
			case "unique":
				sig.UniqueFor, sig.UniqueKey = time.Minute, "k"
			}
			q := route(s, sig)
			if first == "" {
				first = q
			}
			if q != first {
				t.Fatalf("tasks with one %s key went to %s and %s", kind, first, q)
			}
		}
	}
	both := &tasks.Signature{UUID: "both", Name: "n", RoutingKey: "r", AggregationKey: "k", UniqueFor: time.Minute}
	if _, err := s.route(ctx, both); !errors.Is(err, store.ErrShardKeys) {
		t.Fatalf("route of a task with two keys: %v, want ErrShardKeys", err)
	}
	if q, err := s.route(ctx, &tasks.Signature{UUID: "x", RoutingKey: names[2]}); err != nil || q != names[2] {
		t.Fatalf("route to shard %s: %s, %v", names[2], q, err)
	}
}
