package config

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// These tests shorten reloadInterval, a package variable, so none of them
// is parallel.

// fastReload makes the reloaders the test starts read their file every
// millisecond.
func fastReload(t *testing.T) {
	t.Helper()
	old := reloadInterval
	reloadInterval = time.Millisecond
	t.Cleanup(func() { reloadInterval = old })
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
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
	fastReload(t)
	path := tempFile(t, "default_queue: one\n")
	cnf := loadReloading(t, path)
	if cnf.Reloaded() != cnf {
		t.Fatal("Reloaded() before any change is not the loaded Config")
	}

	writeFile(t, path, "default_queue: two\nredis:\n  key_prefix: two\n")
	waitFor(t, "the change to be picked up", func() bool { return cnf.Reloaded().DefaultQueue == "two" })

	latest := cnf.Reloaded()
	if latest.Redis.KeyPrefix != "two" || latest.Broker != DefaultBroker {
		t.Errorf("reloaded Config = %+v, Redis %+v; want the new file over the loader defaults", latest, latest.Redis)
	}
	if cnf.DefaultQueue != "one" || cnf.Redis.KeyPrefix != "" {
		t.Errorf("the returned Config was written: DefaultQueue %q, KeyPrefix %q", cnf.DefaultQueue, cnf.Redis.KeyPrefix)
	}
	if latest.Reloaded() != latest {
		t.Error("Reloaded() on the latest Config is not itself")
	}
}

// Readers see whole versions: never DefaultQueue of one and KeyPrefix of
// another (machinery's *cnf = *newCnf allowed that, and raced). Run with
// -race.
func TestReloadIsRaceFree(t *testing.T) {
	fastReload(t)
	version := func(i int) string {
		return fmt.Sprintf("default_queue: q%d\nredis:\n  key_prefix: p%d\n", i, i)
	}
	path := tempFile(t, version(0))
	cnf := loadReloading(t, path)

	var stop atomic.Bool
	var torn atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				c := cnf.Reloaded()
				if "q"+c.Redis.KeyPrefix[1:] != c.DefaultQueue {
					torn.Store(fmt.Sprintf("%s with %s", c.DefaultQueue, c.Redis.KeyPrefix))
				}
				runtime.Gosched() // leave the reloader some CPU
			}
		}()
	}
	for i := 1; i <= 20; i++ {
		writeFile(t, path, version(i))
		want := fmt.Sprintf("q%d", i)
		waitFor(t, want, func() bool { return cnf.Reloaded().DefaultQueue == want })
	}
	stop.Store(true)
	wg.Wait()
	if v := torn.Load(); v != nil {
		t.Errorf("a reader saw a torn Config: %s", v)
	}
}

func TestReloadKeepsThePreviousConfigOnABadFile(t *testing.T) {
	fastReload(t)
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
			path := tempFile(t, "default_queue: one\n")
			cnf := loadReloading(t, path)
			r := cnf.reload

			writeFile(t, path, "default_queue: two\n")
			waitFor(t, "the good change", func() bool { return cnf.Reloaded().DefaultQueue == "two" })
			good := cnf.Reloaded()

			before := r.failures.Load()
			tt.spoil(t, path)
			waitFor(t, "the bad file to be read", func() bool { return r.failures.Load() > before+2 })
			if cnf.Reloaded() != good {
				t.Fatalf("after a bad file Reloaded() = %+v, want the previous Config", cnf.Reloaded())
			}

			// Not fatal: the reloader goes on.
			writeFile(t, path, "default_queue: three\n")
			waitFor(t, "the fixed file", func() bool { return cnf.Reloaded().DefaultQueue == "three" })
		})
	}
}

func TestStopReloading(t *testing.T) {
	fastReload(t)
	others := goleak.IgnoreCurrent()
	path := tempFile(t, "default_queue: one\n")
	cnf, err := NewFromYaml(path, true)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, "default_queue: two\n")
	waitFor(t, "the change", func() bool { return cnf.Reloaded().DefaultQueue == "two" })

	// From several goroutines, through the loaded and the reloaded Config.
	var wg sync.WaitGroup
	for _, c := range []*Config{cnf, cnf.Reloaded(), cnf} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.StopReloading()
		}()
	}
	wg.Wait()
	cnf.StopReloading()
	goleak.VerifyNone(t, others)

	if cnf.Reloaded().DefaultQueue != "two" {
		t.Errorf("after StopReloading, Reloaded().DefaultQueue = %q, want the latest, two", cnf.Reloaded().DefaultQueue)
	}
}

func TestStopReloadingOnAConfigThatDoesNotReload(t *testing.T) {
	fastReload(t)
	path := tempFile(t, "default_queue: one\n")
	plain, err := NewFromYaml(path, false)
	if err != nil {
		t.Fatal(err)
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
	fastReload(t)
	path := tempFile(t, "default_queue: one\n")
	cnf := loadReloading(t, path)
	cp := cnf.WithDefaults()
	if cp.reload != nil {
		t.Fatal("WithDefaults copied the reloader")
	}
	cp.StopReloading()

	writeFile(t, path, "default_queue: two\n")
	waitFor(t, "the change after stopping the copy", func() bool { return cnf.Reloaded().DefaultQueue == "two" })
	if cp.Reloaded() != cp || cp.DefaultQueue != "one" {
		t.Errorf("the copy followed the file: %q", cp.Reloaded().DefaultQueue)
	}
}
