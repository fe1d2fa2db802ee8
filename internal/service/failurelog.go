package service

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/b6192125/machinist/internal/clock"
)

// DefaultLogEvery is how often a FailureLog logs a failure that goes on,
// when it is not told.
const DefaultLogEvery = 30 * time.Second

// FailureLog logs the failures of a repeated operation without flooding
// the log: the first failure at once, then at most one line per interval
// while they go on,
//
//	forwarder failed 12 times in the last 30s: <the last error>
//
// and one line when the operation succeeds again after failing. The
// failures that no line reported yet are only reported by a later failure
// or success. It is safe for concurrent use.
type FailureLog struct {
	log   *slog.Logger
	clock clock.Clock
	name  string
	every time.Duration

	mu       sync.Mutex
	failures int       // consecutive, since the last success
	unlogged int       // failures since the last line
	lastLine time.Time // when the last line about a failure was logged
}

// NewFailureLog returns a FailureLog that logs to logger (default
// slog.Default()) about the operation called name, using at most one line
// every interval (default DefaultLogEvery) while failures go on, timed by
// clk (default clock.Real()).
func NewFailureLog(logger *slog.Logger, clk clock.Clock, name string, every time.Duration) *FailureLog {
	if logger == nil {
		logger = slog.Default()
	}
	if clk == nil {
		clk = clock.Real()
	}
	if every <= 0 {
		every = DefaultLogEvery
	}
	return &FailureLog{log: logger, clock: clk, name: name, every: every}
}

// Failed records a failure, err. It logs it if it is the first since a
// success, or if the last line is at least an interval old; then the line
// counts the failures since the last one and shows err, the latest.
func (l *FailureLog) Failed(err error) {
	l.mu.Lock()
	now := l.clock.Now()
	l.failures++
	l.unlogged++
	first := l.failures == 1
	since := now.Sub(l.lastLine)
	if !first && since < l.every {
		l.mu.Unlock()
		return
	}
	count := l.unlogged
	l.lastLine, l.unlogged = now, 0
	l.mu.Unlock()

	if first {
		l.log.Error(l.name+" failed", slog.Any("error", err))
		return
	}
	l.log.Error(fmt.Sprintf("%s failed %s in the last %s: %v", l.name, times(count), roundDuration(since), err),
		slog.Int("failures", count), slog.Any("error", err))
}

// Succeeded records a success. After failures it logs that the operation
// recovered, and how many times it had failed in a row.
func (l *FailureLog) Succeeded() {
	l.mu.Lock()
	failures := l.failures
	l.failures, l.unlogged = 0, 0
	l.mu.Unlock()
	if failures > 0 {
		l.log.Info(fmt.Sprintf("%s recovered after failing %s", l.name, times(failures)),
			slog.Int("failures", failures))
	}
}

func times(n int) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}

// roundDuration keeps a wall-clock duration short in a message: 30s rather
// than 30.000123456s.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}
