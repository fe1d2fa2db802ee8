package service_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
)

func TestFailureLog(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	logger, logs := newLog()
	fl := service.NewFailureLog(logger, clk, "forwarder", 30*time.Second)
	fail := func(after time.Duration, msg string) {
		clk.Advance(after)
		fl.Failed(errors.New(msg))
	}

	fail(0, "e1") // the first: logged
	fail(10*time.Second, "e2")
	fail(10*time.Second, "e3")
	fail(10*time.Second, "e4") // 30s after the first line: a summary
	fail(time.Second, "e5")
	fl.Succeeded()
	fl.Succeeded()             // nothing to say
	fail(time.Minute, "e6")    // first again
	fail(45*time.Second, "e7") // one failure in the last 45s

	want := []string{
		`level=ERROR msg="forwarder failed" error=e1`,
		`level=ERROR msg="forwarder failed 3 times in the last 30s: e4" failures=3 error=e4`,
		`level=INFO msg="forwarder recovered after failing 5 times" failures=5`,
		`level=ERROR msg="forwarder failed" error=e6`,
		`level=ERROR msg="forwarder failed once in the last 45s: e7" failures=1 error=e7`,
	}
	if got := logs.lines(); !slices.Equal(got, want) {
		t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestFailureLogDefaults(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(start)
	logger, logs := newLog()
	fl := service.NewFailureLog(logger, clk, "janitor", 0) // DefaultLogEvery
	fl.Failed(errors.New("e1"))
	clk.Advance(service.DefaultLogEvery - time.Nanosecond)
	fl.Failed(errors.New("e2"))
	clk.Advance(time.Nanosecond)
	fl.Failed(errors.New("e3"))
	if got := len(logs.lines()); got != 2 {
		t.Errorf("%d lines, want 2: %q", got, logs.lines())
	}

	// nil logger and clock: slog.Default and the wall clock; no panic.
	service.NewFailureLog(nil, nil, "x", 0).Succeeded()
}
