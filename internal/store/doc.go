// Package store is the vocabulary of machinist's store, the one place that
// holds tasks, their states and workflows: deliveries and their leases,
// what inspection reports, claims, aggregation, the workers' statistics,
// and the sentinel errors every implementation wraps. It does no I/O.
//
// The public brokers/iface and backends/iface packages re-export these
// names with type aliases, so machinery's API is unchanged; internal/rdb
// implements the store on Redis or on the embedded engine.
package store
