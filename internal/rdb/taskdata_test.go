package rdb

import (
	"context"
	"errors"
	"testing"

	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// What a running task keeps is written only under its lease, survives
// the task going back to its queue, and goes with the task when it is
// acknowledged.
func TestTaskDataIsFencedAndKeptUntilTheAck(t *testing.T) {
	t.Parallel()
	s := graphStore(t)
	ctx := context.Background()
	sig := &tasks.Signature{UUID: "task_data", Name: "n", RoutingKey: "q"}
	if err := s.Publish(ctx, PublishParams{Tasks: []*tasks.Signature{sig}, Pending: true}); err != nil {
		t.Fatal(err)
	}
	take := func() *store.Delivery {
		t.Helper()
		ds, err := s.Dequeue(ctx, "q", 1, nil)
		if err != nil || len(ds) != 1 {
			t.Fatalf("Dequeue: %v, %v", ds, err)
		}
		return ds[0]
	}
	first := take()
	if err := s.WriteTaskData(ctx, first, map[string][]byte{"checkpoint": []byte("1"), store.ProgressKey: []byte(`{"done":1}`)}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.TaskProgress(ctx, sig); err != nil || p == nil || p.Done != 1 {
		t.Fatalf("TaskProgress: %+v, %v; want done 1", p, err)
	}
	if err := s.Requeue(ctx, []*store.Delivery{first}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteTaskData(ctx, first, map[string][]byte{"checkpoint": []byte("stale")}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a write after the lease went: %v, want ErrLeaseLost", err)
	}
	second := take()
	data, err := s.ReadTaskData(ctx, second)
	if err != nil || string(data["checkpoint"]) != "1" || len(data) != 2 {
		t.Fatalf("ReadTaskData after a requeue: %q, %v; want the first holder's checkpoint and progress", data, err)
	}
	if _, err := s.Ack(ctx, second, nil); err != nil {
		t.Fatal(err)
	}
	if p, err := s.TaskProgress(ctx, sig); err != nil || p != nil {
		t.Fatalf("TaskProgress after the ack: %+v, %v; want none", p, err)
	}
}
