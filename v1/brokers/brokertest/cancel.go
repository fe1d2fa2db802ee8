package brokertest

import (
	"context"
	"errors"
	"testing"
	"time"

	brokers "github.com/b6192125/machinist/v1/brokers/iface"
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
		got, running, err := b.CancelTask(ctx, q, sig.UUID, "task cancelled by a test", 0)
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
	announce(t, b, q, map[string]brokers.AggregationPolicy{"notify": {MaxSize: 3}})
	m := member(q, "notify", "k")
	publish(t, b, m, member(q, "notify", "k"))
	cancel(m, false)
	wantSizes(t, b, q, brokers.QueueInfo{Aggregating: 1})
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
	var rd *brokers.Delivery
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
		if !errors.Is(err, brokers.ErrLeaseLost) {
			t.Fatalf("%s of a cancelled task: %v, want ErrLeaseLost", what, err)
		}
	}
	archived := list(t, b, q, brokers.StatusArchived)
	if len(archived) != 1 || archived[0].Signature.UUID != running.UUID || archived[0].LastError != "task cancelled by a test" {
		t.Fatalf("archive after cancelling a running task: %+v", archived)
	}

	// Gone, or archived: refused.
	if _, _, err := b.CancelTask(ctx, q, running.UUID, "again", 0); !errors.Is(err, brokers.ErrTaskNotWaiting) {
		t.Fatalf("CancelTask of an archived task: %v, want ErrTaskNotWaiting", err)
	}
	if _, _, err := b.CancelTask(ctx, q, "task_unknown", "x", 0); !errors.Is(err, brokers.ErrTaskNotFound) {
		t.Fatalf("CancelTask of an unknown task: %v, want ErrTaskNotFound", err)
	}
	stopWatch()
	if err := <-watching; !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchCancels after its context ended: %v, want context.Canceled", err)
	}
}

// testCancelTaskBar: cancelling with a bar (a workflow's cancellation)
// keeps out a task the queue does not hold yet, and a waiting one it
// deletes: a Publish of either is refused with a *CancelledError carrying
// the reason (wrapping tasks.ErrTaskCancelled), the bar is refused by
// cancel and take as "cancelled", and once the bar ends the task can be
// sent again. Other tasks, and a running task, are cancelled as without a
// bar.
func testCancelTaskBar(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	const reason = "workflow cancelled by a test"
	wantKeptOut := func(sig *tasks.Signature) {
		t.Helper()
		err := b.Publish(ctx, tasks.CopySignature(sig))
		var ce *brokers.CancelledError
		if !errors.As(err, &ce) || ce.Task != sig.UUID || ce.Reason != reason || !errors.Is(err, tasks.ErrTaskCancelled) {
			t.Fatalf("Publish of a task kept out: %v, want a *CancelledError for %s with reason %q", err, sig.UUID, reason)
		}
		if _, _, err := b.CancelTask(ctx, q, sig.UUID, reason, time.Minute); !errors.Is(err, brokers.ErrTaskNotWaiting) {
			t.Fatalf("CancelTask of a task kept out: %v, want ErrTaskNotWaiting", err)
		}
		if _, err := b.TakeWaiting(ctx, q, sig.UUID, brokers.TakeRun, ""); !errors.Is(err, brokers.ErrTaskNotWaiting) {
			t.Fatalf("TakeWaiting of a task kept out: %v, want ErrTaskNotWaiting", err)
		}
	}

	// Not sent yet: kept out.
	unsent := newSig(q, "next")
	sig, running, err := b.CancelTask(ctx, q, unsent.UUID, reason, time.Minute)
	if sig != nil || running || err != nil {
		t.Fatalf("CancelTask with a bar of a task not sent: %v, %v, %v; want nil, false, nil", sig, running, err)
	}
	wantKeptOut(unsent)
	// A publish of several tasks with a kept-out one writes none of them.
	other := newSig(q, "other")
	if err := b.PublishTasks(ctx, other, tasks.CopySignature(unsent)); !errors.Is(err, tasks.ErrTaskCancelled) {
		t.Fatalf("Publish of a task kept out with another: %v, want ErrTaskCancelled", err)
	}
	wantSizes(t, b, q, brokers.QueueInfo{})

	// Waiting: deleted and kept out.
	pending := newSig(q, "pending")
	publish(t, b, pending)
	sig, running, err = b.CancelTask(ctx, q, pending.UUID, reason, time.Minute)
	if err != nil || running {
		t.Fatalf("CancelTask with a bar of a pending task: %v, running %v", err, running)
	}
	sameSignature(t, "CancelTask's signature", sig, pending)
	wantSizes(t, b, q, brokers.QueueInfo{})
	wantKeptOut(pending)

	// Running: cancelled and archived as without a bar.
	active := newSig(q, "active")
	publish(t, b, active)
	d := fetchOne(t, b, q)
	if _, running, err := b.CancelTask(ctx, q, active.UUID, reason, time.Minute); err != nil || !running {
		t.Fatalf("CancelTask with a bar of a running task: %v, running %v", err, running)
	}
	wantLeaseLost(t, "Ack of a cancelled task", b.Ack(ctx, d), d)
	wantSizes(t, b, q, brokers.QueueInfo{Archived: 1})

	// Without a bar nothing is kept out; with one, only until it ends.
	free := newSig(q, "free")
	if _, _, err := b.CancelTask(ctx, q, free.UUID, reason, 0); !errors.Is(err, brokers.ErrTaskNotFound) {
		t.Fatalf("CancelTask without a bar of a task not sent: %v, want ErrTaskNotFound", err)
	}
	publish(t, b, free)
	const bar = 200 * time.Millisecond
	clk := stopClock(t, b)
	short := newSig(q, "short")
	barred := clk.Now()
	if _, _, err := b.CancelTask(ctx, q, short.UUID, reason, bar); err != nil {
		t.Fatalf("CancelTask with a short bar: %v", err)
	}
	// Kept out while the bar lasts (a machine that held the test up past
	// it may see it ended already).
	clk.advanceTo(barred.Add(bar - time.Millisecond))
	err = b.Publish(ctx, tasks.CopySignature(short))
	if (err == nil && clk.before(barred.Add(bar))) || (err != nil && !errors.Is(err, tasks.ErrTaskCancelled)) {
		t.Fatalf("Publish %v into a bar of %v: %v, want ErrTaskCancelled", clk.Since(barred), bar, err)
	}
	if err == nil {
		return
	}
	clk.advanceTo(barred.Add(bar))
	eventually(t, "a task whose bar ended can be published", func() bool {
		err := b.Publish(ctx, tasks.CopySignature(short))
		if err != nil && !errors.Is(err, tasks.ErrTaskCancelled) {
			t.Fatalf("Publish once the bar ended: %v", err)
		}
		return err == nil
	})
}
