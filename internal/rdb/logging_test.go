package rdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// recorder is a slog.Handler that keeps the messages it is given.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	r.msgs = append(r.msgs, line)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// go-redis's lines go to the store's logger, and a line repeated 500 times
// (a pool failing to dial while Redis is down) is logged once, not 500
// times.
func TestRedisLogLinesAreCountedNotRepeated(t *testing.T) {
	rec := &recorder{}
	l := newRedisLogger()
	storeLogger.Store(slog.New(rec))
	t.Cleanup(func() { storeLogger.Store(nil) })
	for i := 0; i < 500; i++ {
		l.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v", 5, errors.New("connect: connection refused"))
	}
	if len(rec.msgs) != 1 || !strings.Contains(rec.msgs[0], "connection refused") {
		t.Fatalf("logged %d lines for 500 repeats, want 1 naming the cause: %q", len(rec.msgs), rec.msgs)
	}
}

func TestExplainNamesAuthenticationErrors(t *testing.T) {
	for _, raw := range []string{
		"NOAUTH Authentication required.",
		"WRONGPASS invalid username-password pair or user is disabled.",
		"Protocol error: unauthenticated multibulk length",
	} {
		err := Explain(fmt.Errorf("publish to queue q: %w", errors.New(raw)))
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "password") {
			t.Errorf("Explain(%q) = %v, want ErrAuth naming the password", raw, err)
		}
	}
	if err := errors.New("connection refused"); Explain(err) != err {
		t.Errorf("Explain changed an error that is not about authentication: %v", Explain(err))
	}
}
