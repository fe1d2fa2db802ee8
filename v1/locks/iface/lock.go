// Package iface declares machinery v1's Lock: a named claim that holds
// until a deadline. machinery's periodic tasks took one per tick so that a
// tick fired once across processes. machinist's Server does not need it (its
// brokers grant periodic ticks exactly once themselves) and uses a Lock given
// to NewServerWithBrokerBackendLock only for a broker that cannot (one that
// is not a brokers/iface.Claimer). The package exists so that machinery
// programs that build a lock compile unchanged.
package iface

// Lock is machinery's lock interface.
type Lock interface {
	// LockWithRetries calls Lock, trying again a few times while it fails.
	LockWithRetries(key string, value int64) error
	// Lock takes key until value, a Unix time in nanoseconds, unless
	// another caller holds it until a later time; it fails when key is
	// held.
	Lock(key string, value int64) error
}
