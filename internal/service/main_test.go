package service_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/waitfor"
)

// TestMain fails the run if a test leaves a loop's goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var start = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// waitArmed waits until n timers of clk are armed, failing the test after
// a deadline.
func waitArmed(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	waitfor.Armed(t, 10*time.Second, clk, n)
}

// closed fails the test if c is not closed within a deadline.
func closed(t *testing.T, what string, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// isClosed reports whether c is closed, without waiting.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// logLines is a logger whose records, without their time, a test reads
// back as text lines.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newLog() (*slog.Logger, *logLines) {
	l := &logLines{}
	h := slog.NewTextHandler(l, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	return slog.New(h), l
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimSuffix(l.buf.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
