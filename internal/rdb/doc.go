// Package rdb is the one package of machinist that talks to Redis: every
// key (keys.go), every Lua script (lua/, which package lua embeds and
// links), the mapping of the scripts' status codes to errors (scripts.go),
// the decoding of their replies (reply.go), and the building of go-redis
// clients from machinist's URLs (conn.go). The Redis broker
// (v1/brokers/redis) and result backend (v1/backends/redis) are thin
// adapters over one Store; nothing else in the module sends Redis a
// command.
//
// A Store speaks in machinist's own terms: signatures, deliveries and
// their leases, task states, groups. Errors it returns carry no package
// prefix (the adapter that called it adds its own) and wrap the sentinels
// of internal/store where callers branch on them; go-redis's redis.Nil
// never escapes.
//
// Its methods are filed by verb: publish.go (and combine.go, the enqueue
// calls that concurrent publishes share), fetch.go, wait.go (an idle
// worker's wake-ups), lease.go, settle.go (ack, ack with success, retry,
// archive, requeue, commit, a state written under the lease), claim.go
// (periodic claims, Holds), route.go, state.go, workflow.go, group.go,
// watch.go, aggregate.go, shards.go, inspect.go, pause.go, cancel.go,
// monitor.go, maintenance.go and lock.go. How their commands reach Redis
// (the batcher that lets concurrent callers share round trips, sending
// again after a lost reply, returning at a deadline, WAIT for replicas)
// is package transport's, which knows go-redis alone.
//
// The task protocol (leases, fencing tokens, recovery, wake-ups) is
// described for users in v1/brokers/redis's package documentation; the
// contract of each script heads its file.
package rdb
