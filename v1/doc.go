// Package machinery is machinist's root package: it runs Go functions as
// background tasks and workflows across many processes, with machinery's
// API on a broker that does not lose work. It is named machinery, as
// machinery v1's root package is, so that a machinery program that imports
// it without a name only changes its import path.
//
// Register plain functions by name on a Server, send Signatures that name
// them (alone, or as a chain, group or chord), and wait for their results;
// Workers take the tasks from the broker and run them:
//
//	server, err := machinery.NewServer(&config.Config{Broker: "memory://"}) // in-process broker and backend
//	server.RegisterTask("add", func(a, b int64) (int64, error) { return a + b, nil })
//	worker := server.NewWorker("worker-1", 10)
//	go worker.Launch()
//	res, err := server.SendTask(&tasks.Signature{Name: "add", Args: []tasks.Arg{
//		{Type: "int64", Value: 1}, {Type: "int64", Value: 2}}})
//	values, err := res.Get(5 * time.Millisecond) // [3]
//
// A program written for machinery v1 compiles against machinist after its
// import prefix github.com/RichardKnop/machinery/v1 is rewritten to
// github.com/b6192125/machinist/v1. See docs/migrating.md for the places
// where machinist deliberately behaves differently (each one a machinery
// defect).
//
// A send (SendTaskWithContext, SendChainWithContext, …) returns when its
// context ends, whatever Redis does, and its error says what became of it:
// errors.Is(err, ErrNotSent) when nothing was sent, errors.Is(err,
// ErrMaybeSent) when the task may be queued (look it up by its UUID before
// sending it again).
//
// Every task a worker takes is held under a lease that the worker renews
// while the task runs; a task whose worker died comes back by itself once
// the lease runs out (package worker describes the protocol).
package machinery
