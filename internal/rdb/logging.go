package rdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
	"github.com/b6192125/machinist/internal/store"
)

// ErrAuth is wrapped by errors that say Redis wants a password, or refused
// the one given: go-redis reports that as NOAUTH, WRONGPASS or, for a
// client that sent a long command unauthenticated, "Protocol error:
// unauthenticated multibulk length", which says nothing of passwords.
var ErrAuth = store.ErrAuth

// Explain wraps err with ErrAuth when it is an authentication error, and
// says which address could not be reached when Redis could not be
// connected to, so that what a user reads names the cause rather than the
// step that met it; other errors are returned as they are.
func Explain(err error) error {
	if err == nil || errors.Is(err, ErrAuth) {
		return err
	}
	if isAuthError(err) {
		return fmt.Errorf("%w (%v)", ErrAuth, err)
	}
	var op *net.OpError
	var un *unreachableError
	if !errors.As(err, &un) && errors.As(err, &op) && op.Op == "dial" {
		return &unreachableError{op: op, err: err}
	}
	return err
}

// unreachableError is a failure to connect to Redis: it says where, and
// why, without the steps that were under way (they are in the chain it
// wraps). Addresses hold no credentials.
type unreachableError struct {
	op  *net.OpError // the failed dial
	err error
}

func (e *unreachableError) Error() string {
	addr := ""
	var dns *net.DNSError
	switch {
	case e.op.Addr != nil:
		addr = e.op.Addr.String()
	case errors.As(e.op.Err, &dns):
		addr = dns.Name
	}
	if addr == "" {
		return "could not reach Redis: " + e.op.Error()
	}
	return fmt.Sprintf("could not reach Redis at %s: %v", addr, e.op.Err)
}

func (e *unreachableError) Unwrap() error { return e.err }

// isAuthError reports whether err is Redis refusing an unauthenticated or
// wrongly authenticated client, however it was wrapped.
func isAuthError(err error) bool {
	if goredis.IsAuthError(err) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "unauthenticated")
}

// go-redis logs (a pool failing to dial, for one) through one logger per
// process, to stderr by default, one line per attempt. machinist replaces
// it, once, with redisLogger: every line goes to the logger of the latest
// store made (its Options.Logger, which NewServer takes from
// Config.Logger), and a line that repeats is logged once, then once per 30
// seconds with a count.
var (
	installLoggerOnce sync.Once
	storeLogger       atomic.Pointer[slog.Logger]
)

// useLogger makes log the one go-redis logs to.
func useLogger(log *slog.Logger) {
	storeLogger.Store(log)
	installLoggerOnce.Do(func() { goredis.SetLogger(newRedisLogger()) })
}

func newRedisLogger() *redisLogger {
	return &redisLogger{repeats: make(map[string]*repeatedLine)}
}

// redisLogger is go-redis's logger while machinist runs.
type redisLogger struct {
	mu      sync.Mutex
	repeats map[string]*repeatedLine // by format
}

// repeatedLine counts the lines of one format, for the logger it logs to.
type repeatedLine struct {
	log   *slog.Logger
	lines *service.FailureLog
}

// Printf logs one line of go-redis's, as a warning of the current store's
// logger, through a FailureLog per format so that repeats are counted, not
// printed.
func (l *redisLogger) Printf(ctx context.Context, format string, v ...interface{}) {
	log := storeLogger.Load()
	if log == nil {
		log = slog.Default()
	}
	l.mu.Lock()
	r := l.repeats[format]
	if r == nil || r.log != log {
		r = &repeatedLine{log: log, lines: service.NewFailureLog(log.With(slog.String("component", "go-redis")), clock.Real(), "go-redis", 0)}
		l.repeats[format] = r
	}
	l.mu.Unlock()
	r.lines.Failed(Explain(errors.New(strings.TrimSpace(fmt.Sprintf(format, v...)))))
}
