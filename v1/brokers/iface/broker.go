// Package iface declares the brokers: the seam between machinist's Server
// and Worker and the store that holds tasks until a worker has finished
// them. Broker is machinery's interface; LeaseBroker is machinist's.
//
// A LeaseBroker keeps, per queue, tasks that are pending (ready to run),
// scheduled (waiting for their ETA), waiting for a retry, active (leased to
// a worker) and archived (dead letters). The worker loop is: Fetch takes
// tasks under a lease; ExtendLeases renews the leases while they run; Commit
// records a task's final outcome before the worker writes anything that
// others see; then exactly one of Ack, Retry, Archive or Requeue settles
// each task. Each of these succeeds only while the caller holds the lease:
// the broker checks the lease's fencing token and its expiry. A task whose
// lease runs out is returned to pending by the broker's recoverer (see
// Config.MaxRecoveries), so a worker that dies loses nothing.
//
// One implementation ships, brokers/redis, on Redis or on an in-process
// engine (brokers/memory, "memory://"). It passes the conformance suite in
// brokers/brokertest, which a broker of your own can run too.
package iface

import (
	"github.com/b6192125/machinist/internal/store"
)

// Broker is machinery v1's Broker interface, method for method: what
// Server.SetBroker takes and GetBroker returns, and what a broker written
// for machinery implements (see package common). Such a broker runs with
// machinery's semantics: its StartConsuming hands each task to the
// worker's Process, and nothing is leased, so a worker that dies loses the
// tasks it holds. machinist's brokers are also LeaseBrokers.
type Broker = store.MachineryBroker

// TaskProcessor is what StartConsuming hands tasks to: machinery's
// interface, which machinist's Worker satisfies.
type TaskProcessor = store.TaskProcessor

// LeaseBroker is a Broker that hands tasks to workers under leases:
// machinist's brokers, and what a lease broker of your own implements.
// Beside machinery's methods (Broker) it has machinist's, context-aware,
// declared with the store they belong to (internal/store.Broker). What a
// broker may offer besides is in interfaces of its own: Inspector (listing
// and managing what it holds), Pauser (pausing queues), Claimer (periodic
// ticks once across processes), Canceller, Aggregator, Monitor and Relay.
// Every method is safe for concurrent use.
type LeaseBroker interface {
	Broker
	store.Broker
}
