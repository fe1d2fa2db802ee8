package store

import "time"

// Forwarded is what one Forward of a queue's due tasks did.
type Forwarded struct {
	// More: more are due now (call again).
	More bool
	// Next is how long, by Redis's clock, until the earliest task, group
	// or batch still waiting is due, or an announcement with a group or
	// batch due ends, counted from when Forward returns (the script's
	// round trip taken off, so that a wait of Next ends no later); negative
	// when none waits.
	Next time.Duration
	// Stranded counts the aggregation members sent to pending because no
	// worker alive aggregates their task name any more.
	Stranded int64
}
