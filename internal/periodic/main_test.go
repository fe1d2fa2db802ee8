package periodic

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/store"
	"github.com/b6192125/machinist/internal/waitfor"
)

// TestMain fails the run if a test leaves a scheduler's goroutine behind.
// None of the tests sleeps: each moves its scheduler's fake clock.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// noClaims is a Server whose broker is not a Claimer and that has no
// lock: every attempt wins its tick, with no token, and is tried once.
// The tests that use it add entries with send functions of their own, so
// it sends nothing: its other methods are nil.
type noClaims struct {
	Server
	err error // returned by Err
}

func (s noClaims) Err() error                 { return s.err }
func (noClaims) LeaseDuration() time.Duration { return 10 * time.Second }

func (noClaims) Claim(context.Context, string, time.Duration, time.Duration) (store.ClaimResult, error) {
	return store.ClaimResult{Status: store.ClaimWon}, nil
}

// newScheduler returns a Scheduler on a noClaims Server and a clock.Fake
// at at, stopped when the test ends.
func newScheduler(t *testing.T, at time.Time) (*Scheduler, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(at)
	sc := NewScheduler(SchedulerParams{
		Server:    noClaims{},
		Archetype: service.NewArchetype(slog.New(slog.DiscardHandler), clk),
	})
	t.Cleanup(sc.Stop)
	return sc, clk
}

// fired records, through the fake clock, when an entry fired.
func fired(clk *clock.Fake, c chan<- time.Time) func(context.Context, Tick) error {
	return func(context.Context, Tick) error {
		c <- clk.Now()
		return nil
	}
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
