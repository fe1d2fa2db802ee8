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
	for _, ok := range []string{"q", "q{1", "q{42", "a b{7"} {
		if err := ValidQueue(ok); err != nil {
			t.Errorf("ValidQueue(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"q{", "{1", "q{x", "q{1}", "q}", "a}b{1", "q{1{2", "{q}"} {
		if err := ValidQueue(bad); err == nil {
			t.Errorf("ValidQueue(%q) = nil, want an error", bad)
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

// A growing queue that is paused stays paused: its new shards are too.
func TestNewShardsOfAPausedQueueArePaused(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	prefix := srv.Prefix(t)
	ctx := context.Background()
	s := shardStore(t, client, prefix, nil)
	if err := s.PauseQueue(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	names, err := shardStore(t, client, prefix, map[string]int{"p": 3}).Shards(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if info, err := s.QueueInfo(ctx, n); err != nil || !info.Paused {
			t.Fatalf("QueueInfo(%s) = %+v, %v; want paused", n, info, err)
		}
	}
}

// Which shard a task goes to: its key's, its UUID's, or its step's.
func TestRoute(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	s := shardStore(t, srv.Client(t), srv.Prefix(t), map[string]int{"r": 4})
	ctx := context.Background()
	names, err := s.Shards(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	route := func(sig *tasks.Signature, near string) string {
		t.Helper()
		q, err := s.route(ctx, sig, near)
		if err != nil {
			t.Fatalf("route %+v: %v", sig, err)
		}
		return q
	}
	used := map[string]bool{}
	for i := range 200 {
		sig := &tasks.Signature{UUID: fmt.Sprint("t", i), Name: "n", RoutingKey: "r"}
		q := route(sig, "")
		used[q] = true
		if again := route(&tasks.Signature{UUID: sig.UUID, Name: "other", RoutingKey: "r"}, ""); again != q {
			t.Fatalf("task %s went to %s, then to %s", sig.UUID, q, again)
		}
		// A next step stays in its step's shard; another queue's does not.
		if got := route(sig, names[2]); got != names[2] {
			t.Fatalf("next step after a task of %s went to %s", names[2], got)
		}
		if got := route(sig, "elsewhere"); got != q {
			t.Fatalf("next step after a task of another queue went to %s, want %s by its UUID", got, q)
		}
	}
	if len(used) != len(names) {
		t.Fatalf("200 tasks used shards %v of %q", used, names)
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
			q := route(sig, names[1])
			if first == "" {
				first = q
			}
			if q != first {
				t.Fatalf("tasks with one %s key went to %s and %s", kind, first, q)
			}
		}
	}
	both := &tasks.Signature{UUID: "both", Name: "n", RoutingKey: "r", AggregationKey: "k", UniqueFor: time.Minute}
	if _, err := s.route(ctx, both, ""); !errors.Is(err, ErrShardKeys) {
		t.Fatalf("route of a task with two keys: %v, want ErrShardKeys", err)
	}
	if q, err := s.route(ctx, &tasks.Signature{UUID: "x", RoutingKey: names[3]}, ""); err != nil || q != names[3] {
		t.Fatalf("route to shard %s: %s, %v", names[3], q, err)
	}
}
