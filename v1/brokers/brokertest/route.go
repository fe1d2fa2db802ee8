package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// testReroute holds a broker to Announce and Reroute: a task a worker does
// not have goes to the workers that announced its name, before the pending
// list, to them only; with no such worker alive Reroute changes nothing;
// rerouted tasks count as pending; and they go back to pending once their
// workers stop announcing.
func testReroute(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	add, mul := brokers.NewTaskNames([]string{"add"}), brokers.NewTaskNames([]string{"mul"})

	a := newSig(q, "add")
	publish(t, b, a)
	d := fetchFor(t, b, mul, []string{q}, 1)[0]
	if ok, err := b.Reroute(ctx, d); ok || err != nil {
		t.Fatalf("Reroute with no worker announcing %q = %v, %v; want false, nil", a.Name, ok, err)
	}
	if !d.Lease.Valid() {
		t.Fatal("a Reroute that found no worker gave up the lease")
	}
	wantSizes(t, b, q, brokers.QueueInfo{Active: 1})

	must(t, "Announce", b.Announce(ctx, []string{q}, add, time.Minute))
	if ok, err := b.Reroute(ctx, d); !ok || err != nil {
		t.Fatalf("Reroute with a worker announcing %q = %v, %v; want true, nil", a.Name, ok, err)
	}
	ok, err := b.Reroute(ctx, d)
	wantLeaseLost(t, "Reroute of a task already rerouted", err, d)
	if ok {
		t.Fatal("Reroute of a task already rerouted = true")
	}
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1})
	wantOrder(t, "pending tasks with one rerouted", infoUUIDs(list(t, b, q, brokers.StatusPending)), []string{a.UUID})

	// Only a worker that has the name takes it: not one with other names,
	// nor one without names.
	fetchNoneFor(t, b, mul, q)
	fetchNoneFor(t, b, nil, q)
	m := newSig(q, "mul")
	publish(t, b, m)
	addSub := brokers.NewTaskNames([]string{"add", "sub"})
	must(t, "Announce", b.Announce(ctx, []string{q}, addSub, time.Minute))
	ds := fetchFor(t, b, addSub, []string{q}, 2)
	wantOrder(t, "a fetch with the rerouted name", deliveryUUIDs(ds), []string{a.UUID, m.UUID})
	if ds[0].Retried != 0 || ds[0].Recovered != 0 || !ds[0].Lease.Valid() {
		t.Fatalf("rerouted task fetched with Retried %d Recovered %d, lease valid %v; want 0 0 true",
			ds[0].Retried, ds[0].Recovered, ds[0].Lease.Valid())
	}
	ack(t, b, ds...)
	wantSizes(t, b, q, brokers.QueueInfo{})

	// A rerouted task whose workers stop announcing goes back to pending
	// (the recoverer's work), where any worker takes it.
	div := newSig(q, "div")
	publish(t, b, div)
	d = fetchFor(t, b, mul, []string{q}, 1)[0]
	must(t, "Announce", b.Announce(ctx, []string{q}, brokers.NewTaskNames([]string{"div"}), time.Second))
	if ok, err := b.Reroute(ctx, d); !ok || err != nil {
		t.Fatalf("Reroute = %v, %v; want true, nil", ok, err)
	}
	d = fetchFor(t, b, mul, []string{q}, 1)[0]
	if d.Signature.UUID != div.UUID {
		t.Fatalf("after the announcement expired, fetched %s, want the rerouted %s", d.Signature.UUID, div.UUID)
	}
	if d.Retried != 0 || d.Recovered != 0 {
		t.Fatalf("task put back after its workers stopped announcing: Retried %d Recovered %d, want 0 0", d.Retried, d.Recovered)
	}
	ack(t, b, d)
}

// testListRerouted: pending tasks are listed page by page, the pending
// list first and then the tasks rerouted to the workers that have them.
func testListRerouted(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	a := newSig(q, "add")
	publish(t, b, a)
	d := fetchFor(t, b, brokers.NewTaskNames([]string{"mul"}), []string{q}, 1)[0]
	must(t, "Announce", b.Announce(ctx, []string{q}, brokers.NewTaskNames([]string{"add"}), time.Minute))
	if ok, err := b.Reroute(ctx, d); !ok || err != nil {
		t.Fatalf("Reroute = %v, %v; want true, nil", ok, err)
	}
	p := newSigs(q, "plain", 2)
	publish(t, b, p...)
	for _, c := range []struct {
		offset, limit int
		want          []string
	}{
		{0, 2, []string{p[0].UUID, p[1].UUID}},
		{1, 2, []string{p[1].UUID, a.UUID}},
		{2, 5, []string{a.UUID}},
		{0, 0, []string{p[0].UUID, p[1].UUID, a.UUID}},
		{3, 1, []string{}},
	} {
		infos, err := b.ListTasks(ctx, q, brokers.StatusPending, c.offset, c.limit)
		if err != nil {
			t.Fatalf("ListTasks(%d, %d): %v", c.offset, c.limit, err)
		}
		wantOrder(t, fmt.Sprintf("pending page (%d, %d)", c.offset, c.limit), infoUUIDs(infos), c.want)
	}
}
