package machinery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/b6192125/machinist/internal/clock"
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
	s, err := NewServer(&config.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	clk := clock.NewFake(start)
	s.scheduler.clock = clk
	return s, clk
}

// fired records, through the fake clock, when an entry fired.
func fired(clk *clock.Fake, c chan<- time.Time) func(context.Context, tick) error {
	return func(context.Context, tick) error {
		c <- clk.Now()
		return nil
	}
}

// waitArmed waits until the scheduler's timer is armed, failing the test
// after a deadline.
func waitArmed(t *testing.T, clk *clock.Fake) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("waiting for the scheduler's timer: %v", err)
	}
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

func TestPeriodicEveryMinuteFiresOncePerMinute(t *testing.T) {
	s, clk := newPeriodicServer(t, periodicStart)
	fires := make(chan time.Time, 100)
	if err := s.scheduler.add("@every 1m", "every-minute", fired(clk, fires)); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		waitArmed(t, clk)
		if at, _ := clk.NextDeadline(); clk.Until(at) != time.Minute {
			t.Fatalf("tick %d: the scheduler waits %v, want 1m", i, clk.Until(at))
		}
		clk.Advance(time.Minute)
		if got, want := next(t, fires), periodicStart.Add(time.Duration(i)*time.Minute); !got.Equal(want) {
			t.Errorf("tick %d fired at %v, want %v", i, got, want)
		}
	}
	s.scheduler.Stop() // waits for the ticks in flight
	if extra := drain(fires); len(extra) != 0 {
		t.Errorf("fired %d more times than once a minute: %v", len(extra), extra)
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

func TestPeriodicCronFiresAtTheRightTimes(t *testing.T) {
	start := periodicStart.Add(2*time.Minute + 30*time.Second) // 00:02:30
	s, clk := newPeriodicServer(t, start)
	fires := make(chan time.Time, 100)
	if err := s.scheduler.add("*/5 * * * *", "every-five", fired(clk, fires)); err != nil {
		t.Fatal(err)
	}
	// The scheduler's timer is due on the fives, the first one aligned on
	// the hour, not five minutes after the start; each tick fires then.
	for _, want := range []string{"00:05:00", "00:10:00", "00:15:00", "00:20:00"} {
		waitArmed(t, clk) // armed again after the previous tick
		at, _ := clk.NextDeadline()
		if got := at.Format(time.TimeOnly); got != want {
			t.Fatalf("the scheduler waits until %s, want %s", got, want)
		}
		clk.Set(at)
		if got := next(t, fires).Format(time.TimeOnly); got != want {
			t.Errorf("fired at %s, want %s", got, want)
		}
	}
	waitArmed(t, clk)
	s.scheduler.Stop()
	if extra := drain(fires); len(extra) != 0 {
		t.Errorf("fired between the ticks: %v", extra)
	}
}

func TestPeriodicEntryAddedAfterStartIsPickedUp(t *testing.T) {
	s, clk := newPeriodicServer(t, periodicStart)
	hourly := make(chan time.Time, 100)
	if err := s.scheduler.add("@every 1h", "hourly", fired(clk, hourly)); err != nil {
		t.Fatal(err)
	}
	waitArmed(t, clk) // the scheduler runs, waiting for the hour
	if at, _ := clk.NextDeadline(); !at.Equal(periodicStart.Add(time.Hour)) {
		t.Fatalf("the scheduler waits until %v, want %v", at, periodicStart.Add(time.Hour))
	}

	minutely := make(chan time.Time, 100)
	if err := s.scheduler.add("@every 1m", "minutely", fired(clk, minutely)); err != nil {
		t.Fatal(err)
	}
	// add returns once the scheduler has re-armed its timer for the new
	// entry.
	if at, _ := clk.NextDeadline(); !at.Equal(periodicStart.Add(time.Minute)) {
		t.Fatalf("after add the scheduler waits until %v, want %v", at, periodicStart.Add(time.Minute))
	}
	clk.Advance(time.Minute)
	if got := next(t, minutely); !got.Equal(periodicStart.Add(time.Minute)) {
		t.Errorf("the entry added later fired at %v, want %v", got, periodicStart.Add(time.Minute))
	}
	for range 59 {
		waitArmed(t, clk)
		clk.Advance(time.Minute)
		next(t, minutely)
	}
	if got := next(t, hourly); !got.Equal(periodicStart.Add(time.Hour)) {
		t.Errorf("the first entry fired at %v, want %v", got, periodicStart.Add(time.Hour))
	}
	waitArmed(t, clk)
	s.scheduler.Stop()
	if extra := append(drain(minutely), drain(hourly)...); len(extra) != 0 {
		t.Errorf("extra firings: %v", extra)
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
	b.scheduler.clock = clkB

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
	err := s.scheduler.add("@every 1m", "late", func(context.Context, tick) error { return nil })
	if !errors.Is(err, ErrServerClosed) {
		t.Errorf("add after stop = %v, want ErrServerClosed", err)
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

// stop cancels the ticks being sent and waits for them.
func TestSchedulerStopWaitsForTheTickInFlight(t *testing.T) {
	s, clk := newPeriodicServer(t, periodicStart)
	firing := make(chan struct{})
	ended := make(chan struct{})
	var early atomic.Bool
	err := s.scheduler.add("@every 1m", "slow", func(ctx context.Context, _ tick) error {
		close(firing)
		<-ctx.Done()
		// A scheduler that did not wait for its ticks would report
		// itself stopped now; a correct one cannot before this returns.
		// The timer only bounds the window given to that bug.
		select {
		case <-s.scheduler.Stopped():
			early.Store(true)
		case <-time.After(100 * time.Millisecond):
		}
		close(ended)
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	waitArmed(t, clk)
	clk.Advance(time.Minute)
	select {
	case <-firing:
	case <-time.After(10 * time.Second):
		t.Fatal("the tick did not fire")
	}
	s.scheduler.Stop()
	select {
	case <-ended:
	default:
		t.Error("stop returned before the tick in flight ended")
	}
	if early.Load() {
		t.Error("the scheduler was stopped while a tick was in flight")
	}
}

func TestSchedulerRefusesBadEntries(t *testing.T) {
	s, clk := newPeriodicServer(t, periodicStart)
	noop := func(context.Context, tick) error { return nil }
	for _, tc := range []struct{ spec, name, want string }{
		{"@every 1m", "", "has no name"},
		{"not a spec", "bad", `spec "not a spec"`},
		{"61 * * * *", "bad-minute", `spec "61 * * * *"`},
	} {
		err := s.scheduler.add(tc.spec, tc.name, noop)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("add(%q, %q) = %v, want an error with %q", tc.spec, tc.name, err, tc.want)
		}
	}
	if clk.Armed() != 0 {
		t.Error("a refused entry started the scheduler")
	}
}

// A tick may register another entry (a task run in eager mode can): add
// does not wait on a loop that is waiting for the tick.
func TestPeriodicTickMayAddAnEntry(t *testing.T) {
	s, clk := newPeriodicServer(t, periodicStart)
	added := make(chan error, 1)
	inner := make(chan time.Time, 100)
	var once sync.Once
	err := s.scheduler.add("@every 1h", "outer", func(context.Context, tick) error {
		once.Do(func() { added <- s.scheduler.add("@every 1m", "inner", fired(clk, inner)) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitArmed(t, clk)
	clk.Advance(time.Hour)
	if err := next(t, added); err != nil {
		t.Fatalf("add from a tick = %v", err)
	}
	waitArmed(t, clk)
	clk.Advance(time.Minute)
	if got, want := next(t, inner), periodicStart.Add(time.Hour+time.Minute); !got.Equal(want) {
		t.Errorf("the entry added by a tick fired at %v, want %v", got, want)
	}
}

// "@every D" ticks at the multiples of D since the Unix epoch, whenever the
// process started.
func TestPeriodicEveryTicksOnTheEpoch(t *testing.T) {
	for _, tc := range []struct {
		every time.Duration
		from  time.Time
		want  time.Time
	}{
		{time.Minute, periodicStart, periodicStart.Add(time.Minute)},
		{time.Minute, periodicStart.Add(17 * time.Second), periodicStart.Add(time.Minute)},
		{time.Minute, periodicStart.Add(time.Minute - time.Nanosecond), periodicStart.Add(time.Minute)},
		{time.Hour, periodicStart.Add(90 * time.Minute), periodicStart.Add(2 * time.Hour)},
		{7 * time.Second, time.Unix(1704067201, 0), time.Unix(1704067204, 0)}, // 1704067204 = 7 × 243438172
		{7 * time.Second, time.Unix(-5, 0), time.Unix(0, 0)},
	} {
		if got := everyAligned(tc.every).Next(tc.from); !got.Equal(tc.want) {
			t.Errorf("every %v after %v: %v, want %v", tc.every, tc.from.UTC(), got.UTC(), tc.want.UTC())
		}
	}
	// Through the scheduler: a spec under a second is one second, as
	// cron rounds it.
	s, clk := newPeriodicServer(t, periodicStart.Add(300*time.Millisecond))
	if err := s.scheduler.add("@every 500ms", "half", func(context.Context, tick) error { return nil }); err != nil {
		t.Fatal(err)
	}
	waitArmed(t, clk)
	if at, _ := clk.NextDeadline(); !at.Equal(periodicStart.Add(time.Second)) {
		t.Errorf("@every 500ms from %v waits until %v, want the next second", periodicStart.Add(300*time.Millisecond), at)
	}
}

// A tick's tasks get UUIDs derived from the tick and their place: the same
// in every process, new at every tick, never the registered one.
func TestPeriodicTickUUIDs(t *testing.T) {
	sig := &tasks.Signature{
		UUID: "fixed", Name: "a",
		OnSuccess: []*tasks.Signature{{UUID: "fixed-s", Name: "s"}},
		OnError:   []*tasks.Signature{{Name: "e"}},
	}
	t1 := tick{key: "periodic:x:@every 1m:60"}
	t2 := tick{key: "periodic:x:@every 1m:120"}
	uuids := func(tk tick) []string {
		c := tk.copies("", sig, sig)
		return []string{c[0].UUID, c[0].OnSuccess[0].UUID, c[0].OnError[0].UUID, c[1].UUID}
	}
	a, again, other := uuids(t1), uuids(t1), uuids(t2)
	seen := map[string]bool{}
	for i := range a {
		if a[i] != again[i] {
			t.Errorf("place %d: %s, then %s for the same tick", i, a[i], again[i])
		}
		if !strings.HasPrefix(a[i], "task_") || seen[a[i]] || seen[other[i]] || a[i] == other[i] {
			t.Errorf("place %d: %s and %s for two ticks, want task_ UUIDs distinct across places and ticks", i, a[i], other[i])
		}
		seen[a[i]], seen[other[i]] = true, true
	}
	if sig.UUID != "fixed" || sig.OnError[0].UUID != "" {
		t.Error("copies changed the registered signature")
	}
	g1, err := t1.group(sig, sig)
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := t1.group(sig, sig)
	if !strings.HasPrefix(g1.GroupUUID, "group_") || g1.GroupUUID != g2.GroupUUID || g1.Tasks[1].GroupUUID != g1.GroupUUID || g1.Tasks[1].GroupTaskCount != 2 {
		t.Errorf("group %s (members' %s, count %d), then %s: want one group_ UUID per tick on every member",
			g1.GroupUUID, g1.Tasks[1].GroupUUID, g1.Tasks[1].GroupTaskCount, g2.GroupUUID)
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
	tk := tick{key: fmt.Sprintf("periodic:chord:@every 1m:%d", periodicStart.Add(time.Minute).Unix())}
	for i := range 2 {
		m := next(t, sent)
		if m.UUID != tk.uuid("task_", "/"+strconv.Itoa(i)) || m.GroupUUID != tk.uuid("group_", "group") ||
			m.ChordCallback == nil || m.ChordCallback.UUID != tk.uuid("chord_", "callback") {
			t.Errorf("member %d: UUID %s, group %s, callback %v; want the tick's", i, m.UUID, m.GroupUUID, m.ChordCallback)
		}
	}
}
