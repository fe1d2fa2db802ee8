package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// A lease whose expiry has passed is refused by the broker itself, before
// the recoverer takes the task back: a worker paused past its lease (GC,
// SIGSTOP) that wakes with the token still in place, and believing its
// lease still runs, changes nothing.
func testExpiredLeaseRefusedBeforeRecovery(t *testing.T, s *suite) {
	b := s.broker(t, func(c *config.Config) { c.RecoverInterval = time.Hour })
	ctx := context.Background()
	q := queueName(t, "q")
	publish(t, b, newSig(q, "slow"))
	d := fetchOne(t, b, q)
	must(t, "EndLease", b.EndLease(ctx, d)) // the broker's lease only
	if !d.Lease.Valid() {
		t.Fatal("Lease.Valid() = false before the settle, want the worker's lease still believed held")
	}
	outcome := tasks.NewSuccessTaskState(d.Signature, nil)
	wantLeaseLost(t, "Commit after expiry", b.Commit(ctx, d, outcome), d)
	wantLeaseLost(t, "Ack after expiry", b.Ack(ctx, d), d)
	wantLeaseLost(t, "Retry after expiry", b.Retry(ctx, d, time.Now(), "boom"), d)
	wantLeaseLost(t, "Archive after expiry", b.Archive(ctx, d, "boom"), d)
	if err := b.Requeue(ctx, d); err == nil {
		t.Fatal("Requeue after expiry: nil error, want ErrLeaseLost")
	}
	wantSizes(t, b, q, brokers.QueueInfo{Active: 1}) // still leased, for the recoverer
}

// An outcome committed by the holder travels with the task to the worker
// that takes it after a recovery; the stale holder can commit nothing more.
func testCommitTravelsToNextHolder(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	publish(t, b, newSig(q, "add"))
	first := fetchOne(t, b, q)
	if first.Outcome != nil {
		t.Fatalf("fresh delivery with Outcome %+v, want nil", first.Outcome)
	}
	outcome := tasks.NewSuccessTaskState(first.Signature, []*tasks.TaskResult{{Type: "int64", Value: 42}})
	must(t, "Commit", b.Commit(ctx, first, outcome))

	endLease(t, b, first)
	eventually(t, "committed task recovered", func() bool { return queueInfo(t, b, q).Pending == 1 })
	second := fetchOne(t, b, q)
	if second.Outcome == nil {
		t.Fatal("delivery after a recovery has no Outcome, want the committed one")
	}
	got := second.Outcome
	if got.State != tasks.StateSuccess || got.TaskUUID != outcome.TaskUUID || len(got.Results) != 1 ||
		got.Results[0].Type != "int64" || fmt.Sprint(got.Results[0].Value) != "42" {
		t.Fatalf("Outcome = %+v, want SUCCESS of %s with int64 42", got, outcome.TaskUUID)
	}
	failure := tasks.NewFailureTaskState(first.Signature, "stale")
	wantLeaseLost(t, "stale holder's Commit", b.Commit(ctx, first, failure), first)
	ack(t, b, second)
	wantSizes(t, b, q, brokers.QueueInfo{})
}
