package service

import (
	"log/slog"

	"github.com/b6192125/machinist/internal/clock"
)

// Archetype is what the services of one owner (a worker, a broker, a
// scheduler) share: the logger they write to and the clock they wait on.
// The owner builds one and hands it to each of its services, so that a
// test that injects a clock.Fake or a captured logger reaches every loop
// at once (River's baseservice.Archetype).
type Archetype struct {
	Logger *slog.Logger
	Clock  clock.Clock
}

// NewArchetype returns an Archetype of logger (default slog.Default()) and
// clk (default clock.Real()).
func NewArchetype(logger *slog.Logger, clk clock.Clock) *Archetype {
	if logger == nil {
		logger = slog.Default()
	}
	if clk == nil {
		clk = clock.Real()
	}
	return &Archetype{Logger: logger, Clock: clk}
}

// With returns an Archetype whose logger adds args to every line, with
// the same clock.
func (a *Archetype) With(args ...any) *Archetype {
	return &Archetype{Logger: a.Logger.With(args...), Clock: a.Clock}
}

// FailureLog returns a FailureLog of the operation called name that logs
// to the Archetype's logger at most one line per DefaultLogEvery.
func (a *Archetype) FailureLog(name string) *FailureLog {
	return NewFailureLog(a.Logger, a.Clock, name, 0)
}
