package machinery

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/periodic"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/waitfor"
	"github.com/b6192125/machinist/v1/config"
	"github.com/b6192125/machinist/v1/tasks"
)

// These tests are not parallel: each checks with goleak that the scheduler
// leaves no goroutine behind, which a test running beside it would spoil.
// None sleeps: each moves the scheduler's fake clock.

var periodicStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// newPeriodicServer returns a Server on the in-process broker whose
// scheduler runs on a clock.Fake at start. The test fails if a goroutine
// is left once the Server is closed.
func newPeriodicServer(t *testing.T, start time.Time) (*Server, *clock.Fake) {
	t.Helper()
	others := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, others) }) // runs last
	s, err := NewServer(&config.Config{Broker: "memory://", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	clk := clock.NewFake(start)
	schedule(s, clk, 0, nil)
	return s, clk
}

// schedule gives s, in place of its scheduler, which has not started, one
// on clk with lease (0 for the config's LeaseDuration) and hook (nil for
// none).
func schedule(s *Server, clk clock.Clock, lease time.Duration, hook func(periodic.Step, periodic.Tick) bool) {
	s.scheduler = periodic.NewScheduler(periodic.SchedulerParams{
		Server:    periodicServer{s},
		Archetype: service.NewArchetype(s.log, clk),
		Lease:     lease,
		HookFunc:  hook,
	})
}

// waitArmed waits until the scheduler's timer is armed, failing the test
// after a deadline.
func waitArmed(t *testing.T, clk *clock.Fake) {
	t.Helper()
	waitfor.Armed(t, 10*time.Second, clk, 1)
}

// next receives the next firing, failing the test after a deadline.
func next[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	return waitfor.Recv(t, 10*time.Second, "a periodic firing", c)
}

// drain returns what is left in c.
func drain[T any](c chan T) []T {
	var out []T
	for {
		select {
		case v := <-c:
			out = append(out, v)
		default:
			return out
		}
	}
}

// Through the public API: each tick sends a fresh copy of the signature.
func TestPeriodicTaskSendsAFreshCopyEachTick(t *testing.T) {
	s, clk := newPeriodicServer(t, periodicStart)
	sent := make(chan *tasks.Signature, 100)
	s.SetPreTaskHandler(func(sig *tasks.Signature) { sent <- sig })
	sig := &tasks.Signature{Name: "report", UUID: "fixed-uuid"}
	if err := s.RegisterPeriodicTask("@every 1m", "report-every-minute", sig); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := 1; i <= 3; i++ {
		waitArmed(t, clk)
		clk.Advance(time.Minute)
		got := next(t, sent)
		want := tickUUID("report-every-minute", "@every 1m", periodicStart.Add(time.Duration(i)*time.Minute))
		if got.Name != "report" || got.UUID != want || seen[got.UUID] {
			t.Errorf("tick %d sent %s with UUID %q, want report with the UUID of the tick, %s", i, got.Name, got.UUID, want)
		}
		seen[got.UUID] = true
	}
	s.scheduler.Stop()
	if extra := drain(sent); len(extra) != 0 {
		t.Errorf("sent %d more tasks than once a tick", len(extra))
	}
}

// Every process registering the same name and spec shares a tick: the
// broker's claim lets one of them send it.
func TestPeriodicTickIsSentOnceAcrossServers(t *testing.T) {
	a, clkA := newPeriodicServer(t, periodicStart)
	b, err := NewServerWithBrokerBackend(&config.Config{Logger: slog.New(slog.DiscardHandler)}, a.GetBroker(), a.GetBackend())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	clkB := clock.NewFake(periodicStart)
	schedule(b, clkB, 0, nil)

	sent := make(chan string, 100)
	for name, s := range map[string]*Server{"a": a, "b": b} {
		s.SetPreTaskHandler(func(*tasks.Signature) { sent <- name })
		if err := s.RegisterPeriodicTask("@every 1m", "shared", &tasks.Signature{Name: "report"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		waitArmed(t, clkA)
		waitArmed(t, clkB)
		clkA.Advance(time.Minute)
		clkB.Advance(time.Minute)
		next(t, sent)
	}
	a.scheduler.Stop()
	b.scheduler.Stop()
	if extra := drain(sent); len(extra) != 0 {
		t.Errorf("a tick was sent by both servers: %d extra sends", len(extra))
	}
}

func TestSchedulerStopBeforeStartAndTwice(t *testing.T) {
	s, _ := newPeriodicServer(t, periodicStart)
	s.scheduler.Stop() // before any entry: nothing is running
	s.scheduler.Stop()
	err := s.RegisterPeriodicTask("@every 1m", "late", &tasks.Signature{Name: "report"})
	if !errors.Is(err, ErrServerClosed) {
		t.Errorf("RegisterPeriodicTask after stop = %v, want ErrServerClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSchedulerStopTwiceAfterStart(t *testing.T) {
	s, clk := newPeriodicServer(t, periodicStart)
	if err := s.RegisterPeriodicTask("@every 1m", "minutely", &tasks.Signature{Name: "report"}); err != nil {
		t.Fatal(err)
	}
	waitArmed(t, clk)
	s.scheduler.Stop()
	s.scheduler.Stop()
	if clk.Armed() != 0 {
		t.Errorf("Armed() = %d after stop, want 0", clk.Armed())
	}
	if err := s.RegisterPeriodicTask("@every 1m", "late", &tasks.Signature{Name: "report"}); !errors.Is(err, ErrServerClosed) {
		t.Errorf("RegisterPeriodicTask after stop = %v, want ErrServerClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// A periodic chord's members and callback carry the tick's UUIDs.
func TestPeriodicChordCarriesTheTickUUIDs(t *testing.T) {
	s, clk := newPeriodicServer(t, periodicStart)
	sent := make(chan *tasks.Signature, 100)
	s.SetPreTaskHandler(func(sig *tasks.Signature) { sent <- tasks.CopySignature(sig) })
	if err := s.RegisterPeriodicChord("@every 1m", "chord", 0, &tasks.Signature{Name: "sum"}, &tasks.Signature{Name: "a"}, &tasks.Signature{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	waitArmed(t, clk)
	clk.Advance(time.Minute)
	tk := periodic.Tick{Key: fmt.Sprintf("periodic:chord:@every 1m:%d", periodicStart.Add(time.Minute).Unix())}
	for i := range 2 {
		m := next(t, sent)
		if m.UUID != tk.UUID("task_", "/"+strconv.Itoa(i)) || m.GroupUUID != tk.UUID("group_", "group") ||
			m.ChordCallback == nil || m.ChordCallback.UUID != tk.UUID("chord_", "callback") {
			t.Errorf("member %d: UUID %s, group %s, callback %v; want the tick's", i, m.UUID, m.GroupUUID, m.ChordCallback)
		}
	}
}
