package brokertest

import (
	"context"
	"errors"
	"testing"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

func take(t *testing.T, b Broker, q string, sig *tasks.Signature, action brokers.TakeAction) {
	t.Helper()
	got, err := b.TakeWaiting(context.Background(), q, sig.UUID, action, "by an operator")
	if err != nil {
		t.Fatalf("TakeWaiting(%s, %s): %v", sig.UUID, action, err)
	}
	sameSignature(t, "TakeWaiting's signature", got, sig)
}

// testTakeWaiting: an operator deletes, archives or runs now a task that
// waits (pending, scheduled, retrying); a task that does not wait, or is
// not there, is refused with a clear error.
func testTakeWaiting(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	p := newSigs(q, "p", 3)
	publish(t, b, p...)
	take(t, b, q, p[1], brokers.TakeDelete)
	take(t, b, q, p[2], brokers.TakeArchive)
	wantOrder(t, "pending after a delete and an archive", infoUUIDs(list(t, b, q, brokers.StatusPending)), sigUUIDs(p[:1]))
	archived := list(t, b, q, brokers.StatusArchived)
	if len(archived) != 1 || archived[0].Signature.UUID != p[2].UUID || archived[0].LastError != "by an operator" {
		t.Fatalf("archive after TakeArchive: %+v, want %s with the reason", archived, p[2].UUID)
	}
	take(t, b, q, p[0], brokers.TakeRun) // pending already: stays
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1, Archived: 1})

	// Scheduled: run now (at the head), archived; deleted, it never
	// becomes pending.
	clk := stopClock(t, b)
	eta := clk.Now().Add(time.Hour)
	soon := clk.Now().Add(300 * time.Millisecond)
	runNow, archiveIt, deleteIt := newSig(q, "s"), newSig(q, "s"), newSig(q, "s")
	runNow.ETA, archiveIt.ETA, deleteIt.ETA = &eta, &eta, &soon
	publish(t, b, runNow, archiveIt, deleteIt)
	take(t, b, q, deleteIt, brokers.TakeDelete) // scheduled, or pending already on a slow machine
	take(t, b, q, runNow, brokers.TakeRun)
	wantOrder(t, "pending after running a scheduled task now", infoUUIDs(list(t, b, q, brokers.StatusPending)), []string{runNow.UUID, p[0].UUID})
	take(t, b, q, archiveIt, brokers.TakeArchive)
	clk.advanceTo(soon.Add(200 * time.Millisecond)) // the deleted task was not due
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 2, Archived: 2})

	// Retrying: deleted. Running: refused. Archived: refused. Unknown:
	// not found.
	d := fetchOne(t, b, q)
	must(t, "Retry", b.Retry(ctx, d, clk.Now().Add(time.Hour), "later"))
	take(t, b, q, d.Signature, brokers.TakeDelete)
	running := fetchOne(t, b, q)
	for _, tc := range []struct {
		what, uuid string
		want       error
	}{
		{"a running task", running.Signature.UUID, brokers.ErrTaskNotWaiting},
		{"an archived task", p[2].UUID, brokers.ErrTaskNotWaiting},
		{"an unknown task", "task_unknown", brokers.ErrTaskNotFound},
	} {
		if _, err := b.TakeWaiting(ctx, q, tc.uuid, brokers.TakeDelete, ""); !errors.Is(err, tc.want) {
			t.Fatalf("TakeWaiting of %s: %v, want %v", tc.what, err, tc.want)
		}
	}
	if _, err := b.TakeWaiting(ctx, q, p[0].UUID, "cancel", ""); err == nil {
		t.Fatal("TakeWaiting with an unknown action succeeded")
	}
	ack(t, b, running)
	wantSizes(t, b, q, brokers.QueueInfo{Archived: 2})

	// A retrying task run now is pending at once, with its retries
	// counted.
	retried := newSig(q, "r")
	publish(t, b, retried)
	d = fetchOne(t, b, q)
	must(t, "Retry", b.Retry(ctx, d, clk.Now().Add(time.Hour), "later"))
	take(t, b, q, retried, brokers.TakeRun)
	if d = fetchOne(t, b, q); d.Signature.UUID != retried.UUID || d.Retried != 1 {
		t.Fatalf("after running a retrying task now, fetched %s (Retried %d), want %s (Retried 1)", d.Signature.UUID, d.Retried, retried.UUID)
	}
	ack(t, b, d)

	// A unique task deleted or archived frees its key.
	for _, action := range []brokers.TakeAction{brokers.TakeDelete, brokers.TakeArchive} {
		u := uniqueSig(q, "u-"+string(action), time.Minute)
		publish(t, b, u)
		take(t, b, q, u, action)
		publish(t, b, uniqueSig(q, "u-"+string(action), time.Minute))
	}
}
