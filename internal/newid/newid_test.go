package newid

import (
	"context"
	"testing"
)

func TestMadeOnlyForTheMarkedUUID(t *testing.T) {
	for _, c := range []struct {
		ctx  context.Context
		id   string
		want bool
	}{
		{With(context.Background(), "task_1"), "task_1", true},
		{With(context.Background(), "task_1"), "task_2", false}, // e.g. set by a pre-publish handler
		{With(context.Background(), "task_1"), "", false},
		{context.Background(), "task_1", false},
		{With(context.Background(), ""), "", false},
	} {
		if got := Made(c.ctx, c.id); got != c.want {
			t.Errorf("Made(%q) = %v, want %v", c.id, got, c.want)
		}
	}
}

func TestMadeOnce(t *testing.T) {
	ctx := With(context.Background(), "task_1")
	if !Made(ctx, "task_1") {
		t.Fatal("first Made = false")
	}
	if Made(ctx, "task_1") {
		t.Fatal("second Made with the same context = true: a publish tried again would skip the lookup")
	}
	// A miss does not take the mark.
	ctx = With(context.Background(), "task_1")
	if Made(ctx, "task_2") || !Made(ctx, "task_1") {
		t.Fatal("a Made for another UUID took the mark")
	}
}
