package brokertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// bandTests are the suite's tests of priorities and fair keys.
func bandTests() []struct {
	name string
	run  func(*testing.T, *suite)
} {
	return []struct {
		name string
		run  func(*testing.T, *suite)
	}{
		{"Priority", testPriority},
		{"FairKeys", testFairKeys},
		{"BandKeptOnTheWayBack", testBandKeptOnTheWayBack},
		{"BadFairKey", testBadFairKey},
	}
}

// prioritized returns a signature for queue with priority and fair key.
func prioritized(queue, name string, priority uint8, key string) *tasks.Signature {
	sig := newSig(queue, name)
	sig.Priority, sig.FairKey = priority, key
	return sig
}

// fetchAll takes every task of queue, n at a time, acknowledging each,
// and returns their UUIDs in the order taken.
func fetchAll(t *testing.T, b Broker, queue string, n, want int) []string {
	t.Helper()
	var got []string
	for len(got) < want {
		ds := fetch(t, b, []string{queue}, n)
		got = append(got, deliveryUUIDs(ds)...)
		ack(t, b, ds...)
	}
	return got
}

// testPriority: within a queue a task of a higher Priority is taken
// first, each level in the order sent; a Priority above MaxPriority waits
// with MaxPriority's. QueueInfo counts the tasks of each level, and the
// pending list shows them in the order they will be taken.
func testPriority(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")
	var sigs []*tasks.Signature
	for i, p := range []uint8{0, 3, 9, 3, 0, 200, 1, 9} {
		sigs = append(sigs, prioritized(q, fmt.Sprintf("p%d_%d", p, i), p, ""))
	}
	publish(t, b, sigs[:4]...)
	for _, sig := range sigs[4:] { // one Publish per task
		publish(t, b, sig)
	}
	want := []string{sigs[2].UUID, sigs[5].UUID, sigs[7].UUID, sigs[1].UUID, sigs[3].UUID, sigs[6].UUID, sigs[0].UUID, sigs[4].UUID}
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 8, Levels: map[int]int{9: 3, 3: 2, 1: 1, 0: 2}})
	wantOrder(t, "pending list", infoUUIDs(list(t, b, q, brokers.StatusPending)), want)
	page, err := b.ListTasks(context.Background(), q, brokers.StatusPending, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	wantOrder(t, "pending page 2..4", infoUUIDs(page), want[2:5])
	wantOrder(t, "fetch order", fetchAll(t, b, q, 3, len(sigs)), want)
	wantSizes(t, b, q, brokers.QueueInfo{})
}

// testFairKeys: a key that sends 10 tasks behind another key's 1,000 has
// all 10 taken before the other's 100th; the tasks without a key take
// their turns as one more key; each key's tasks are taken in the order
// sent.
func testFairKeys(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")
	big := make([]*tasks.Signature, 1000)
	for i := range big {
		big[i] = prioritized(q, "a", 0, "tenant-a")
	}
	publish(t, b, big...)
	var small []*tasks.Signature
	for range 10 {
		small = append(small, prioritized(q, "b", 0, "tenant-b"))
	}
	publish(t, b, small...)
	plain := newSigs(q, "plain", 3)
	publish(t, b, plain...)
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1013, Levels: map[int]int{0: 1013}, FairKeys: 2})

	var order []string
	seen := map[string]int{}
	for seen["b"] < len(small) || seen["plain"] < len(plain) {
		for _, d := range fetch(t, b, []string{q}, 4) {
			name := strings.TrimRight(d.Signature.Name, "0123456789")
			seen[name]++
			order = append(order, d.Signature.UUID)
			ack(t, b, d)
		}
	}
	if seen["a"] >= 100 {
		t.Fatalf("b's %d tasks and the 3 without a key taken after %d of a's, want before a's 100th", len(small), seen["a"])
	}
	pos := map[string]int{}
	for i, id := range order {
		pos[id] = i
	}
	for _, run := range [][]*tasks.Signature{big[:seen["a"]], small, plain} {
		for i := 1; i < len(run); i++ {
			if pos[run[i].UUID] < pos[run[i-1].UUID] {
				t.Fatalf("%s taken before %s, sent before it by the same key", run[i].Name, run[i-1].Name)
			}
		}
	}
	rest := fetchAll(t, b, q, 100, len(big)-seen["a"])
	wantOrder(t, "a's tasks left", rest, sigUUIDs(big[seen["a"]:]))
	wantSizes(t, b, q, brokers.QueueInfo{})
}

// testBandKeptOnTheWayBack: a task keeps its level and key through every
// way back to pending (a requeue, a retry due now, its lease's end, a
// concurrency limit that parks it), and a cancelled or taken-out task
// leaves its band.
func testBandKeptOnTheWayBack(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	low := newSigs(q, "low", 2)
	hi := prioritized(q, "hi", 7, "k")
	publish(t, b, low[0], hi, low[1])

	d := fetchOne(t, b, q)
	if d.Signature.UUID != hi.UUID {
		t.Fatalf("fetched %s first, want the priority 7 task", d.Signature.Name)
	}
	sameSignature(t, "a task with a priority and a fair key", d.Signature, hi)
	must(t, "Requeue", b.Requeue(ctx, d))
	d = fetchOne(t, b, q)
	if d.Signature.UUID != hi.UUID {
		t.Fatalf("after a requeue fetched %s, want hi", d.Signature.Name)
	}
	must(t, "Retry", b.Retry(ctx, d, time.Now().Add(-time.Second), "again"))
	d = fetchOne(t, b, q)
	if d.Signature.UUID != hi.UUID {
		t.Fatalf("after a retry due now fetched %s, want hi", d.Signature.Name)
	}
	endLease(t, b, d)
	eventually(t, "the task whose lease ended back in pending", func() bool {
		return queueInfo(t, b, q).Pending == 3
	})
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 3, Levels: map[int]int{7: 1, 0: 2}, FairKeys: 1})
	wantOrder(t, "pending after the lease ended", infoUUIDs(list(t, b, q, brokers.StatusPending)),
		[]string{hi.UUID, low[0].UUID, low[1].UUID})
	wantOrder(t, "fetch order", fetchAll(t, b, q, 1, 3), []string{hi.UUID, low[0].UUID, low[1].UUID})

	// Parked on its limit key, a task comes back at its level.
	l := tasks.Limit{Key: "one", Concurrency: 1}
	first, second := prioritized(q, "first", 5, ""), prioritized(q, "second", 5, "")
	first.Limit, second.Limit = &l, &l
	publish(t, b, first, second)
	holder := fetchOne(t, b, q)
	fetchNone(t, b, q)
	plain := newSig(q, "plain")
	publish(t, b, plain)
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1, Active: 1, Limited: 1})
	ack(t, b, holder)
	wantOrder(t, "after the holder's ack", fetchAll(t, b, q, 1, 2), []string{second.UUID, plain.UUID})

	// A cancelled task and one taken out leave their bands.
	c, out := prioritized(q, "c", 2, "k"), prioritized(q, "out", 2, "")
	publish(t, b, c, out)
	if _, _, err := b.CancelTask(ctx, q, c.UUID, "no longer wanted", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.TakeWaiting(ctx, q, out.UUID, brokers.TakeDelete, ""); err != nil {
		t.Fatal(err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{})
}

// testBadFairKey: a FairKey longer than MaxFairKeySize is refused, and
// nothing is written.
func testBadFairKey(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")
	ok := newSig(q, "ok")
	bad := prioritized(q, "bad", 0, strings.Repeat("k", tasks.MaxFairKeySize+1))
	if err := b.PublishTasks(context.Background(), ok, bad); !errors.Is(err, tasks.ErrBadFairKey) {
		t.Fatalf("Publish of a task with a fair key of %d bytes: %v, want ErrBadFairKey", len(bad.FairKey), err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{})
}
