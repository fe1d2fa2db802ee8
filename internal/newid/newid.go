// Package newid marks in a context the task UUID that a send has just
// made, so that a broker publishing the task can skip looking for an
// earlier task, or a state, with that UUID: there can be none.
package newid

import "context"

type key struct{}

// With returns ctx marked with id, a random UUID this send made for its
// task (one the caller did not choose).
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, key{}, id)
}

// Made reports whether ctx marks id as a UUID its send has just made.
func Made(ctx context.Context, id string) bool {
	made, _ := ctx.Value(key{}).(string)
	return id != "" && made == id
}
