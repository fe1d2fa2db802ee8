package brokertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

func limited(queue, name string, l tasks.Limit) *tasks.Signature {
	sig := newSig(queue, name)
	sig.Limit = &l
	return sig
}

// testLimitConcurrency: of the tasks of one limit key, at most Concurrency
// are leased at once; the others are parked (QueueInfo.Limited), not
// handed out, and one comes back each time a holder stops running
// (acknowledged, retried, archived, cancelled). Tasks of other keys, and
// unlimited ones, pass them by. A parked task can be cancelled and taken
// out by an operator.
func testLimitConcurrency(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	l := tasks.Limit{Key: "api.example.com", Concurrency: 2}
	var sigs []*tasks.Signature
	for range 6 {
		sigs = append(sigs, limited(q, "call", l))
	}
	other := limited(q, "other", tasks.Limit{Key: "other", Concurrency: 1})
	plain := newSig(q, "plain")
	publish(t, b, append(append([]*tasks.Signature{}, sigs...), other, plain)...)

	got := fetch(t, b, []string{q}, 10)
	wantOrder(t, "first fetch", deliveryUUIDs(got), []string{sigs[0].UUID, sigs[1].UUID, other.UUID, plain.UUID})
	sameSignature(t, "a limited task", got[0].Signature, sigs[0])
	wantSizes(t, b, q, brokers.QueueInfo{Active: 4, Limited: 4})
	fetchNone(t, b, q)
	// A limit that cannot be applied is refused, and nothing is written.
	if err := b.Publish(ctx, limited(q, "call", tasks.Limit{Key: "k", Concurrency: -1})); !errors.Is(err, tasks.ErrBadLimit) {
		t.Fatalf("Publish of a task with a negative limit: %v, want ErrBadLimit", err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{Active: 4, Limited: 4})

	// Each way a holder stops running frees its slot for a parked task.
	holders := got[:2]
	ack(t, b, got[2:]...)
	must(t, "Ack", b.Ack(ctx, holders[0]))
	next := fetchOne(t, b, q)
	if next.Signature.UUID != sigs[2].UUID {
		t.Fatalf("after an ack, fetched %s, want the first parked %s", next.Signature.UUID, sigs[2].UUID)
	}
	fetchNone(t, b, q)
	must(t, "Retry", b.Retry(ctx, holders[1], time.Now().Add(time.Hour), "later"))
	next2 := fetchOne(t, b, q)
	must(t, "Archive", b.Archive(ctx, next, "broken"))
	next3 := fetchOne(t, b, q)
	if _, running, err := b.CancelTask(ctx, q, next3.Signature.UUID, "cancelled", 0); err != nil || !running {
		t.Fatalf("CancelTask of a running limited task: %v, running %v", err, running)
	}
	last := fetchOne(t, b, q)
	wantOrder(t, "fetched as slots freed", []string{next2.Signature.UUID, next3.Signature.UUID, last.Signature.UUID},
		[]string{sigs[3].UUID, sigs[4].UUID, sigs[5].UUID})
	wantSizes(t, b, q, brokers.QueueInfo{Active: 2, Retry: 1, Archived: 2})

	// A parked task can be cancelled, deleted, archived, run now.
	parked := []*tasks.Signature{limited(q, "call", l), limited(q, "call", l), limited(q, "call", l)}
	publish(t, b, parked...)
	fetchNone(t, b, q)
	wantSizes(t, b, q, brokers.QueueInfo{Active: 2, Retry: 1, Archived: 2, Limited: 3})
	if _, running, err := b.CancelTask(ctx, q, parked[0].UUID, "cancelled", 0); err != nil || running {
		t.Fatalf("CancelTask of a parked task: %v, running %v", err, running)
	}
	if _, err := b.TakeWaiting(ctx, q, parked[1].UUID, brokers.TakeRun, ""); err != nil {
		t.Fatalf("TakeWaiting(run) of a parked task: %v", err)
	}
	if _, err := b.TakeWaiting(ctx, q, parked[1].UUID, brokers.TakeArchive, "archived"); err != nil {
		t.Fatalf("TakeWaiting(archive) of a parked task: %v", err)
	}
	// A waiting task of the key that leaves lets a parked one try again
	// (a holder's end may have let it go for the slot it freed): back in
	// pending, it is parked again while the key is full.
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1, Active: 2, Retry: 1, Archived: 3})
	fetchNone(t, b, q)
	wantSizes(t, b, q, brokers.QueueInfo{Active: 2, Retry: 1, Archived: 3, Limited: 1})
	ack(t, b, next2, last)
	got = fetch(t, b, []string{q}, 10)
	wantOrder(t, "the parked task left", deliveryUUIDs(got), []string{parked[2].UUID})
	ack(t, b, got...)
	wantSizes(t, b, q, brokers.QueueInfo{Retry: 1, Archived: 3})
}

// testLimitDeadHolder: a holder whose lease ran out (its worker died)
// holds its slot no more: a parked task of its key runs, and the
// recovered holder waits for a slot in turn.
func testLimitDeadHolder(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")
	l := tasks.Limit{Key: "k", Concurrency: 1}
	first, second := limited(q, "call", l), limited(q, "call", l)
	publish(t, b, first, second)
	d := fetchOne(t, b, q)
	if d.Signature.UUID != first.UUID {
		t.Fatalf("fetched %s, want %s", d.Signature.UUID, first.UUID)
	}
	fetchNone(t, b, q)
	// Not renewed, the lease runs out; one of the two runs then, never
	// both.
	endLease(t, b, d)
	var taken *brokers.Delivery
	eventually(t, "a task of the key to be taken after its holder died", func() bool {
		ds, err := b.Fetch(ctxTimeout(t, 50*time.Millisecond), []string{q}, 10, nil)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Fetch: %v", err)
		}
		if len(ds) > 1 {
			t.Fatalf("fetched %d tasks of a key limited to 1", len(ds))
		}
		if len(ds) == 1 {
			taken = ds[0]
		}
		return taken != nil
	})
	fetchNone(t, b, q)
	ack(t, b, taken)
	ack(t, b, fetchOne(t, b, q))
	wantSizes(t, b, q, brokers.QueueInfo{})
}

// testLimitRate: the tasks of a key with a rate start one every Per /
// Rate: the others are scheduled at the start each books, and taken then.
func testLimitRate(t *testing.T, s *suite) {
	b := s.broker(t)
	clk := stopClock(t, b)
	q := queueName(t, "q")
	const step = 150 * time.Millisecond
	l := tasks.Limit{Key: "r", Rate: 2, Per: 2 * step}
	sigs := []*tasks.Signature{limited(q, "call", l), limited(q, "call", l), limited(q, "call", l)}
	publish(t, b, sigs...)
	// The first starts between start and fetched (the store's clock).
	start := clk.Now()
	got := fetch(t, b, []string{q}, 10)
	fetched := clk.Now()
	wantOrder(t, "first fetch", deliveryUUIDs(got), []string{sigs[0].UUID})
	// The others wait for their starts (a machine that held the test up
	// may have let the second's come).
	info := queueInfo(t, b, q)
	if info.Active != 1 || info.Scheduled+info.Pending != 2 || (info.Pending > 0 && clk.before(start.Add(step))) {
		t.Fatalf("QueueInfo after the first fetch = %+v, want 1 active and 2 scheduled", info)
	}
	ack(t, b, got...)
	for i, sig := range sigs[1:] {
		// Its booked start: i+1 steps after the first's.
		booked := time.Duration(i+1) * step
		clk.advanceTo(start.Add(booked - time.Millisecond))
		if in := getTask(t, b, q, sig.UUID); in.Status == brokers.StatusScheduled {
			between(t, fmt.Sprintf("task %d's start", i+1), in.NextProcessAt, start.Add(booked), fetched.Add(booked))
		} else if clk.before(start.Add(booked)) {
			t.Fatalf("task %d of a key with a rate of one per %v is %s 1ms before its start, want scheduled", i+1, step, in.Status)
		}
		clk.advanceTo(fetched.Add(booked))
		d := fetchOne(t, b, q)
		if d.Signature.UUID != sig.UUID {
			t.Fatalf("fetched %s, want %s", d.Signature.UUID, sig.UUID)
		}
		if clk.before(start.Add(booked)) {
			t.Fatalf("task %d of a key with a rate of one per %v taken %v after the first", i+1, step, clk.Since(start))
		}
		ack(t, b, d)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
