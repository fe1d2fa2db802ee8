// Package maintenance keeps a queue moving. Its forwarder promotes due
// scheduled and retry tasks (and wakes the workers of due aggregation
// groups and batches), its recoverer returns the tasks whose lease
// expired, its un-router puts back the rerouted tasks whose workers
// stopped announcing their names, and its depth gauge reads the queue's
// sizes. A Maintainer runs them for one queue on a Store; the Redis broker
// starts one for each queue it fetches from and stops them when it
// closes.
//
// # One maintainer per queue
//
// A queue's maintenance is run by one process at a time, its elected
// maintainer, so that an idle system's load on Redis grows with its
// queues, not with processes × queues. Every process that fetches from a
// queue takes part in the election every second; a maintainer's term
// lasts 3 seconds and is renewed at each election, so when the maintainer
// dies another process takes over within 4 seconds (a term and an
// election). A maintainer that stops resigns, and another takes over at
// its next election. A process that loses an election, or fails to stand
// in one, runs none of the jobs below until it wins again.
//
// # The forwarder
//
// On a single server the forwarder does not poll for due tasks: it runs
// Forward when the next of them is due, and whatever comes due sooner (a
// task sent with an ETA, a retry, an aggregation group, a batch's lease
// or retry) wakes it (Store.WatchDue). It waits by Redis's clock (Forward
// returns how long until the next is due), so the host's need not agree.
// It still runs at least every second, or every ForwardInterval when that
// is longer: a wake lost (a plan written by a former maintainer that
// stalled, a plan evicted or refused by a Redis out of memory, a sender
// of an earlier version) costs at most that. A subscription's
// confirmation, a resubscription's too, runs it at once, for what came
// due while it was not watching.
//
// Off a single server, where WatchDue gives no channel, it runs every
// ForwardInterval, or sooner when the next task is due sooner. Either way
// a task becomes pending within milliseconds of its time, and while a
// Forward leaves more due it runs again at once.
//
// # The recoverer and the un-router
//
// Every RecoverInterval the un-router puts back on pending the rerouted
// tasks of names that no worker alive announces any more, then the
// recoverer returns the tasks whose lease expired, a batch at a time until
// a batch comes back short, logging each task and counting them in
// Metrics. A failure of the un-router does not keep expired leases from
// being recovered.
//
// # Failures
//
// One service.FailureLog per queue logs the failed elections, forwards
// and recoveries: the first at once, then at most a line every 30 seconds
// with a count, not one per attempt, and a line when one succeeds again.
// After consecutive failures (of any of them) a job waits a backoff that
// starts at ForwardInterval and doubles up to a second (or stays at
// ForwardInterval, when that is longer); an election or a recovery waits
// at least its own interval. A failed election counts as lost.
//
// # The depth gauge
//
// While the process maintains the queue, Depth returns the queue's sizes,
// read afresh at most every 5 seconds: a gauge collected more often costs
// the store nothing more, and one process per queue reads them, not every
// worker on every collection.
package maintenance
