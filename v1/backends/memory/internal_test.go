package memory

import (
	"context"
	"testing"
	"time"

	"github.com/b6192125/machinist/v1/tasks"
)

// Expired states and completed groups that nobody reads are deleted by the
// next write once a minute has passed since the last sweep.
func TestWriteSweepsExpiredEntries(t *testing.T) {
	b := New(Options{ResultsExpireIn: time.Second})
	ctx := context.Background()
	old := &tasks.Signature{UUID: "task_old", Name: "n", GroupUUID: "group_old", GroupTaskCount: 1}
	if err := b.SetStateSuccessContext(ctx, old, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.InitGroupContext(ctx, "group_running", []string{"task_x"}); err != nil {
		t.Fatal(err)
	}

	// Move the clock of the entries instead of waiting.
	b.mu.Lock()
	b.states["task_old"].expiresAt = time.Now().Add(-time.Second)
	b.groups["group_old"].expiresAt = time.Now().Add(-time.Second)
	b.lastSweep = time.Now().Add(-30 * time.Second)
	b.mu.Unlock()

	if err := b.SetStatePendingContext(ctx, &tasks.Signature{UUID: "task_new", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	_, kept := b.states["task_old"]
	b.lastSweep = time.Now().Add(-time.Minute)
	b.mu.Unlock()
	if !kept {
		t.Fatal("a write swept less than a minute after the last sweep")
	}

	if err := b.SetStatePendingContext(ctx, &tasks.Signature{UUID: "task_newer", Name: "n"}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.states["task_old"]; ok {
		t.Fatal("expired state not swept")
	}
	if _, ok := b.groups["group_old"]; ok {
		t.Fatal("expired group not swept")
	}
	if _, ok := b.groups["group_running"]; !ok {
		t.Fatal("a group with unfinished members was swept")
	}
	if len(b.states) != 2 {
		t.Fatalf("%d states after the sweep, want the 2 live ones", len(b.states))
	}
}
