// Package redisbroker is machinist's Redis broker: tasks are held under
// leases, so a worker that dies loses nothing, and every transition is one
// Lua script, so no crash leaves a task half-moved.
//
// The broker is a thin adapter over the Redis store in internal/rdb, the
// one package that owns every key and script (internal/rdb/lua/).
//
// Select it with a "redis://", "rediss://" or "redis+socket://" Broker
// URL; a comma-separated list of addresses, or Redis.ClusterMode, selects
// Redis Cluster. Every key of a queue carries the hash tag {queue}
// (internal/rdb/keys.go has the layout), so a queue lives in one cluster
// slot and every script runs on one node. A program that builds its broker
// by hand calls machinery's constructors, New(cnf, host, password,
// socketPath, db) or NewGR(cnf, addrs, db), or Dial with a URL.
//
// # A task's life
//
// Publish writes the task's hash and appends its id to the queue's pending
// list, or, when it has an ETA in the future, adds it to the scheduled zset.
// The queue's maintainer (below) moves due scheduled and retry tasks to
// pending in batches. On a single server it runs when the next of them is
// due: each run records its plan (the queue's fnext key), and a script
// that files something due sooner (a task with an ETA, a retry, a task a
// rate limit holds back, an aggregation group, a batch's lease or retry)
// moves the plan and PUBLISHes on the queue's fwake channel, which the
// maintainer watches (lua/lib/due.lua); it waits by Redis's clock, and
// runs at least every second (or every DelayedTasksPollPeriod when that is
// longer) whatever happens. On a Cluster it runs every Redis.DelayedTasksPollPeriod
// (20 ms by default), or sooner when the next task is due sooner. Either
// way a delayed task starts within milliseconds of its time and never
// before it.
//
// # One maintainer per queue
//
// The processes that fetch from a queue elect one of them its maintainer
// (elect.lua): the key <prefix>:{queue}:maintainer holds the winner's id
// for a term of 3 seconds, renewed at each election, every second. Only
// the maintainer runs the queue's forwarder (which also wakes the workers
// of due aggregation groups) and recoverer (which also puts back rerouted
// tasks whose workers stopped announcing their names), so the maintenance
// an idle system costs Redis grows with its queues, not with processes ×
// queues (what does grow so: each process stands for each queue's
// election, and looks into it when its block times out, once a second;
// an empty look is 3 commands, dequeue.lua's prelude). A maintainer that closes resigns; one that dies keeps its term
// until it ends, so another process takes over within about 4 seconds.
// Two maintainers for a moment (a paused one waking) do no harm: both
// scripts are atomic and idempotent.
//
// # Prompt delivery without polling
//
// Each queue has a notify list of wake-up tokens. Whatever makes tasks
// pending (publish, forward, recover, requeue, resume) leaves a token when
// there is none. An idle worker blocks on BLPOP of its queues' notify lists,
// and of the notify lists of the rerouted tasks of its task names (up to
// Redis.NormalTasksPollPeriod, then it looks again), so a new task
// reaches it within a round trip. The worker that takes a token runs the
// dequeue script, and when tasks remain it leaves a token for the next idle
// worker: a burst wakes as many workers as it needs, one after the other,
// not all of them at once.
//
// # The lease protocol
//
//  1. Dequeue takes up to N ids, first from the lists of tasks rerouted to
//     the worker's task names, then from the head of pending, and for each one
//     sets its hash's lease field to a fresh random fencing token and adds
//     the id to the lease zset with score now+LeaseDuration (Redis's clock).
//     The worker counts its own copy of the expiry from before the call, so
//     it gives the lease up no later than Redis does. An id whose hash is
//     gone, or whose state is not pending (a second entry of an id taken
//     already, from a publish that ran twice), is dropped, not leased.
//  2. While the task runs, the worker renews the lease every
//     LeaseRenewInterval: the extend script moves the zset score forward for
//     each id whose lease field still holds the worker's token, and reports
//     the others as lost. A worker that cannot reach Redis keeps its lease
//     only until the local expiry.
//  3. Every write a worker makes about a task checks its lease first, in
//     the same script (internal/rdb/lua/lib/fence.lua): the hash's lease
//     field must hold the worker's token and its lease_exp field (the
//     lease's expiry, kept with the lease zset's score) must be in the
//     future by Redis's clock, so a worker whose lease was taken
//     over, or merely ran out while the worker was paused and before the
//     recoverer came, changes nothing and is told ErrLeaseLost.
//  4. Before a worker writes anything others see about a finished task
//     (its state, its group's record, callbacks, a chord's election), it
//     commits the outcome (SUCCESS or FAILURE, with results or error) into
//     the task's hash under its lease. On a single server the same script
//     also writes the state and the group record (commit.lua); on Redis
//     Cluster those keys are in other slots, and the worker writes them
//     after the commit succeeded. A worker that loses its lease after
//     committing, before settling, leaves the outcome behind: the worker
//     that takes the task next does not run it, but writes the committed
//     state again and sends what follows it. On a single server a task
//     that succeeds is acknowledged with its result, its group record and
//     its OnSuccess callbacks (published, PENDING implicitly) in one
//     script (ack_success.lua); a chord member whose success completes its
//     group is written and committed by that script but acknowledged only
//     after the election of the callback's sender.
//  5. Ack, retry, archive and requeue settle the task. Ack deletes the hash (or keeps it for
//     CompletedRetention); retry moves the id to the retry zset with the
//     updated message; archive moves it to the archived zset with the
//     reason, trimming dead letters older than ArchiveMaxAge or beyond
//     ArchiveMaxSize; requeue puts it back at the head of pending. Each
//     records the token it settled under (settled). An ack (ack.lua,
//     ack_success.lua) may also take the next task of the queue for the
//     slot it frees, as dequeue does (lib/queue.lua's take_tasks), with a
//     fencing token the worker sent; a chain's next step, published by
//     the same script, is then taken without a wake-up. A settle whose reply
//     was lost is sent again marked as a repeat, and a repeat that finds
//     the hash gone or settled under its token reports success; go-redis
//     never sends a settle twice itself. A repeat takes nothing: the task
//     its first run may have taken is put back, found by its token, as a
//     fetch's are (release_fetch.lua). A publish records its own token
//     (pub) in the task hash; go-redis
//     never sends it twice, and machinist sends it again after a lost
//     reply marked as a repeat, which reports success when it finds its
//     tasks, or, once they ran and were forgotten, their states (any
//     state, when the publish wrote none, PENDING being implicit; a final
//     state, when the sender wrote PENDING before). A first attempt that
//     reaches Redis after the attempt sent again (held up on the way, or
//     in the buffer of a server that hung) finds in the same way what
//     that attempt wrote, and writes nothing. On Cluster, where the states
//     live on other nodes, a publish whose reply was lost is not sent
//     again: its error says it may have happened (iface.ErrMaybeSent). A
//     publish whose context ends returns then: its error says
//     iface.ErrNotSent when its call was still waiting for a batcher lane
//     (it is then not sent), else iface.ErrMaybeSent; the call goes on
//     without it.
//  6. The queue's maintainer runs the recoverer every RecoverInterval: ids
//     whose lease score is in the past lose their token, and go back to the
//     head of pending with recovered+1, or, past MaxRecoveries, to the
//     archive with that reason. A recovery is not a failure of the task's
//     code: RetryCount is untouched.
//
// With the defaults (LeaseDuration 10s, renewal every 2.5s, recovery every
// 1s), a task whose worker was killed runs again about 10 to 11 seconds
// after the worker's last renewal.
//
// There is no separate active list, unlike asynq: the lease zset is the set
// of active tasks, so acknowledging is O(log n) instead of an O(n) LREM.
//
// # Aggregation
//
// A member (a task with an AggregationKey) is published by the same
// enqueue script as any task, in the same round trip: it joins its group,
// a zset of member ids by join time under the queue's hash tag, and the
// group is filed in its task name's due index by the policy last
// announced for the name (AnnounceAggregators); Publish refuses it with
// ErrNoAggregator when no announcement alive covers the name. A member
// with an ETA waits in the scheduled zset, and the forwarder files it in
// its group when due. ClaimBatch is one script per queue: it takes again,
// whole and under a new lease, a batch whose lease ended (Recovered+1) or
// whose retry came, else moves the oldest members of the earliest due
// group into a new batch hash under a lease, so a batch comes back
// without a maintainer. ExtendBatch renews a batch's lease as
// ExtendLeases renews a task's. CompleteBatch, RetryBatch and ArchiveBatch
// are settle scripts fenced by the batch's lease like a task's; CompleteBatch
// publishes the aggregate and deletes the batch and its members in one
// script. On Redis Cluster an aggregate bound for another queue, in
// another slot, is handed over in steps, each safe to repeat: the batch
// records the aggregate under its lease (from then on it is never retried,
// archived or stranded, and a worker that takes it again finishes the
// hand-over with that aggregate instead of building one), the aggregate is
// published, only while the lease is held, with a marker that makes any
// later publish of it a no-op, and the batch is forgotten; the marker then
// expires after a few leases.
// The queue's maintainer strands the members of a name whose announcement
// ended: those of its due groups, and of its batches whose lease ended or
// whose retry came (unless handed over), go to pending as plain tasks,
// their hashes still naming their group, so that a worker fails them or
// tries them again (Retry puts a member back in its group).
//
// # Unique tasks and operator actions
//
// A unique task (Signature.UniqueFor) takes its key, a string key in its
// queue's slot holding its id with a PX of UniqueFor, in the enqueue
// script that publishes it, so of concurrent publishes exactly one wins; a
// publish of another task with the key is refused with the holder's id,
// or, with UniqueReplace, replaces the waiting holder's message and ETA in
// the same script. The key is deleted, if the task still holds it, by the
// scripts that end the task (ack, ack_success, archive, an archive after
// MaxRecoveries, take_waiting, cancel). TakeWaiting deletes, archives or runs now a
// pending, scheduled or retrying task in one script (take_waiting.lua); a
// pending one is found with LREM, O(pending). CancelTask (cancel.lua)
// deletes a waiting task, or takes a running one's lease and archives it,
// in one script that PUBLISHes its id on <prefix>:cancelled, which
// WatchCancels subscribes to: the worker running it cancels its context
// at once, and its settle scripts are refused by the fence. With a bar
// (a workflow cancelled), a task the queue does not hold, or a waiting one
// it deletes, leaves a "cancelled" tombstone in its hash, which
// enqueue.lua refuses (a *CancelledError) and ack_success.lua does not
// send, until it expires.
//
// A limited task (tasks.Limit) carries its limit in its hash; dequeue.lua
// admits it, or parks it on its key, or schedules it at the start it
// books (lib/limit.lua), and every script that ends a lease frees its
// concurrency slot and lets one parked task of its key try again.
//
// The keys are listed in internal/rdb/keys.go.
//
// # Guarantees
//
// At least once: a task is removed only by the acknowledgement of the worker
// that holds its lease, after the worker has sent its callbacks and written
// its result; a task whose outcome was committed is finished, not run
// again. A
// task id is unique within its queue while the task is held: publishing it
// again fails with ErrDuplicateTask. A task that runs again after a
// recovery may send its callbacks again: one still queued is refused so,
// and the worker does not send one whose state shows it has started or
// finished. A message that cannot be decoded is handed to the worker with
// Delivery.Err, and the worker fails it with the decoding error (state
// FAILURE, archive, error handler).
package redisbroker
