// Package memory makes the result backend of "memory://": the Redis
// backend, on an in-process Redis-compatible engine of its own (see the
// broker's package, brokers/memory, and its NewPair for a broker and a
// backend on one engine).
//
//	be := memory.New(memory.OptionsFrom(cnf.WithDefaults()))
//	defer be.Close() // stops its engine
package memory
