package brokertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/tasks"
)

// testCancelTask: a cancelled task that waits is deleted; a running one
// loses its lease (its holder can settle it no more, not even by renewing),
// is archived with the reason, and the watchers are told its UUID; a task
// that is gone or archived is refused clearly; a unique task frees its key.
func testCancelTask(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	cancel := func(sig *tasks.Signature, wantRunning bool) {
		t.Helper()
		got, running, err := b.CancelTask(ctx, q, sig.UUID, "task cancelled by a test")
		if err != nil {
			t.Fatalf("CancelTask(%s): %v", sig.UUID, err)
		}
		if running != wantRunning {
			t.Fatalf("CancelTask(%s) running = %v, want %v", sig.UUID, running, wantRunning)
		}
		sameSignature(t, "CancelTask's signature", got, sig)
	}

	// Waiting: pending, scheduled, retrying, a member in its group.
	pending := uniqueSig(q, "p", time.Minute)
	later := time.Now().Add(time.Hour)
	scheduled := newSig(q, "s")
	scheduled.ETA = &later
	retrying := newSig(q, "r")
	publish(t, b, pending, scheduled, retrying)
	cancel(pending, false)
	cancel(scheduled, false)
	d := fetchOne(t, b, q)
	must(t, "Retry", b.Retry(ctx, d, later, "later"))
	cancel(retrying, false)
	announce(t, b, q, map[string]iface.AggregationPolicy{"notify": {MaxSize: 3}})
	m := member(q, "notify", "k")
	publish(t, b, m, member(q, "notify", "k"))
	cancel(m, false)
	wantSizes(t, b, q, iface.QueueInfo{Aggregating: 1})
	publish(t, b, uniqueSig(q, "p", time.Minute)) // the key was freed

	// Running: watched.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched := make(chan string, 100)
	watching := make(chan error, 1)
	go func() { watching <- b.WatchCancels(wctx, func(uuid string) { watched <- uuid }) }()
	select {
	case uuid := <-watched:
		if uuid != "" {
			t.Fatalf("WatchCancels first told %q, want \"\" (set up)", uuid)
		}
	case <-time.After(waitLong):
		t.Fatal("WatchCancels not set up")
	}
	running := newSig(q, "running")
	publish(t, b, running)
	var rd *iface.Delivery
	for rd == nil {
		if d := fetchOne(t, b, q); d.Signature.UUID == running.UUID {
			rd = d
		} else {
			ack(t, b, d)
		}
	}
	cancel(running, true)
	// Other tests' cancellations may come too (a channel per key prefix).
	for told := false; !told; {
		select {
		case uuid := <-watched:
			told = uuid == running.UUID
		case <-time.After(waitLong):
			t.Fatal("the watchers were not told of the cancellation")
		}
	}
	wantLeaseLost(t, "Ack of a cancelled task", b.Ack(ctx, rd), rd)
	for what, err := range map[string]error{
		"Retry":  b.Retry(ctx, rd, time.Now(), "again"),
		"Commit": b.Commit(ctx, rd, tasks.NewSuccessTaskState(running, nil)),
	} {
		if !errors.Is(err, iface.ErrLeaseLost) {
			t.Fatalf("%s of a cancelled task: %v, want ErrLeaseLost", what, err)
		}
	}
	archived := list(t, b, q, iface.StatusArchived)
	if len(archived) != 1 || archived[0].Signature.UUID != running.UUID || archived[0].LastError != "task cancelled by a test" {
		t.Fatalf("archive after cancelling a running task: %+v", archived)
	}

	// Gone, or archived: refused.
	if _, _, err := b.CancelTask(ctx, q, running.UUID, "again"); !errors.Is(err, iface.ErrTaskNotWaiting) {
		t.Fatalf("CancelTask of an archived task: %v, want ErrTaskNotWaiting", err)
	}
	if _, _, err := b.CancelTask(ctx, q, "task_unknown", "x"); !errors.Is(err, iface.ErrTaskNotFound) {
		t.Fatalf("CancelTask of an unknown task: %v, want ErrTaskNotFound", err)
	}
	stopWatch()
	if err := <-watching; !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchCancels after its context ended: %v, want context.Canceled", err)
	}
}
