package brokertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	backends "github.com/b6192125/machinist/v1/backends/iface"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// uniqueSig returns a signature of name on queue, unique for d.
func uniqueSig(queue, name string, d time.Duration) *tasks.Signature {
	sig := newSig(queue, name)
	sig.UniqueFor = d
	return sig
}

// wantNotUnique checks that err refuses task for holder, on queue.
func wantNotUnique(t *testing.T, what string, err error, task, holder *tasks.Signature) {
	t.Helper()
	var nu *tasks.NotUniqueError
	if !errors.Is(err, tasks.ErrNotUnique) || !errors.As(err, &nu) {
		t.Fatalf("%s: %v, want a *tasks.NotUniqueError", what, err)
	}
	if nu.Task != task.UUID || nu.Holder != holder.UUID || nu.Queue != task.RoutingKey || nu.Key != tasks.UniqueKeyOf(task) {
		t.Fatalf("%s: %+v, want task %s, holder %s, queue %s, key %s", what, nu, task.UUID, holder.UUID, task.RoutingKey, tasks.UniqueKeyOf(task))
	}
}

// testUniqueTask: a unique task holds its key (its name and args, or its
// UniqueKey, on its queue) from its publish until it is acknowledged or
// archived, or UniqueFor passes; a publish of another task with the key is
// refused, naming the holder, and publishes nothing.
func testUniqueTask(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	first := uniqueSig(q, "report", time.Minute)
	publish(t, b, first)

	second := uniqueSig(q, "report", time.Minute)
	wantNotUnique(t, "a second send with the key", b.Publish(ctx, second), second, first)
	// Refused with a task that could go: the publish is all or nothing.
	plain := newSig(q, "plain")
	wantNotUnique(t, "a publish with a refused unique task", b.PublishTasks(ctx, plain, second), second, first)
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1})
	// Two of one key in one publish: the second is refused.
	a, c := uniqueSig(q, "pair", time.Minute), uniqueSig(q, "pair", time.Minute)
	wantNotUnique(t, "two tasks with one key in a publish", b.PublishTasks(ctx, a, c), c, a)
	// Other args, another queue: other keys. The same UniqueKey: the same.
	args := uniqueSig(q, "report", time.Minute)
	args.Args = []tasks.Arg{{Type: "int64", Value: 1}}
	elsewhere := uniqueSig(queueName(t, "other"), "report", time.Minute)
	publish(t, b, args, elsewhere)
	named := uniqueSig(q, "export", time.Minute)
	named.UniqueKey = "tenant-7"
	namedToo := uniqueSig(q, "import", time.Minute)
	namedToo.UniqueKey = "tenant-7"
	publish(t, b, named)
	wantNotUnique(t, "another task name with the same UniqueKey", b.Publish(ctx, namedToo), namedToo, named)
	// The holder again (a publish repeated): a duplicate, not a key refused.
	if err := b.Publish(ctx, first); !errors.Is(err, brokers.ErrDuplicateTask) {
		t.Fatalf("publish of the holder again: %v, want ErrDuplicateTask", err)
	}

	// Acknowledged, the holder frees its key.
	d := fetchOne(t, b, q)
	if d.Signature.UUID != first.UUID {
		t.Fatalf("fetched %s, want %s", d.Signature.UUID, first.UUID)
	}
	ack(t, b, d)
	publish(t, b, second)
	// Archived (failed for good), too.
	for {
		d = fetchOne(t, b, q)
		if d.Signature.UUID == second.UUID {
			break
		}
		ack(t, b, d)
	}
	must(t, "Archive", b.Archive(ctx, d, "failed"))
	third := uniqueSig(q, "report", time.Minute)
	publish(t, b, third)
	ack(t, b, fetchOne(t, b, q))

	// A retry keeps it.
	retried := uniqueSig(q, "retried", time.Minute)
	publish(t, b, retried)
	d = fetchOne(t, b, q)
	must(t, "Retry", b.Retry(ctx, d, time.Now().Add(time.Hour), "again later"))
	again := uniqueSig(q, "retried", time.Minute)
	wantNotUnique(t, "a send while the holder waits for its retry", b.Publish(ctx, again), again, retried)

	// No longer than UniqueFor, even while the holder waits.
	const uniqueFor = 300 * time.Millisecond
	clk := stopClock(t, b)
	short := uniqueSig(q, "short", uniqueFor)
	sent := clk.Now()
	publish(t, b, short)
	// The key's time runs from when the publish reached the store: after
	// sent, before published (a loaded machine may hold the publish up
	// between the two).
	published := clk.Now()
	clk.advanceTo(sent.Add(uniqueFor - time.Millisecond))
	later := uniqueSig(q, "short", uniqueFor)
	err := b.Publish(ctx, tasks.CopySignature(later))
	if err == nil && !clk.before(sent.Add(uniqueFor)) {
		return // a machine that held the test up past UniqueFor: later went
	}
	wantNotUnique(t, "a send 1ms before UniqueFor ends", err, later, short)
	clk.advanceTo(published.Add(uniqueFor))
	eventually(t, "a send once UniqueFor ended to go", func() bool {
		err := b.Publish(ctx, tasks.CopySignature(later))
		var nu *tasks.NotUniqueError
		if err != nil && !errors.As(err, &nu) {
			t.Fatalf("Publish once UniqueFor ended: %v", err)
		}
		return err == nil
	})
}

// testUniqueFreedByCommit: a unique task frees its key when its final
// outcome is committed (a worker does so before its state shows), not
// only at its acknowledgement or archive, which follow; a RETRY or
// STARTED it writes keeps the key.
func testUniqueFreedByCommit(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	for _, final := range []string{tasks.StateFailure, tasks.StateSuccess} {
		holder := uniqueSig(q, "report", time.Minute)
		publish(t, b, holder)
		d := fetchOne(t, b, q)
		next := uniqueSig(q, "report", time.Minute)
		wantNotUnique(t, "a send while the holder runs", b.Publish(ctx, next), next, holder)
		outcome := tasks.NewSuccessTaskState(d.Signature, nil)
		if final == tasks.StateFailure {
			outcome = tasks.NewFailureTaskState(d.Signature, "boom")
		}
		must(t, "Commit", b.Commit(ctx, d, outcome))
		if err := b.Publish(ctx, next); err != nil {
			t.Fatalf("a send once the holder committed %s, before its settle: %v, want accepted", final, err)
		}
		if final == tasks.StateFailure {
			must(t, "Archive", b.Archive(ctx, d, "boom"))
		} else {
			ack(t, b, d)
		}
		ack(t, b, fetchOne(t, b, q))
	}
}

// testUniqueFreedByFinalState: on a broker paired with its backend, the
// write that makes a unique task's final state show frees its key in the
// same step; a STARTED or RETRY state keeps it.
func testUniqueFreedByFinalState(t *testing.T, newPair func(t *testing.T, cnf *config.Config) (PairedBroker, backends.ContextBackend)) {
	b, _ := pair(t, newPair)
	ctx := context.Background()
	q := queueName(t, "q")
	for _, commit := range []bool{true, false} {
		holder := uniqueSig(q, "report", time.Minute)
		publish(t, b, holder)
		d := fetchOne(t, b, q)
		next := uniqueSig(q, "report", time.Minute)
		for _, st := range []*tasks.TaskState{tasks.NewStartedTaskState(d.Signature), tasks.NewRetryTaskState(d.Signature)} {
			if _, err := b.WriteState(ctx, d, st, false); err != nil {
				t.Fatalf("WriteState %s: %v", st.State, err)
			}
			wantNotUnique(t, "a send once the holder wrote "+st.State, b.Publish(ctx, next), next, holder)
		}
		if _, err := b.WriteState(ctx, d, tasks.NewFailureTaskState(d.Signature, "boom"), commit); err != nil {
			t.Fatalf("WriteState FAILURE (commit %v): %v", commit, err)
		}
		if err := b.Publish(ctx, next); err != nil {
			t.Fatalf("a send once the holder's FAILURE shows (commit %v), before its archive: %v, want accepted", commit, err)
		}
		must(t, "Archive", b.Archive(ctx, d, "boom"))
		ack(t, b, fetchOne(t, b, q))
	}
}

// testUniqueRace: of many concurrent publishes of tasks with one unique
// key, exactly one is accepted.
func testUniqueRace(t *testing.T, s *suite) {
	b := s.broker(t)
	q := queueName(t, "q")
	const keys, senders = 5, 8
	for k := range keys {
		var mu sync.Mutex
		won := 0
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range senders {
			wg.Go(func() {
				sig := uniqueSig(q, "race", time.Minute)
				sig.UniqueKey = string(rune('a' + k))
				<-start
				err := b.Publish(context.Background(), sig)
				switch {
				case err == nil:
					mu.Lock()
					won++
					mu.Unlock()
				case !errors.Is(err, tasks.ErrNotUnique):
					t.Errorf("Publish: %v, want nil or ErrNotUnique", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if won != 1 {
			t.Fatalf("key %d: %d of %d concurrent publishes accepted, want exactly 1", k, won, senders)
		}
	}
	wantSizes(t, b, q, brokers.QueueInfo{Pending: keys})
}

// testUniqueReplace: a unique task that debounces (UniqueReplace) replaces
// the signature (args, headers, ETA …) of the holder of its key while the holder
// waits, and takes the holder's UUID; a holder that has started refuses it.
func testUniqueReplace(t *testing.T, s *suite) {
	b := s.broker(t)
	ctx := context.Background()
	q := queueName(t, "q")
	debounced := func(arg int64, eta time.Time) *tasks.Signature {
		sig := uniqueSig(q, "reindex", time.Minute)
		sig.UniqueKey = "table:users"
		sig.UniqueReplace = true
		sig.Args = []tasks.Arg{{Type: "int64", Value: arg}}
		if !eta.IsZero() {
			sig.ETA = &eta
		}
		return sig
	}
	inAnHour, inTwo := time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	holder := debounced(1, inAnHour)
	publish(t, b, holder)
	// Scheduled: the replacement's args and ETA, the holder's UUID.
	again := debounced(2, inTwo)
	publish(t, b, again)
	if again.UUID != holder.UUID {
		t.Fatalf("the replacing signature's UUID is %s, want the holder's %s", again.UUID, holder.UUID)
	}
	scheduled := list(t, b, q, brokers.StatusScheduled)
	if len(scheduled) != 1 || scheduled[0].Signature.UUID != holder.UUID || !near(scheduled[0].NextProcessAt, inTwo, time.Second) {
		t.Fatalf("scheduled after a replacement: %+v, want the holder due at %v", scheduled, inTwo)
	}
	sameSignature(t, "the holder replaced", scheduled[0].Signature, again)
	// Now: pending, its args replaced again.
	now := debounced(3, time.Time{})
	publish(t, b, now)
	wantSizes(t, b, q, brokers.QueueInfo{Pending: 1})
	d := fetchOne(t, b, q)
	sameSignature(t, "the holder made pending", d.Signature, now)
	// Started: refused.
	late := debounced(4, time.Time{})
	wantNotUnique(t, "a replacement once the holder runs", b.Publish(ctx, late), late, holder)
	ack(t, b, d)
	publish(t, b, late) // the key is free: a new holder
	if late.UUID == holder.UUID {
		t.Fatal("a send after the holder finished took its UUID")
	}
}
