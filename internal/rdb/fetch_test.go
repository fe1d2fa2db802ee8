package rdb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestTakeLeasesOnlyTasksThatWait: an id on the pending list whose task
// hash says the task does not wait there (a second entry of an id taken
// already, finished, scheduled, retrying, archived, aggregating, parked)
// is dropped from the list and not leased; a task that waits is taken,
// a recovered one, back at the head, too.
func TestTakeLeasesOnlyTasksThatWait(t *testing.T) {
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
	for _, c := range []struct {
		id     string
		fields []interface{} // beside msg
		taken  bool
	}{
		{"active", []interface{}{"state", "active", "lease", "other", "lease_exp", 1 << 50}, false},
		{"completed", []interface{}{"state", "completed", "settled", "tok"}, false},
		{"scheduled", []interface{}{"state", "scheduled", "process_at", 1 << 50}, false},
		{"retry", []interface{}{"state", "retry", "process_at", 1 << 50}, false},
		{"archived", []interface{}{"state", "archived", "error", "boom"}, false},
		{"aggregating", []interface{}{"state", "aggregating", "group", "m\nk", "joined", 1}, false},
		{"limited", []interface{}{"state", "limited", "limit", "1 0 0 " + qk.limit + "k"}, false},
		{"cancelled", []interface{}{"state", "cancelled", "error", "kept out"}, false},
		{"pending", []interface{}{"state", "pending"}, true},
		{"recovered", []interface{}{"state", "pending", "recovered", 1, "outcome", `{"State":"SUCCESS"}`}, true},
	} {
		must(client.HSet(ctx, qk.task+c.id, append([]interface{}{"msg", `{"Name":"n"}`}, c.fields...)...).Err())
		must(client.RPush(ctx, qk.pending, c.id).Err())
	}
	ds, err := s.Dequeue(ctx, "q", 20, nil)
	must(err)
	var taken []string
	for _, d := range ds {
		taken = append(taken, d.Signature.UUID)
	}
	if !slices.Equal(taken, []string{"pending", "recovered"}) {
		t.Fatalf("took %q, want only the tasks that wait", taken)
	}
	if ds[1].Recovered != 1 || ds[1].Outcome == nil {
		t.Fatalf("the recovered task came as %+v, want Recovered 1 and its outcome", ds[1])
	}
	if n := client.LLen(ctx, qk.pending).Val(); n != 0 {
		t.Fatalf("%d ids left pending, want the ones not taken dropped", n)
	}
	for _, id := range []string{"active", "completed", "scheduled", "archived"} {
		if st := client.HGet(ctx, qk.task+id, "state").Val(); st != id {
			t.Errorf("task %s dropped from pending is now %s: its hash was written", id, st)
		}
	}
}

// TestDuplicateIDIsLeasedOnce: an id pushed twice onto pending (a publish
// run twice) is leased once, by a fetch and by the takes of settles (the
// acknowledgement's, and the successful acknowledgement's, whose prelude
// looks at the head of pending first); the second entry is dropped.
func TestDuplicateIDIsLeasedOnce(t *testing.T) {
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
	publish := func(id string) {
		t.Helper()
		must(s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{{UUID: id, Name: "n", RoutingKey: "q"}}, Pending: true}))
	}
	ids := func(ds ...*store.Delivery) []string {
		var out []string
		for _, d := range ds {
			if d != nil {
				out = append(out, d.Signature.UUID)
			}
		}
		return out
	}

	// A fetch: the id twice, the second entry after another task.
	publish("a")
	publish("b")
	must(client.RPush(ctx, qk.pending, "a").Err())
	ds, err := s.Dequeue(ctx, "q", 3, nil)
	must(err)
	if got := ids(ds...); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("a fetch of 3 from [a b a] took %q, want [a b]", got)
	}
	a, b := ds[0], ds[1]

	// The successful acknowledgement's take, a's second entry at the head.
	publish("c")
	must(client.LPush(ctx, qk.pending, "a").Err())
	next, err := s.AckSuccess(ctx, b, tasks.NewSuccessTaskState(b.Signature, nil), nil, &store.Take{})
	must(err)
	if got := ids(next); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("AckSuccess's take from [a c], a running, took %q, want [c]", got)
	}

	// The acknowledgement's take, the same.
	publish("d")
	must(client.LPush(ctx, qk.pending, "a").Err())
	next2, err := s.Ack(ctx, next, &store.Take{})
	must(err)
	if got := ids(next2); !slices.Equal(got, []string{"d"}) {
		t.Fatalf("Ack's take from [a d], a running, took %q, want [d]", got)
	}
	if n := client.LLen(ctx, qk.pending).Val(); n != 0 {
		t.Fatalf("%d ids left pending, want a's second entries dropped", n)
	}
	if tok := client.HGet(ctx, qk.task+"a", "lease").Val(); tok != a.Lease.Token() {
		t.Fatalf("a's lease is %q, want its fetch's %q: it was leased again", tok, a.Lease.Token())
	}
}

// TestDequeueWakesNamesItLeavesBehind: a fetch that stops in a rerouted
// list (it popped its most ids: gone ones here) leaves a wake-up on the
// names' notify list, so that the caller's kind takes the rest at once
// rather than after a block timeout; so does one that stops with another
// name's list untouched.
func TestDequeueWakesNamesItLeavesBehind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Shared(t)
	client := srv.Client(t)
	k := &keys{prefix: strings.TrimSuffix(srv.Prefix(t), ":")}
	qk := k.queue("q")
	names := qk.names + "digest"
	notify := names + ":notify"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dequeue := func() []dequeued {
		t.Helper()
		v, err := dequeueScript.Run(ctx, client, []string{qk.pending, qk.paused, qk.lease, qk.notify, qk.rerouted, names},
			qk.task, 1, 60000, "tok").Result()
		must(err)
		taken, err := parseDequeueReply(v, 1)
		must(err)
		return taken
	}
	must(client.SAdd(ctx, names, "x", "y").Err())
	must(client.SAdd(ctx, qk.rerouted, "x").Err())
	for i := 0; i < 17; i++ { // ids whose tasks are gone: skipped
		must(client.RPush(ctx, qk.rerouted+":x", fmt.Sprintf("gone%d", i)).Err())
	}
	must(client.RPush(ctx, qk.rerouted+":x", "a").Err())
	must(client.HSet(ctx, qk.task+"a", "msg", `{"UUID":"a","Name":"x"}`, "state", "pending", "rerouted", "x").Err())
	if taken := dequeue(); len(taken) != 0 {
		t.Fatalf("the fetch that popped its most ids took %+v", taken)
	}
	if n := client.LLen(ctx, notify).Val(); n != 1 {
		t.Fatalf("names' notify list has %d tokens after a fetch left tasks of its names, want 1", n)
	}
	must(client.Del(ctx, notify).Err())

	must(client.SAdd(ctx, qk.rerouted, "y").Err())
	must(client.RPush(ctx, qk.rerouted+":y", "b").Err())
	must(client.HSet(ctx, qk.task+"b", "msg", `{"UUID":"b","Name":"y"}`, "state", "pending", "rerouted", "y").Err())
	if taken := dequeue(); len(taken) != 1 {
		t.Fatalf("the fetch took %d tasks, want 1", len(taken))
	}
	if n := client.LLen(ctx, notify).Val(); n != 1 {
		t.Fatalf("names' notify list has %d tokens after a fetch left another name's task, want 1", n)
	}
}
