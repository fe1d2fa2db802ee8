// Package log is machinery v1's log package: five level loggers a program
// writes to (log.INFO.Println, log.FATAL.Fatalln) and may replace (Set,
// SetDebug, SetInfo, SetWarning, SetError, SetFatal).
//
// In machinist they meet log/slog both ways. By default each writes records
// of its level to slog.Default(). And machinist's own logs, of every Server
// whose Config.Logger is nil, go through Handler: to slog.Default() until a
// program replaces one of the loggers, then to the replaced loggers, each
// record to the one of its level, as machinery's did. A Server's own
// *slog.Logger (Config.Logger) remains the way to choose where its logs go.
package log

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// LoggerInterface is what a level logger has: the methods of the
// standard library's *log.Logger, which is one.
type LoggerInterface interface {
	Print(v ...interface{})
	Printf(format string, v ...interface{})
	Println(v ...interface{})
	Fatal(v ...interface{})
	Fatalf(format string, v ...interface{})
	Fatalln(v ...interface{})
	Panic(v ...interface{})
	Panicf(format string, v ...interface{})
	Panicln(v ...interface{})
}

// The level loggers. Replace them with Set and the Set… functions, not by
// assignment, so that machinist's own logs follow.
var (
	DEBUG   LoggerInterface = toSlog{slog.LevelDebug}
	INFO    LoggerInterface = toSlog{slog.LevelInfo}
	WARNING LoggerInterface = toSlog{slog.LevelWarn}
	ERROR   LoggerInterface = toSlog{slog.LevelError}
	FATAL   LoggerInterface = toSlog{slog.LevelError}
)

var (
	mu       sync.RWMutex
	replaced bool // a Set… function was called
)

// Set replaces every level logger with l.
func Set(l LoggerInterface) {
	set(func() { DEBUG, INFO, WARNING, ERROR, FATAL = l, l, l, l, l })
}

// SetDebug replaces the DEBUG logger.
func SetDebug(l LoggerInterface) { set(func() { DEBUG = l }) }

// SetInfo replaces the INFO logger.
func SetInfo(l LoggerInterface) { set(func() { INFO = l }) }

// SetWarning replaces the WARNING logger.
func SetWarning(l LoggerInterface) { set(func() { WARNING = l }) }

// SetError replaces the ERROR logger.
func SetError(l LoggerInterface) { set(func() { ERROR = l }) }

// SetFatal replaces the FATAL logger.
func SetFatal(l LoggerInterface) { set(func() { FATAL = l }) }

func set(assign func()) {
	mu.Lock()
	defer mu.Unlock()
	assign()
	replaced = true
}

// loggerFor returns the level logger of a record at level, and whether
// a program replaced any logger.
func loggerFor(level slog.Level) (LoggerInterface, bool) {
	mu.RLock()
	defer mu.RUnlock()
	if !replaced {
		return nil, false
	}
	switch {
	case level < slog.LevelInfo:
		return DEBUG, true
	case level < slog.LevelWarn:
		return INFO, true
	case level < slog.LevelError:
		return WARNING, true
	default:
		return ERROR, true
	}
}

// toSlog is a default level logger: it writes records of its level to
// slog.Default(); Fatal… then exits with status 1, Panic… panics.
type toSlog struct{ level slog.Level }

// log is called by the Print… methods only, so the record's source is
// their caller, as it would be had the program logged with slog itself.
func (l toSlog) log(msg string) {
	ctx := context.Background()
	h := slog.Default().Handler()
	if !h.Enabled(ctx, l.level) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // runtime.Callers, log, the Print… method
	_ = h.Handle(ctx, slog.NewRecord(time.Now(), l.level, strings.TrimSuffix(msg, "\n"), pcs[0]))
}

func (l toSlog) Print(v ...interface{})                 { l.log(fmt.Sprint(v...)) }
func (l toSlog) Printf(format string, v ...interface{}) { l.log(fmt.Sprintf(format, v...)) }
func (l toSlog) Println(v ...interface{})               { l.log(fmt.Sprintln(v...)) }

func (l toSlog) Fatal(v ...interface{})                 { l.log(fmt.Sprint(v...)); os.Exit(1) }
func (l toSlog) Fatalf(format string, v ...interface{}) { l.log(fmt.Sprintf(format, v...)); os.Exit(1) }
func (l toSlog) Fatalln(v ...interface{})               { l.log(fmt.Sprintln(v...)); os.Exit(1) }

func (l toSlog) Panic(v ...interface{}) { s := fmt.Sprint(v...); l.log(s); panic(s) }
func (l toSlog) Panicf(format string, v ...interface{}) {
	s := fmt.Sprintf(format, v...)
	l.log(s)
	panic(s)
}
func (l toSlog) Panicln(v ...interface{}) { s := fmt.Sprintln(v...); l.log(s); panic(s) }

// Handler returns the slog.Handler of machinist's own logs when a Server's
// Config.Logger is nil: until a program replaces a level logger, it hands
// every record to slog.Default()'s handler; afterwards it prints each record
// ("message key=value …") with the level logger of its level: DEBUG below
// Info, INFO, WARNING, and ERROR from Error up.
func Handler() slog.Handler { return &handler{} }

// handler keeps the attributes and groups added to it, in order, to apply
// them to whichever handler a record goes to.
type handler struct {
	ops []func(slog.Handler) slog.Handler
}

func (h *handler) target(level slog.Level) (slog.Handler, LoggerInterface) {
	if l, ok := loggerFor(level); ok {
		return nil, l
	}
	return slog.Default().Handler(), nil
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	if def, _ := h.target(level); def != nil {
		return def.Enabled(ctx, level)
	}
	return true
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	def, l := h.target(r.Level)
	var buf bytes.Buffer
	if def == nil {
		// The attributes as text after the message, without time or
		// level: the level logger says those its own way.
		def = slog.NewTextHandler(&buf, &slog.HandlerOptions{
			Level: slog.LevelDebug,
			ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
				if len(groups) == 0 && (a.Key == slog.TimeKey || a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
					return slog.Attr{}
				}
				return a
			},
		})
	}
	for _, op := range h.ops {
		def = op(def)
	}
	if err := def.Handle(ctx, r); err != nil {
		return err
	}
	if l != nil {
		printAt(l, r.PC, strings.TrimSpace(r.Message+" "+strings.TrimSuffix(buf.String(), "\n")))
	}
	return nil
}

// outputter is a level logger that can be told which frame to name as the
// caller: the standard library's *log.Logger is one.
type outputter interface {
	Output(calldepth int, s string) error
}

// printAt prints s with l, naming the frame that made the call at pc as
// the caller when l can name one (with log.Lshortfile, say) and that
// frame is on the stack; else as l.Print would.
func printAt(l LoggerInterface, pc uintptr, s string) {
	o, ok := l.(outputter)
	if !ok || pc == 0 {
		l.Print(s)
		return
	}
	want, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	var pcs [64]uintptr
	n := runtime.Callers(1, pcs[:]) // from printAt: Output's calldepth 1
	frames := runtime.CallersFrames(pcs[:n])
	for depth := 1; ; depth++ {
		f, more := frames.Next()
		if f.Function == want.Function && f.File == want.File && f.Line == want.Line {
			_ = o.Output(depth, s)
			return
		}
		if !more {
			break
		}
	}
	l.Print(s)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(func(t slog.Handler) slog.Handler { return t.WithAttrs(attrs) })
}

func (h *handler) WithGroup(name string) slog.Handler {
	return h.with(func(t slog.Handler) slog.Handler { return t.WithGroup(name) })
}

func (h *handler) with(op func(slog.Handler) slog.Handler) slog.Handler {
	ops := make([]func(slog.Handler) slog.Handler, len(h.ops), len(h.ops)+1)
	copy(ops, h.ops)
	return &handler{ops: append(ops, op)}
}
