// Package rdb is the one package of machinist that talks to Redis: every
// key (keys.go), every Lua script (lua/, embedded), the mapping of the
// scripts' status codes to errors, the batcher that lets concurrent callers
// share round trips, and the building of go-redis clients from machinist's
// URLs. The Redis broker (v1/brokers/redis) and result backend
// (v1/backends/redis) are thin adapters over one Store; nothing else in
// the module imports go-redis.
//
// A Store speaks in machinist's own terms: signatures, deliveries and
// their leases, task states, groups. Errors it returns carry no package
// prefix (the adapter that called it adds its own) and wrap the sentinels
// of brokers/iface and backends/iface where callers branch on them; go-redis's
// redis.Nil never escapes.
//
// The task protocol (leases, fencing tokens, recovery, wake-ups) is
// described for users in v1/brokers/redis's package documentation; the
// contract of each script heads its file.
package rdb
