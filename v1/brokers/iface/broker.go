// Package iface declares the Broker: the seam between machinist's Server and
// Worker and the store that holds tasks until a worker has finished them.
//
// A broker keeps, per queue, tasks that are pending (ready to run), scheduled
// (waiting for their ETA), waiting for a retry, active (leased to a worker)
// and archived (dead letters). The worker loop is: Fetch takes tasks under a
// lease; ExtendLeases renews the leases while they run; Commit records a
// task's final outcome before the worker writes anything that others see;
// then exactly one of Ack, Retry, Archive or Requeue settles each task. Each
// of these succeeds only while the caller holds the lease: the broker
// checks the lease's fencing token and its expiry. A task whose lease runs out is returned to
// pending by the broker's recoverer (see Config.MaxRecoveries), so a worker
// that dies loses nothing.
//
// One implementation ships, brokers/redis, on Redis or on an in-process
// engine (brokers/memory, "memory://"). It passes the conformance suite in
// brokers/brokertest, which a broker of your own can run too.
package iface

import (
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/v1/tasks"
)

// Broker stores tasks and hands them to workers under leases: what
// Server.GetBroker returns, and what a broker of your own implements. It
// has machinery v1's methods with their signatures (Machinery, from an
// embedded Compat, and Publish, GetPendingTasks, GetDelayedTasks); the
// rest are machinist's, context-aware, declared with the store they
// belong to (internal/store.Broker). What a broker may offer besides is in
// interfaces of its own: Inspector (listing and managing what it holds),
// Pauser (pausing queues), Claimer (periodic ticks once across
// processes), Canceller, Aggregator, Monitor and Relay. Every method is
// safe for concurrent use.
type Broker interface {
	Machinery
	store.Broker

	// GetPendingTasks lists the pending tasks of queue (the config's default
	// queue when empty), as machinery's does. (Inspector.ListTasks is the
	// context-aware, paged form.)
	GetPendingTasks(queue string) ([]*tasks.Signature, error)
	// GetDelayedTasks lists the scheduled and retrying tasks of every queue,
	// as machinery's does.
	GetDelayedTasks() ([]*tasks.Signature, error)
}
