// Package worker is the engine behind machinery.Worker: the fetch loop, the
// concurrency limit, task execution with its state machine, lease renewal
// and shutdown. Users start workers through machinery.Server.NewWorker; this
// package is for the Server and for those who assemble a worker from their
// own Broker and Backend.
//
// # Running a task
//
// The fetch loop takes tasks from the broker only when a slot is free, as
// many as there are free slots, so a worker never holds a task it is not
// running and never runs more than its concurrency. A slot can also pass
// straight from one task to the next: with a broker that is a
// brokers.Relay (both shipped ones are), a task's acknowledgement takes the
// next task of its queue in the same step, and it runs in the slot the
// first freed, without a fetch (a chain's next step, sent by that same
// acknowledgement, is taken that way). The worker asks for that only while
// it is fetching, has no pre-consume gate, and when the task's queue is
// the one every fetch tries first (its only queue, or its first by strict
// priority), so it runs the tasks a fetch would have given it. Each task runs in its
// own goroutine with a context that carries the signature
// (tasks.SignatureFromContext), a deadline when the signature has a Timeout,
// and is cancelled when the task's lease is lost or the worker is stopped
// hard.
//
// The states written are STARTED, once a task has run for StartedAfter (1
// ms), then SUCCESS, RETRY or FAILURE. A shorter task goes from PENDING
// straight to its outcome, and RECEIVED is never written: either would be
// replaced at once, and skipping them saves Redis work on every short task.
// A task that returns an error is retried when it returned a
// tasks.Retriable error (found with errors.As, so wrapping is fine) or has
// RetryCount left (then after RetryTimeout seconds, advanced along the
// Fibonacci sequence); otherwise it fails for good: its OnError callbacks are
// sent with the error message prepended to their Args, and it is archived.
// A task that succeeds sends its OnSuccess callbacks with its results
// appended (unless it or the callback is Immutable) and, as a chord member,
// takes part in electing the member that sends the chord callback. Only
// then is the task acknowledged, so a worker that dies before that point
// leaves the task to be recovered and run again.
//
// # Leases
//
// A heartbeater renews the leases of running tasks, and of the
// aggregation batches being built, every Config.LeaseRenewInterval. A
// task whose lease is lost (renewal refused, or its expiry passed without
// a renewal) has its context cancelled, and when it returns nothing more
// is written about it: the broker may already have handed it to another
// worker; so does an aggregator whose batch's lease is lost.
//
// Beside it, an announcer tells the broker the worker's task names (and
// aggregators) every LeaseRenewInterval, for a LeaseDuration; each attempt
// may take until the last announcement lapses. The worker's first
// announcement is made before it fetches, tried again on failure for up to
// a LeaseDuration. A task this worker has not registered is rerouted to a
// worker alive that announced its name, or, when none has, tried again
// after Config.UnregisteredTaskDelay and failed after
// Config.UnregisteredTaskTries. An aggregation member delivered as a task
// (the broker strands members no worker alive aggregates any more) is
// never run alone: it is tried again the same way, rejoining its group,
// and failed after as many tries.
//
// # Shutdown
//
// Shutdown happens in this order: the fetch loop stops, and
// acknowledgements take no next task, so nothing new starts; the batches
// being built, then the running tasks, get what is left of one
// Config.ShutdownTimeout to finish (none, on a hard stop); an aggregator
// still building then has its context cancelled (its batch comes back
// when its lease ends), and the tasks still running are cancelled and put
// back at the head of their queue, and nothing they do afterwards is
// written; then the announcer and the heartbeater stop.
package worker
