// Package memory is an in-process broker written in Go: the idle broker of
// eager mode, and what New returns. "memory://" is not this broker: it
// runs the Redis broker's store on an in-process engine. This one has the
// semantics of the Redis broker, and passes the same conformance suite
// (brokers/brokertest).
//
//	b := memory.New(memory.OptionsFrom(cnf.WithDefaults()))
//	defer b.Close()
//
// # What a queue holds
//
// Queues are created by the first task published to them (or by PauseQueue).
// Each task is in exactly one place of its queue:
//
//   - pending: a deque in run order. Publish and recovery append at the
//     tail, Requeue puts back at the head, Fetch takes from the head.
//   - scheduled: published with an ETA in the future. A time.AfterFunc timer
//     per task moves it to the pending tail at its ETA, never before (a timer
//     that fires early by the wall clock is re-armed for the rest).
//   - retry: settled with Retry; moved to pending at the time given, the same
//     way.
//   - active: taken by Fetch under a lease.
//   - archived: dead letters with their reason and time, newest first in
//     ListTasks, trimmed to ArchiveMaxSize (oldest first) and ArchiveMaxAge.
//
// A paused queue is skipped by Fetch and keeps receiving tasks.
//
// The broker stores a deep copy (tasks.CopySignature) of each signature it
// is given and hands out copies, in deliveries and in inspection results, so
// neither side can change what the other holds. Values are kept as they
// are: Arg{Type: "int64", Value: 1} arrives with the int 1, not a
// json.Number.
//
// # Leases
//
// Fetch takes up to max pending tasks from the queues in the order given,
// filling from the next queue when one runs out, and gives each a lease: a
// random fencing token and an expiry LeaseDuration from now. With nothing
// pending it waits on a broadcast channel, closed and replaced whenever a
// task becomes pending (Publish, Requeue, a timer, recovery, ResumeQueue),
// until ctx ends or Close; it never polls.
//
// The protocol, as on Redis:
//
//  1. Fetch moves the task to active with token T and expiry E.
//  2. ExtendLeases, called by the worker while the task runs, sets E to
//     now+LeaseDuration for each delivery whose task is still active under
//     its token, and marks the others' leases lost (their Done closes).
//  3. Exactly one of Ack, Retry, Archive or Requeue settles the task. Each
//     succeeds only for the holder of the current token; anyone else gets an
//     error wrapping iface.ErrLeaseLost and its lease is marked lost.
//     Success releases the delivery's lease.
//  4. The recoverer, every RecoverInterval, returns each active task whose E
//     has passed to the head of pending with Recovered+1 (losing a worker
//     is not a failure of the task, and is not counted in Retried), and
//     logs it with the attributes task_id and queue. A task already
//     recovered MaxRecoveries times is archived instead, with a reason
//     naming the count; a negative MaxRecoveries never archives.
//
// A recovered task gets a new token when it is fetched again, so the worker
// that lost it can no longer settle it: its Ack fails with ErrLeaseLost,
// while the new holder's succeeds.
//
// # Aggregation
//
// A member (a task with an AggregationKey; see iface.Aggregator) is in none
// of the places above: Publish, or its ETA, puts it in the group of its
// queue, name and key, oldest first, where it waits until the group is due
// by the policy last announced for its name (AnnounceAggregators; Publish
// refuses a member no announcement alive covers). Per queue and name, two
// heaps keep the groups by due time and the batches by when they may be
// taken again, so ClaimBatch looks only at their tops. A batch is leased
// like a delivery, with no renewal: when its lease ends, the next ClaimBatch
// takes it again whole, same ID and members, with Recovered+1. CompleteBatch
// publishes the aggregate and forgets the members under the broker's lock,
// only for the current lease's token. Members are held, so their UUIDs are
// duplicates, until their batch is completed or archived; they are counted
// in QueueInfo.Aggregating and listed only once archived, and requeued from
// the archive they join their group again. The recoverer strands the
// members of a name whose announcement ended (those of its due groups, and
// of its batches whose lease ended or whose retry came): they become
// pending as plain tasks, and Retry puts them back in their group.
//
// # Other rules
//
// Publish needs a UUID and a RoutingKey (iface.ErrNoQueue) on every
// signature and checks them all before it adds any, so a failed Publish
// adds nothing. A UUID still pending, scheduled, retrying or active in any
// queue is refused with iface.ErrDuplicateTask; an archived task with that
// UUID is deleted from the archive. ClaimLease grants a key's lease to its
// first caller (see iface.Claimer). A task rerouted to the workers with its
// name (Reroute) waits for a Fetch with names that include it, or, once no
// worker announces the name, goes back to pending when the recoverer runs.
// A unique task (Signature.UniqueFor) holds its key, by queue, from its
// publish until its final state is committed (or it is archived) or
// UniqueFor passes; a
// publish of another task with the key is refused (tasks.NotUniqueError),
// or, with UniqueReplace, replaces the waiting holder's signature (all but
// its UUID).
// TakeWaiting deletes, archives or runs now a pending, scheduled or
// retrying task (an operator's action).
// Inspection of a queue the broker never saw returns
// empty results, not an error; an empty queue name is iface.ErrNoQueue,
// except in GetPendingTasks, where it means DefaultQueue.
//
// Close stops every timer and the recoverer, and fails blocked and later
// calls with iface.ErrClosed. Tasks are dropped with the broker: memory
// is not durable across restarts of the process.
package memory
