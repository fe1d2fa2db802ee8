package maintenance_test

import (
	"slices"
	"testing"
	"time"
)

// Every RecoverInterval the maintainer puts back unrouted tasks, then
// recovers expired leases until a batch comes back short, logging and
// counting each task.
func TestRecoverWhileBatchesComeBackFull(t *testing.T) {
	t.Parallel()
	s := newFakeStore(false)
	s.won = true
	s.unrouted = 2
	s.recovers = []recoverReply{
		{recovered: []string{"a", "b"}, archived: []string{"c"}, more: true},
		{recovered: []string{"d"}},
	}
	e := run(t, s, p(10*time.Second, 2500*time.Millisecond))

	e.runUntil(2500*time.Millisecond, 3)
	want := []string{"Unroute", "Recover", "Recover"}
	if got := s.methods()[2:]; !slices.Equal(got, want) { // after WatchDue and the first Forward
		t.Fatalf("called %v, want %v", got, want)
	}
	for _, c := range s.called("Recover") {
		if c.at != 2500*time.Millisecond {
			t.Errorf("recovered at %v, want 2.5s", c.at)
		}
	}
	if got, want := e.metrics.recorded(), []string{
		"recovered q 2", `archived q "" 1`,
		"recovered q 1", `archived q "" 0`,
	}; !slices.Equal(got, want) {
		t.Errorf("counted %q, want %q", got, want)
	}
	e.checkLogs(maintaining,
		`level=WARN msg="put back rerouted tasks whose workers stopped announcing them" tasks=2 queue=q`,
		`level=WARN msg="recovered task whose lease expired" task_id=a queue=q`,
		`level=WARN msg="recovered task whose lease expired" task_id=b queue=q`,
		`level=ERROR msg="archived task that kept losing its worker" task_id=c queue=q`,
		`level=WARN msg="recovered task whose lease expired" task_id=d queue=q`,
	)

	e.runUntil(4999*time.Millisecond, 3)
	if n := len(s.called("Recover")); n != 2 {
		t.Fatalf("recovered %d times before 5s, want 2", n)
	}
	e.runUntil(5*time.Second, 3)
	if got, want := s.times("Unroute"), []time.Duration{2500 * time.Millisecond, 5 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("ran at %v, want every RecoverInterval, %v", got, want)
	}
}

// A failure to put back unrouted tasks does not keep expired leases from
// being recovered; it is logged, and the next run is RecoverInterval
// later, the backoff (from ForwardInterval) being shorter.
func TestRecoverAfterUnrouteFails(t *testing.T) {
	t.Parallel()
	s := newFakeStore(false)
	s.won = true
	s.unrouteErr = errDown
	e := run(t, s, p(400*time.Millisecond, 2500*time.Millisecond))

	e.runUntil(2500*time.Millisecond, 3)
	for _, m := range []string{"Unroute", "Recover"} {
		if got, want := s.times(m), []time.Duration{2500 * time.Millisecond}; !slices.Equal(got, want) {
			t.Fatalf("%s at %v, want %v", m, got, want)
		}
	}
	// Before 2.8s, when the forwarder's success logs the recovery.
	e.checkLogs(maintaining, `level=ERROR msg="maintenance of queue q failed" queue=q error="store down"`)
	e.runUntil(5*time.Second, 3)
	if got, want := s.times("Recover"), []time.Duration{2500 * time.Millisecond, 5 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("recovered at %v, want %v", got, want)
	}
}

// A process that is not the maintainer recovers nothing.
func TestRecoverOnlyWhenMaintaining(t *testing.T) {
	t.Parallel()
	s := newFakeStore(false)
	e := run(t, s, p(10*time.Second, 2500*time.Millisecond))

	e.runUntil(5*time.Second, 3) // the forwarder's first timer is armed still
	if got := s.methods(); len(got) != 0 {
		t.Errorf("called %v, want nothing but elections", got)
	}
	if n := len(s.called("Elect")); n != 6 {
		t.Errorf("stood %d times in 5s, want 6", n)
	}
}
