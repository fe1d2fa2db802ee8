// Package newid marks in a context the task UUID that a send has just
// made, so that a broker publishing the task can skip looking for an
// earlier task, or a state, with that UUID: there can be none, only what
// the publish's own attempt sent again may have written.
package newid

import (
	"context"
	"sync/atomic"
)

type key struct{}

// mark is a UUID a send made, and whether a publish has taken it.
type mark struct {
	id    string
	taken atomic.Bool
}

// With returns ctx marked with id, a random UUID this send made for its
// task (one the caller did not choose).
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, &mark{id: id})
}

// Made reports whether ctx marks id as a UUID its send has just made, and
// the mark is not taken yet; it takes it. So only the first publish with
// ctx counts it as made: a second one (a broker wrapper trying again after
// an error) finds the task the first may have queued.
func Made(ctx context.Context, id string) bool {
	m, _ := ctx.Value(key{}).(*mark)
	return m != nil && id != "" && m.id == id && m.taken.CompareAndSwap(false, true)
}
