// Package transport carries package rdb's commands to Redis, and knows of
// Redis only what go-redis says: the Batcher lets concurrent callers share
// pipelines, a lane of them per key (batch.go); Again and Retry send a
// call again after an error that leaves unknown whether it ran, in one of
// the ways retry.go lists, and OnceCmd keeps go-redis from doing so on its
// own; a caller returns at its context's end whatever Redis does, and its
// error says whether its commands went out (deadline.go); and Replicas
// ends a write with WAIT, so that a write fewer replicas confirmed is an
// error like a lost reply (replicas.go).
//
// It imports go-redis and the standard library alone: the keys and the
// scripts are rdb's, and rdb chooses how each of its calls is sent.
package transport
