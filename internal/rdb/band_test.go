package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// bandSig is a task of queue q with priority and fair key.
func bandSig(id string, priority uint8, key string) *tasks.Signature {
	return &tasks.Signature{UUID: id, Name: "n", RoutingKey: "q", Priority: priority, FairKey: key}
}

// takeAll dequeues the tasks of queue q n at a time until none is left,
// acknowledging none, and returns their ids in the order taken.
func takeAll(t *testing.T, s *Store, n int) []string {
	t.Helper()
	var ids []string
	for {
		ds, err := s.Dequeue(context.Background(), "q", n, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return ids
		}
		for _, d := range ds {
			ids = append(ids, d.Signature.UUID)
		}
	}
}

// checkBands fails t unless the band keys of queue q agree with the
// lists (lib/band.lua): every list with tasks registered, nothing else.
func checkBands(t *testing.T, client *goredis.Client, qk *queueKeys) {
	t.Helper()
	ctx := context.Background()
	keys, err := client.Keys(ctx, strings.ReplaceAll(qk.pending, "{", `\{`)+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	levels := client.ZRange(ctx, qk.pending+":levels", 0, -1).Val()
	for _, k := range keys {
		band := strings.TrimPrefix(k, qk.pending+":")
		if band == "levels" || strings.HasPrefix(band, "fair:") {
			continue
		}
		level, key, keyed := strings.Cut(band, ":")
		if !slices.Contains(levels, level) {
			t.Errorf("band %q has tasks, its level is not registered (%q)", band, levels)
		}
		if keyed && client.ZScore(ctx, qk.pending+":fair:"+level, key).Err() != nil {
			t.Errorf("band %q has tasks, its key is not in the level's rotation", band)
		}
	}
	for _, level := range levels {
		fair := client.ZRange(ctx, qk.pending+":fair:"+level, 0, -1).Val()
		plain := qk.pending + ":" + level
		if level == "0" {
			plain = qk.pending
		}
		if len(fair) == 0 && (level == "0" || client.Exists(ctx, plain).Val() == 0) {
			t.Errorf("level %s is registered with nothing of it left", level)
		}
		n, _ := strconv.Atoi(level)
		if score := client.ZScore(ctx, qk.pending+":levels", level).Val(); score != float64(2*n) && len(fair) == 0 || score != float64(2*n+1) && len(fair) > 0 {
			t.Errorf("level %s scored %v with %d fair keys", level, score, len(fair))
		}
		for _, key := range fair {
			list := plain
			if key != "" {
				list = qk.pending + ":" + level + ":" + key
			}
			if client.Exists(ctx, list).Val() == 0 {
				t.Errorf("key %q of level %s is in the rotation with no task", key, level)
			}
		}
	}
}

// Within a queue a higher priority is taken first, and each level in the
// order sent; a priority above MaxPriority waits with MaxPriority's; when
// all are taken no band key is left.
func TestPriorityLevelsTakenHighestFirst(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	var sigs []*tasks.Signature
	for i, p := range []uint8{0, 3, 9, 3, 0, 200, 1, 9} {
		sigs = append(sigs, bandSig(fmt.Sprintf("t%d-p%d", i, p), p, ""))
	}
	if err := s.Publish(ctx, PublishParams{Tasks: sigs}); err != nil {
		t.Fatal(err)
	}
	checkBands(t, client, s.keys.queue("q"))
	got := takeAll(t, s, 3)
	want := []string{"t2-p9", "t5-p200", "t7-p9", "t1-p3", "t3-p3", "t6-p1", "t0-p0", "t4-p0"}
	if !slices.Equal(got, want) {
		t.Fatalf("taken in order %q, want %q", got, want)
	}
	if keys := client.Keys(ctx, strings.ReplaceAll(s.keys.queue("q").pending, "{", `\{`)+"*").Val(); len(keys) != 0 {
		t.Fatalf("keys left after every task was taken: %q", keys)
	}
}

// A tenant that sends 10 tasks behind another's 10,000 has all 10 taken
// before the other's 100th: the keys with tasks are taken in turn.
func TestFairKeysTakenInTurn(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	var big []*tasks.Signature
	for i := range 10000 {
		big = append(big, bandSig(fmt.Sprintf("a%05d", i), 0, "tenant-a"))
	}
	if err := s.Publish(ctx, PublishParams{Tasks: big}); err != nil {
		t.Fatal(err)
	}
	var small []*tasks.Signature
	for i := range 10 {
		small = append(small, bandSig(fmt.Sprintf("b%02d", i), 0, "tenant-b"))
	}
	if err := s.Publish(ctx, PublishParams{Tasks: small}); err != nil {
		t.Fatal(err)
	}
	checkBands(t, client, s.keys.queue("q"))
	var as, bs []string
	for len(bs) < 10 {
		ds, err := s.Dequeue(ctx, "q", 4, nil)
		if err != nil || len(ds) == 0 {
			t.Fatalf("dequeue: %d tasks, %v, with b's %d of 10 taken", len(ds), err, len(bs))
		}
		for _, d := range ds {
			if id := d.Signature.UUID; id[0] == 'a' {
				as = append(as, id)
			} else {
				bs = append(bs, id)
			}
		}
	}
	if len(as) >= 100 {
		t.Fatalf("b's 10 tasks taken after %d of a's, want before a's 100th", len(as))
	}
	if !slices.IsSorted(as) || !slices.IsSorted(bs) {
		t.Fatalf("a key's tasks taken out of order: %q, %q", as, bs)
	}
	checkBands(t, client, s.keys.queue("q"))
}

// Tasks without a fair key take their turns as one more key; keys are
// served one task each in turn, at the highest level first.
func TestFairKeysRoundRobinWithinALevel(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	var sigs []*tasks.Signature
	for i := range 3 {
		sigs = append(sigs, bandSig(fmt.Sprintf("x%d", i), 0, "x"), bandSig(fmt.Sprintf("x%d'", i), 0, "x"))
		sigs = append(sigs, bandSig(fmt.Sprintf("plain%d", i), 0, ""))
	}
	sigs = append(sigs, bandSig("y0", 0, "y"), bandSig("hi-x", 5, "x"), bandSig("hi", 5, ""))
	if err := s.Publish(ctx, PublishParams{Tasks: sigs}); err != nil {
		t.Fatal(err)
	}
	got := takeAll(t, s, 1)
	// Level 5 first: its key x, then its tasks without a key (joining
	// the turns after x). Then level 0, one task of each key a turn, each
	// key's in the order sent: x (first in the rotation), "" (no key) and
	// y (which joined after it), then x and "" until both run out.
	want := []string{"hi-x", "hi", "x0", "plain0", "y0", "x0'", "plain1", "x1", "plain2", "x1'", "x2", "x2'"}
	if !slices.Equal(got, want) {
		t.Fatalf("took %q, want %q", got, want)
	}
	checkBands(t, client, s.keys.queue("q"))
}

// A banded task keeps its band through every way back to pending: a
// requeue, a lease run out, a retry due now, a debounce that changes it,
// and a cancel takes it off its band's list.
func TestBandKeptOnTheWayBack(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	qk := s.keys.queue("q")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{bandSig("hi", 7, "k"), bandSig("lo", 0, "")}}))
	ds, err := s.Dequeue(ctx, "q", 1, nil)
	must(err)
	if len(ds) != 1 || ds[0].Signature.UUID != "hi" {
		t.Fatalf("took %v, want hi", ds)
	}
	must(s.Requeue(ctx, ds))
	checkBands(t, client, qk)
	ds, err = s.Dequeue(ctx, "q", 1, nil)
	must(err)
	if ds[0].Signature.UUID != "hi" {
		t.Fatalf("after a requeue took %s, want hi again", ds[0].Signature.UUID)
	}
	must(s.Retry(ctx, ds[0], time.Time{}, "boom"))
	checkBands(t, client, qk)
	ds, err = s.Dequeue(ctx, "q", 1, nil)
	must(err)
	if ds[0].Signature.UUID != "hi" {
		t.Fatalf("after a retry due now took %s, want hi again", ds[0].Signature.UUID)
	}
	// The lease runs out: the maintainer recovers it to its band.
	s.opts.MaxRecoveries = 5
	must(client.ZAdd(ctx, qk.lease, goredis.Z{Score: 1, Member: "hi"}).Err())
	recovered, _, _, err := s.Recover(ctx, "q")
	must(err)
	if !slices.Equal(recovered, []string{"hi"}) {
		t.Fatalf("recovered %q, want hi", recovered)
	}
	checkBands(t, client, qk)
	if got := takeAll(t, s, 1); !slices.Equal(got, []string{"hi", "lo"}) {
		t.Fatalf("after a recovery took %q, want hi, lo", got)
	}

	// A cancel takes a pending task off its band's list.
	must(s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{bandSig("c", 4, "k2")}}))
	_, _, err = s.CancelTask(ctx, "q", "c", "no", 0)
	must(err)
	checkBands(t, client, qk)
	if keys := client.Keys(ctx, strings.ReplaceAll(qk.pending, "{", `\{`)+"*").Val(); len(keys) != 0 {
		t.Fatalf("keys left after the cancel: %q", keys)
	}
}

// A debounce moves its pending holder to the band of the task that
// replaces it.
func TestDebounceTakesTheNewBand(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	qk := s.keys.queue("q")
	unique := func(id string, priority uint8) *tasks.Signature {
		sig := bandSig(id, priority, "")
		sig.UniqueFor, sig.UniqueKey, sig.UniqueReplace = time.Minute, "u", true
		return sig
	}
	if err := s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{unique("holder", 0), bandSig("mid", 2, "")}}); err != nil {
		t.Fatal(err)
	}
	err := s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{unique("again", 6)}})
	if err != nil && !strings.Contains(err.Error(), "holder") {
		t.Fatal(err)
	}
	checkBands(t, client, qk)
	if got := takeAll(t, s, 1); !slices.Equal(got, []string{"holder", "mid"}) {
		t.Fatalf("took %q, want the holder first, now at level 6", got)
	}
}

// A key whose one task is taken at each turn, and which sends another
// after it, does not keep a key with a backlog from its turns.
func TestFairKeyComingBackWaitsItsTurn(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	ctx := context.Background()
	var backlog []*tasks.Signature
	for i := range 10 {
		backlog = append(backlog, bandSig(fmt.Sprintf("z%d", i), 0, "zz-backlog"))
	}
	if err := s.Publish(ctx, PublishParams{Tasks: backlog}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range 10 {
		if err := s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{bandSig(fmt.Sprintf("a%d", i), 0, "aa-trickle")}}); err != nil {
			t.Fatal(err)
		}
		ds, err := s.Dequeue(ctx, "q", 1, nil)
		if err != nil || len(ds) != 1 {
			t.Fatalf("dequeue: %d, %v", len(ds), err)
		}
		got = append(got, ds[0].Signature.UUID)
	}
	z := 0
	for _, id := range got {
		if id[0] == 'z' {
			z++
		}
	}
	if z < 5 {
		t.Fatalf("took %q: the backlog had %d of 10 turns, want every other one at least", got, z)
	}
}

// Deleting 100,000 pending tasks takes 100 calls of 1,000, in the order
// they would run, bands and all, and leaves nothing of them behind.
func TestTakeAllPendingInPages(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	qk := s.keys.queue("q")
	const total = 100000
	sigs := make([]*tasks.Signature, total)
	for i := range sigs {
		sigs[i] = bandSig(fmt.Sprintf("t%06d", i), uint8(i%3), []string{"", "k1", "k2"}[i%5%3])
	}
	for start := 0; start < total; start += 10000 {
		if err := s.Publish(ctx, PublishParams{Tasks: sigs[start : start+10000]}); err != nil {
			t.Fatal(err)
		}
	}
	calls, seen := 0, make(map[string]bool, total)
	for {
		page, err := s.TakeAll(ctx, "q", "pending", "delete", "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if len(page.Taken) > 1000 {
			t.Fatalf("a call took %d tasks, want 1,000 at most", len(page.Taken))
		}
		for _, sig := range page.Taken {
			if seen[sig.UUID] || sig.Name != "n" {
				t.Fatalf("task %s (%q) taken twice, or without its signature", sig.UUID, sig.Name)
			}
			seen[sig.UUID] = true
		}
		if !page.More || len(page.Taken) == 0 {
			break
		}
	}
	if len(seen) != total || calls != total/1000+1 && calls != total/1000 {
		t.Fatalf("%d tasks deleted in %d calls, want %d in %d", len(seen), calls, total, total/1000)
	}
	if keys := client.Keys(ctx, strings.ReplaceAll(s.keys.queue("q").task, "{", `\{`)+"*").Val(); len(keys) != 0 {
		t.Fatalf("%d task hashes left, e.g. %q", len(keys), keys[0])
	}
	if keys := client.Keys(ctx, strings.ReplaceAll(qk.pending, "{", `\{`)+"*").Val(); len(keys) != 0 {
		t.Fatalf("pending keys left: %q", keys)
	}
}

// Each status takes the actions it can: scheduled tasks archived, retry
// ones run, archived ones requeued then deleted, a finishing task put
// back where it was; an action a status does not take is refused.
func TestTakeAllByStatus(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	s.opts.ArchiveMaxAge, s.opts.ArchiveMaxSize = time.Hour, 100
	ctx := context.Background()
	qk := s.keys.queue("q")
	later := time.Now().Add(time.Hour)
	var sched []*tasks.Signature
	for i := range 5 {
		sig := bandSig(fmt.Sprintf("s%d", i), 0, "")
		sig.ETA = &later
		sched = append(sched, sig)
	}
	if err := s.Publish(ctx, PublishParams{Tasks: sched}); err != nil {
		t.Fatal(err)
	}
	all := func(status store.TaskStatus, action store.TakeAction, n int) int {
		t.Helper()
		total := 0
		for {
			page, err := s.TakeAll(ctx, "q", status, action, "bulk", n)
			if err != nil {
				t.Fatal(err)
			}
			total += len(page.Taken)
			if !page.More || len(page.Taken) == 0 {
				return total
			}
		}
	}
	if n := all(store.StatusScheduled, store.TakeArchive, 2); n != 5 {
		t.Fatalf("archived %d scheduled tasks, want 5", n)
	}
	if n := client.ZCard(ctx, qk.archived).Val(); n != 5 {
		t.Fatalf("%d archived, want 5", n)
	}
	if n := all(store.StatusArchived, store.TakeRun, 2); n != 5 {
		t.Fatalf("requeued %d archived tasks, want 5", n)
	}
	if got := takeAll(t, s, 10); len(got) != 5 {
		t.Fatalf("took %q after the requeue, want the 5", got)
	}
	// A pending task being finished (recovered after its outcome was
	// committed) is put back, and the call that meets only it acts on none.
	if err := s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{bandSig("finishing", 0, ""), bandSig("p", 0, "")}}); err != nil {
		t.Fatal(err)
	}
	if err := client.HSet(ctx, qk.task+"finishing", "outcome", `{"State":"SUCCESS"}`).Err(); err != nil {
		t.Fatal(err)
	}
	if n := all(store.StatusPending, store.TakeDelete, 10); n != 1 {
		t.Fatalf("deleted %d pending tasks, want 1", n)
	}
	if ids := client.LRange(ctx, qk.pending, 0, -1).Val(); !slices.Equal(ids, []string{"finishing"}) {
		t.Fatalf("pending after the delete: %q, want the task being finished", ids)
	}
	for _, c := range []struct {
		status store.TaskStatus
		action store.TakeAction
	}{{store.StatusPending, store.TakeRun}, {store.StatusActive, store.TakeDelete}, {store.StatusArchived, store.TakeArchive}, {store.StatusLimited, store.TakeRun}} {
		if _, err := s.TakeAll(ctx, "q", c.status, c.action, "", 10); !errors.Is(err, store.ErrBadTakeAll) {
			t.Errorf("%s all %s tasks: %v, want ErrBadTakeAll", c.action, c.status, err)
		}
	}
}

// RemoveQueue deletes every key of the queue, and only its, and its name.
func TestRemoveQueueDeletesItsKeys(t *testing.T) {
	t.Parallel()
	s, client := newTestStore(t)
	ctx := context.Background()
	other := bandSig("kept", 0, "")
	other.RoutingKey = "other[q]"
	if err := s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{bandSig("a", 3, "k"), bandSig("b", 0, ""), other}}); err != nil {
		t.Fatal(err)
	}
	pattern := func(q string) string { return strings.ReplaceAll(s.keys.prefix+":{"+q+"}:*", "{", `\{`) }
	if n := len(client.Keys(ctx, pattern("q")).Val()); n == 0 {
		t.Fatal("the queue has no keys to remove")
	}
	if err := s.RemoveQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if keys := client.Keys(ctx, pattern("q")).Val(); len(keys) != 0 {
		t.Fatalf("keys left: %q", keys)
	}
	if n := len(client.Keys(ctx, strings.ReplaceAll(pattern("other[q]"), "[", `\[`)).Val()); n == 0 {
		t.Fatal("another queue's keys went too")
	}
	if qs, _ := s.Queues(ctx); slices.Contains(qs, "q") || !slices.Contains(qs, "other[q]") {
		t.Fatalf("queues listed after the removal: %q", qs)
	}
}
