package rdb

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// TestPurgeStateOfAQueuedTask follows a task whose state was purged while
// it waited, which has no state hash (its PENDING is implied by its task
// hash): GetState finds none while it waits, as before a worker takes it,
// and reads what the task's hash says once it has moved on: taken,
// archived, requeued from the archive, finished.
func TestPurgeStateOfAQueuedTask(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	s := New(srv.Client(t), Options{KeyPrefix: srv.Prefix(t), ResultsExpireIn: time.Hour, LeaseDuration: 10 * time.Second,
		ArchiveMaxAge: time.Hour, ArchiveMaxSize: 10}, false)
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	sig := &tasks.Signature{UUID: "task_purged", Name: "n", RoutingKey: "q"}
	if err := s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{sig}, Pending: true}); err != nil {
		t.Fatal(err)
	}
	wantState := func(when, want string) {
		t.Helper()
		for _, queue := range []string{"", "q"} {
			st, err := s.GetStateIn(ctx, queue, sig.UUID)
			switch {
			case want == "" && !errors.Is(err, store.ErrStateNotFound):
				t.Fatalf("GetStateIn(%q) %s: %+v, %v; want ErrStateNotFound", queue, when, st, err)
			case want != "" && (err != nil || st.State != want):
				t.Fatalf("GetStateIn(%q) %s: %+v, %v; want %s", queue, when, st, err, want)
			}
		}
	}
	purge := func() {
		t.Helper()
		if err := s.PurgeState(ctx, sig.UUID); err != nil {
			t.Fatal(err)
		}
	}
	take := func() *store.Delivery {
		t.Helper()
		ds, err := s.Dequeue(ctx, "q", 1, nil)
		if err != nil || len(ds) != 1 || ds[0].Signature.UUID != sig.UUID {
			t.Fatalf("Dequeue: %v, %v; want the purged task", ds, err)
		}
		return ds[0]
	}

	wantState("once sent", tasks.StatePending)
	purge()
	wantState("after PurgeState", "")
	purge()
	wantState("after PurgeState twice", "")

	d := take()
	wantState("once a worker took it", tasks.StatePending)
	if err := s.Requeue(ctx, []*store.Delivery{d}); err != nil {
		t.Fatal(err)
	}
	wantState("back in its queue, waiting as it did when purged", "")

	if err := s.Archive(ctx, take(), "boom"); err != nil {
		t.Fatal(err)
	}
	wantState("archived", tasks.StateFailure)
	purge()
	wantState("archived and purged", "")
	if n, err := s.RequeueArchived(ctx, "q", sig.UUID); err != nil || n != 1 {
		t.Fatalf("RequeueArchived: %d, %v", n, err)
	}
	wantState("requeued from the archive", tasks.StatePending)

	purge()
	d = take()
	if _, err := s.AckSuccess(ctx, d, tasks.NewSuccessTaskState(d.Signature, nil), nil, nil); err != nil {
		t.Fatal(err)
	}
	wantState("after its worker's success", tasks.StateSuccess)
}
