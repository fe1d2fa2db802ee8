package transport

import "errors"

// The sentinels keep the "rdb:" prefix they had before the transport left
// package rdb: they reach users in the errors of rdb.Store's methods, which
// re-exports ErrNotReplicated.
var (
	// ErrClosed is returned by Do after Close.
	ErrClosed = errors.New("rdb: batcher closed")

	// ErrUnsent marks the error of a call whose commands were not sent:
	// its context ended, or the batcher closed, before they went out; or
	// Redis refused them.
	ErrUnsent = errors.New("rdb: not sent")
	// ErrUnanswered marks the error of a call whose commands went out and
	// whose reply did not come (its context ended first), or of one sent
	// again after such an attempt: Redis may have run them.
	ErrUnanswered = errors.New("rdb: sent, reply not received")

	// ErrNotReplicated is wrapped by the error of a write that fewer
	// replicas than Replicas.N confirmed in time: the master may have
	// applied it, and it may be lost if the master fails.
	ErrNotReplicated = errors.New("rdb: write not confirmed by enough replicas")
)
