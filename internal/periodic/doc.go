// Package periodic sends periodic tasks: each tick is sent once across
// every process that registers the same name and spec on brokers that
// share their queues, even when the process sending it dies.
//
// The ticks. Every process computes the same ticks: a five-field cron spec
// names wall-clock times, and "@every D" ticks at the multiples of D
// (whole seconds, at least one, as cron rounds it) since the Unix epoch,
// not D after the process started. A tick is named by its key,
// periodic:<name>:<spec>:<tick in Unix seconds>, and its tasks get UUIDs
// derived from the key and their place in the workflow (Tick.copies), so
// that every process builds the same messages for it. A UUID set on a
// registered signature is not used: each tick's tasks are tasks of their
// own (a fixed UUID would be refused while the previous tick's task is
// queued).
//
// The claim. At the tick, each process asks the broker's Claimer for a
// lease on the key (store.Claimer.ClaimLease) of LeaseDuration.
// The one that wins sends the tick, then completes the claim: the key says
// "done" until its record ends, keep = max(period, 10 × LeaseDuration)
// after it was taken. The others do not forget the tick: they look again
// when the lease ends. Done: nothing to do. Held: look again when that
// lease ends. Ended without being completed (its holder died, or its send
// failed): take it over (ClaimResult.TakenOver) and send what was not
// sent. A process whose send failed looks again in the same way, and every
// process keeps looking until keep after the tick, then gives the tick up
// with an error in its log.
//
// Sending what was not sent. An attempt that took the tick over, and every
// look again, resends (Tick.resend): of the tick's roots (its task, its
// chain's first task, or its group's or chord's members; what follows them
// is sent by the workers that run them) it sends those that no earlier
// attempt sent (Scheduler.unsent). A root was published if and only if the
// broker holds it (Claimer.Holds: queued, scheduled, retrying, running) or
// it has left the broker, which it does only once a worker has written a
// final state (then its state is past PENDING; a group member's is in its
// group's bookkeeping). The broker is asked first and the states are read
// after, so a root that leaves the broker in between is seen by the
// second read. The roots left are sent as a first attempt sends them; of
// a group, when some members were sent, the others are published as
// SendGroup publishes its members (the group's bookkeeping and a chord
// callback's PENDING state were written before any member was). A broker
// that refuses a task or chain as a duplicate has it: it counts as sent.
//
// Why each tick is sent exactly once:
//
//  1. Not lost: a claim is completed only after a send that succeeded;
//     until then, each time a lease on the tick ends, a process that
//     fired it takes it over and sends what was not sent.
//  2. One sender at a time: an attempt sends only under its lease, and
//     only in the first half of it by its own clock, counted from before
//     it asked for the lease; another process takes the tick over only
//     once the lease has ended by the broker's clock. The second half is
//     for a publish still on its way when the sender stopped (or died).
//  3. No root sent twice: by 2, every publish of an earlier attempt landed
//     before the attempt that took over reads. A root published then is,
//     at its first read, held by the broker or gone from it with a final
//     state, which the second read, later, finds (states last
//     ResultsExpireIn). So a root found in neither was never published,
//     and publishing it now is its first publish.
//  4. The first attempt at a tick sends without reading only when it
//     fires within a lease of the tick and the key was free: no attempt
//     preceded it, since every attempt's record lasts keep. An attempt
//     later than a lease reads first, as a resend does; one later than
//     keep less a lease, when the record may be gone, is skipped.
//
// What this assumes: the processes' clocks run at the broker's rate and
// agree within keep; a publish lands within half a lease; a finished
// root's state outlives the resends that may read it: ResultsExpireIn is
// longer than keep (the default hour is, for periods up to an hour; a
// daily tick keeps its claim a day, so a takeover after the state expired,
// which needs the sender to die between sending and completing and Redis
// to be unreachable for longer than ResultsExpireIn, may send it again);
// the claim key is not lost (a Sentinel failover with asynchronous
// replication can lose it: Redis.MinReplicas prevents that); and no task
// leaves the broker without a final state (one that
// IgnoreWhenTaskNotRegistered drops does: a process that takes its tick
// over sends it again).
//
// Cost, per tick (Redis round trips): the sender claims and completes;
// every other process claims, and claims again when the lease ends, to
// find the tick done. A resend adds a pipelined read of the roots' task
// hashes and a read of their states (one for a group).
package periodic
