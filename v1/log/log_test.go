package log_test

import (
	"bytes"
	"context"
	"errors"
	stdlog "log"
	"log/slog"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/syncbuf"
	"github.com/b6192125/machinist/v1"
	"github.com/b6192125/machinist/v1/config"
	mlog "github.com/b6192125/machinist/v1/log"
	"github.com/b6192125/machinist/v1/tasks"
)

// These tests change the package's globals and slog's default: they do
// not run in parallel, and the one that replaces level loggers (there is
// no undoing that) comes last.

// captureDefault makes slog.Default() write text to the returned buffer
// until the test ends.
func captureDefault(t *testing.T) *syncbuf.Buffer {
	t.Helper()
	var buf syncbuf.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return &buf
}

func TestDefaultLoggersWriteToSlog(t *testing.T) {
	buf := captureDefault(t)
	mlog.INFO.Println("worker", "started")
	mlog.WARNING.Printf("retry in %ds", 5)
	out := buf.String()
	for _, want := range []string{`level=INFO msg="worker started"`, `level=WARN msg="retry in 5s"`} {
		if !strings.Contains(out, want) {
			t.Errorf("slog.Default() got %q, want a line with %s", out, want)
		}
	}
}

// TestDefaultLoggersNameTheirCaller: a record written by a default level
// logger has the line that called it as its source, not this package's.
func TestDefaultLoggersNameTheirCaller(t *testing.T) {
	var buf syncbuf.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{AddSource: true})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	_, file, line, _ := runtime.Caller(0)
	mlog.INFO.Println("worker started")
	want := "source=" + file + ":" + strconv.Itoa(line+1) + " "
	if out := buf.String(); !strings.Contains(out, want) {
		t.Errorf("slog.Default() got %q, want a record with %s", out, want)
	}
}

func TestHandlerFollowsSlogDefaultThenTheReplacedLoggers(t *testing.T) {
	buf := captureDefault(t)
	logger := slog.New(mlog.Handler()).With(slog.String("worker", "w1"))
	logger.Info("task done", slog.String("task_id", "t1"))
	if out := buf.String(); !strings.Contains(out, `msg="task done" worker=w1 task_id=t1`) {
		t.Fatalf("before Set, slog.Default() got %q", out)
	}

	var info, errs bytes.Buffer
	mlog.SetInfo(stdlog.New(&info, "INFO: ", 0))
	mlog.SetError(stdlog.New(&errs, "ERROR: ", 0))
	logger.Info("task done", slog.String("task_id", "t2"))
	logger.Error("task failed", slog.String("error", "boom"))
	if got := info.String(); got != "INFO: task done worker=w1 task_id=t2\n" {
		t.Errorf("INFO logger got %q", got)
	}
	if got := errs.String(); got != "ERROR: task failed worker=w1 error=boom\n" {
		t.Errorf("ERROR logger got %q", got)
	}
	if strings.Contains(buf.String(), "t2") {
		t.Errorf("after SetInfo, slog.Default() still got %q", buf.String())
	}
}

// TestServerLogsGoToTheLevelLoggers: a Server whose Config.Logger is nil
// logs through the level loggers a program set, as machinery's did.
func TestServerLogsGoToTheLevelLoggers(t *testing.T) {
	var errs syncbuf.Buffer
	mlog.SetError(stdlog.New(&errs, "ERROR: ", 0))
	server, err := machinery.NewServer(&config.Config{Broker: "memory://", NoUnixSignals: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })
	if err := server.RegisterTask("fail", func() error { return errors.New("boom") }); err != nil {
		t.Fatal(err)
	}
	worker := server.NewWorker("w", 1)
	done := make(chan error, 1)
	worker.LaunchAsync(done)
	t.Cleanup(func() { worker.Quit(); <-done })
	res, err := server.SendTask(&tasks.Signature{Name: "fail"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.GetWithTimeout(10*time.Second, time.Millisecond); err == nil {
		t.Fatal("the task that returns an error succeeded")
	}
	if out := errs.String(); !strings.Contains(out, "ERROR: task failed") || !strings.Contains(out, "error=boom") {
		t.Errorf("the ERROR logger got %q, want the worker's \"task failed\" line with error=boom", out)
	}
}

// TestSetLoggerNamesTheCaller: a *log.Logger set with Set names, with
// Lshortfile, the line that logged through Handler, not this package's.
func TestSetLoggerNamesTheCaller(t *testing.T) {
	var buf syncbuf.Buffer
	mlog.Set(stdlog.New(&buf, "", stdlog.Lshortfile))
	logger := slog.New(mlog.Handler()).With(slog.String("worker", "w1"))
	_, file, line, _ := runtime.Caller(0)
	logger.Info("task done", slog.String("task_id", "t1"))
	logger.Log(context.Background(), slog.LevelError, "task failed")
	want := filepath.Base(file) + ":" + strconv.Itoa(line+1) + ": task done worker=w1 task_id=t1\n" +
		filepath.Base(file) + ":" + strconv.Itoa(line+2) + ": task failed worker=w1\n"
	if got := buf.String(); got != want {
		t.Errorf("the logger got %q, want %q", got, want)
	}
}
