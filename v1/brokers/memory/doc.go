// Package memory makes the broker of "memory://": the Redis broker, on an
// in-process Redis-compatible engine of its own (miniredis), so that it
// runs the same store as Redis, its Lua scripts and all, with no server to
// run. What it holds lives as long as the broker; nothing is shared with
// another process.
//
//	b := memory.New(memory.OptionsFrom(cnf.WithDefaults()))
//	defer b.Close() // stops its engine
//
// NewPair makes a broker and a result backend on one engine, as NewServer
// does for "memory://": the broker then writes the backend's states in the
// same step as it settles a task, as on one Redis.
package memory
