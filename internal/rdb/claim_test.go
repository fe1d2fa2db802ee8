package rdb

import (
	"context"
	"fmt"
	"testing"

	"github.com/b6192125/machinist/internal/redistest"
	"github.com/b6192125/machinist/v1/tasks"
)

// Holds finds a task in whichever shard holds it, even one that a send
// now would not choose.
func TestHoldsLooksInEveryShard(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	client, prefix := srv.Client(t), srv.Prefix(t)
	s := shardStore(t, client, prefix, map[string]int{"h": 2})
	ctx := context.Background()
	var sigs []*tasks.Signature
	for i := range 20 {
		sigs = append(sigs, &tasks.Signature{UUID: fmt.Sprint("h", i), Name: "n", RoutingKey: "h"})
	}
	if err := s.Publish(ctx, PublishParams{Tasks: sigs[:10]}); err != nil {
		t.Fatal(err)
	}
	grown := shardStore(t, client, prefix, map[string]int{"h": 5})
	asked := make([]*tasks.Signature, len(sigs))
	for i, sig := range sigs {
		asked[i] = &tasks.Signature{UUID: sig.UUID, Name: "n", RoutingKey: "h"}
	}
	held, err := grown.Holds(ctx, asked)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range held {
		if h != (i < 10) {
			t.Fatalf("Holds(%s) = %t after the shards grew, want %t", sigs[i].UUID, h, i < 10)
		}
	}
}
