package config

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/waitfor"
)

// These tests replace reloadClock, a package variable, so none of them is
// parallel. They move the fake clock instead of waiting: no test sleeps.

// fakeReload makes the reloaders the test starts run on a clock.Fake, and
// returns it.
func fakeReload(t *testing.T) *clock.Fake {
	t.Helper()
	clk := clock.NewFake(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	old := reloadClock
	reloadClock = clk
	t.Cleanup(func() { reloadClock = old })
	return clk
}

// waitArmed waits until n timers of clk are armed, failing the test after
// a deadline.
func waitArmed(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	waitfor.Armed(t, 10*time.Second, clk, n)
}

// tick makes the one reloader on clk read its file once, and returns when
// it is done: the reloader waits on its timer, the clock reaches it, the
// reloader reads the file and arms its timer again.
func tick(t *testing.T, clk *clock.Fake) {
	t.Helper()
	waitArmed(t, clk, 1)
	clk.Advance(reloadInterval)
	waitArmed(t, clk, 1)
}

// loadReloading loads path with keepReloading and stops the reloader at the
// end of the test.
func loadReloading(t *testing.T, path string) *Config {
	t.Helper()
	cnf, err := NewFromYaml(path, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cnf.StopReloading)
	return cnf
}

func TestReloadPicksUpAChangedFile(t *testing.T) {
	clk := fakeReload(t)
	path := tempFile(t, "default_queue: one\n")
	cnf := loadReloading(t, path)
	if cnf.Reloaded() != cnf {
		t.Fatal("Reloaded() before any change is not the loaded Config")
	}

	writeFile(t, path, "default_queue: two\nredis:\n  key_prefix: two\n")
	tick(t, clk)
	latest := cnf.Reloaded()
	if latest.DefaultQueue != "two" {
		t.Fatalf("after a tick Reloaded().DefaultQueue = %q, want two", latest.DefaultQueue)
	}
	if latest.Redis.KeyPrefix != "two" || latest.Broker != "" {
		t.Errorf("reloaded Config = %+v, Redis %+v; want the new file over the loader defaults", latest, latest.Redis)
	}
	if cnf.DefaultQueue != "one" || cnf.Redis.KeyPrefix != "" {
		t.Errorf("the returned Config was written: DefaultQueue %q, KeyPrefix %q", cnf.DefaultQueue, cnf.Redis.KeyPrefix)
	}
	if latest.Reloaded() != latest {
		t.Error("Reloaded() on the latest Config is not itself")
	}

	tick(t, clk) // the same file again: nothing new is published
	if cnf.Reloaded() != latest {
		t.Error("an unchanged file published a new Config")
	}
}

// The file is read every reloadInterval, not sooner.
func TestReloadWaitsForTheInterval(t *testing.T) {
	clk := fakeReload(t)
	path := tempFile(t, "default_queue: one\n")
	cnf := loadReloading(t, path)
	writeFile(t, path, "default_queue: two\n")
	for range 3 {
		waitArmed(t, clk, 1)
		next, _ := clk.NextDeadline()
		if wait := clk.Until(next); wait != reloadInterval {
			t.Fatalf("the reloader waits %v, want %v", wait, reloadInterval)
		}
		clk.Advance(reloadInterval)
	}
	waitArmed(t, clk, 1)
	if got := cnf.Reloaded().DefaultQueue; got != "two" {
		t.Errorf("Reloaded().DefaultQueue = %q, want two", got)
	}
}

// Readers see whole versions: never DefaultQueue of one and KeyPrefix of
// another (machinery's *cnf = *newCnf allowed that, and raced). Run with
// -race.
func TestReloadIsRaceFree(t *testing.T) {
	clk := fakeReload(t)
	version := func(i int) string {
		return fmt.Sprintf("default_queue: q%d\nredis:\n  key_prefix: p%d\n", i, i)
	}
	path := tempFile(t, version(0))
	cnf := loadReloading(t, path)

	var stop atomic.Bool
	var torn atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				c := cnf.Reloaded()
				if "q"+c.Redis.KeyPrefix[1:] != c.DefaultQueue {
					torn.Store(fmt.Sprintf("%s with %s", c.DefaultQueue, c.Redis.KeyPrefix))
				}
				runtime.Gosched() // leave the reloader some CPU
			}
		})
	}
	for i := 1; i <= 20; i++ {
		writeFile(t, path, version(i))
		tick(t, clk)
		if want, got := fmt.Sprintf("q%d", i), cnf.Reloaded().DefaultQueue; got != want {
			t.Fatalf("after a tick Reloaded().DefaultQueue = %q, want %q", got, want)
		}
	}
	stop.Store(true)
	wg.Wait()
	if v := torn.Load(); v != nil {
		t.Errorf("a reader saw a torn Config: %s", v)
	}
}

func TestReloadKeepsThePreviousConfigOnABadFile(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(t *testing.T, path string)
	}{
		{"unparseable", func(t *testing.T, path string) { writeFile(t, path, "default_queue: [\n") }},
		{"unknown key", func(t *testing.T, path string) { writeFile(t, path, "default_queu: bad\n") }},
		{"invalid", func(t *testing.T, path string) { writeFile(t, path, "broker: amqp://localhost\n") }},
		{"removed", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeReload(t)
			path := tempFile(t, "default_queue: one\n")
			cnf := loadReloading(t, path)
			r := cnf.reload

			writeFile(t, path, "default_queue: two\n")
			tick(t, clk)
			good := cnf.Reloaded()
			if good.DefaultQueue != "two" {
				t.Fatalf("the good change was not picked up: %q", good.DefaultQueue)
			}

			before := r.failures.Load()
			tt.spoil(t, path)
			for range 3 {
				tick(t, clk)
			}
			if got := r.failures.Load() - before; got != 3 {
				t.Errorf("%d refused reads in 3 ticks, want 3", got)
			}
			if cnf.Reloaded() != good {
				t.Fatalf("after a bad file Reloaded() = %+v, want the previous Config", cnf.Reloaded())
			}

			// Not fatal: the reloader goes on.
			writeFile(t, path, "default_queue: three\n")
			tick(t, clk)
			if got := cnf.Reloaded().DefaultQueue; got != "three" {
				t.Errorf("after the fix Reloaded().DefaultQueue = %q, want three", got)
			}
		})
	}
}

// A failure that repeats is logged once; a different one, and the recovery,
// are logged.
func TestReloadLogsAFailureOnce(t *testing.T) {
	clk := fakeReload(t)
	var logs strings.Builder
	var mu sync.Mutex
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	path := tempFile(t, "default_queue: one\n")
	loadReloading(t, path)
	writeFile(t, path, "default_queue: [\n")
	tick(t, clk)
	tick(t, clk)
	writeFile(t, path, "default_queu: bad\n")
	tick(t, clk)
	tick(t, clk)
	writeFile(t, path, "default_queue: two\n")
	tick(t, clk)

	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if n := strings.Count(out, "reload failed"); n != 2 {
		t.Errorf("%d lines about a failure for two errors, each read twice; want 2:\n%s", n, out)
	}
	if n := strings.Count(out, "config: reloaded"); n != 1 {
		t.Errorf("%d lines about a reload, want 1:\n%s", n, out)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestStopReloading(t *testing.T) {
	clk := fakeReload(t)
	others := goleak.IgnoreCurrent()
	path := tempFile(t, "default_queue: one\n")
	cnf, err := NewFromYaml(path, true)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "default_queue: two\n")
	tick(t, clk)

	// From several goroutines, through the loaded and the reloaded Config.
	var wg sync.WaitGroup
	for _, c := range []*Config{cnf, cnf.Reloaded(), cnf} {
		wg.Go(c.StopReloading)
	}
	wg.Wait()
	cnf.StopReloading()
	goleak.VerifyNone(t, others)
	if clk.Armed() != 0 {
		t.Errorf("Armed() = %d after StopReloading, want 0", clk.Armed())
	}

	if cnf.Reloaded().DefaultQueue != "two" {
		t.Errorf("after StopReloading, Reloaded().DefaultQueue = %q, want the latest, two", cnf.Reloaded().DefaultQueue)
	}
	writeFile(t, path, "default_queue: three\n")
	clk.Advance(time.Hour)
	if cnf.Reloaded().DefaultQueue != "two" {
		t.Errorf("a stopped reloader read the file: %q", cnf.Reloaded().DefaultQueue)
	}
}

func TestStopReloadingOnAConfigThatDoesNotReload(t *testing.T) {
	clk := fakeReload(t)
	path := tempFile(t, "default_queue: one\n")
	plain, err := NewFromYaml(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if clk.Armed() != 0 {
		t.Error("a Config loaded without keepReloading armed a timer")
	}
	for name, c := range map[string]*Config{"loaded": plain, "hand-built": {}, "nil": nil} {
		c.StopReloading()
		c.StopReloading()
		if c.Reloaded() != c {
			t.Errorf("%s: Reloaded() is not the Config itself", name)
		}
	}
}

// A copy made by WithDefaults is a plain Config: it does not follow the
// file, and stopping it does not stop the original.
func TestWithDefaultsCopyDoesNotReload(t *testing.T) {
	clk := fakeReload(t)
	path := tempFile(t, "default_queue: one\n")
	cnf := loadReloading(t, path)
	cp := cnf.WithDefaults()
	if cp.reload != nil {
		t.Fatal("WithDefaults copied the reloader")
	}
	cp.StopReloading()

	writeFile(t, path, "default_queue: two\n")
	tick(t, clk) // the original's reloader still runs
	if cnf.Reloaded().DefaultQueue != "two" {
		t.Errorf("stopping the copy stopped the original: %q", cnf.Reloaded().DefaultQueue)
	}
	if cp.Reloaded() != cp || cp.DefaultQueue != "one" {
		t.Errorf("the copy followed the file: %q", cp.Reloaded().DefaultQueue)
	}
}
