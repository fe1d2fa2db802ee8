// Package chaos_test is machinist's chaos suite: real worker processes and
// real Redis servers (standalone, Sentinel, Cluster, TLS) under faults —
// processes paused and killed, Redis hung, killed and failed over,
// connections killed, traffic dropped and delayed — while a ledger sends
// work and checks, afterwards, what must hold whatever happened:
//
//   - no task lost: every send that returned without error runs to SUCCESS;
//   - no task settled by a stale holder, and no result overwritten: the
//     result a task's state keeps is the one its OnSuccess callback received;
//   - no callback sent twice: every run of a callback carries the same
//     parent run;
//   - every send's reported outcome true: a send that returned an error
//     says either machinist.ErrNotSent or machinist.ErrMaybeSent, and did
//     not run unless it said ErrMaybeSent (its request went out and the
//     reply never came).
//
// Duplicated runs are allowed (delivery is at least once: a worker that
// lost its lease may have run the task) and counted. The tests check
// invariants, not timings; the figures they log (lost, duplicated, time to
// recover) are the ones docs/reliability.md gives.
//
// Every test runs in `make test`. `make chaos` runs the suite as a soak:
// with -chaos.soak=D each test repeats its fault for at least D.
package chaos_test

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/redistest"
)

// soak is how long each test keeps repeating its fault; 0 (the default,
// `make test`) means once.
var soak = flag.Duration("chaos.soak", 0, "repeat each chaos test's fault for at least this long")

func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		runChild(spec) // a worker process of startProcess; never returns
	}
	os.Exit(redistest.RunMain(m))
}

// repeat calls fault once, then again while the soak lasts, passing the
// round number (0, 1, …).
func repeat(t *testing.T, fault func(round int)) {
	t.Helper()
	deadline := time.Now().Add(*soak)
	for round := 0; round == 0 || time.Now().Before(deadline); round++ {
		fault(round)
		if t.Failed() {
			return
		}
	}
}
