package newid

import (
	"context"
	"testing"
)

func TestMadeOnlyForTheMarkedUUID(t *testing.T) {
	ctx := With(context.Background(), "task_1")
	for _, c := range []struct {
		ctx  context.Context
		id   string
		want bool
	}{
		{ctx, "task_1", true},
		{ctx, "task_2", false}, // another UUID, e.g. set by a pre-publish handler
		{ctx, "", false},
		{context.Background(), "task_1", false},
		{With(context.Background(), ""), "", false},
	} {
		if got := Made(c.ctx, c.id); got != c.want {
			t.Errorf("Made(%q) = %v, want %v", c.id, got, c.want)
		}
	}
}
