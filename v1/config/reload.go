package config

import (
	"bytes"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// reloadInterval is how often a Config loaded with keepReloading reads its
// file again (machinery's 10 seconds). A variable so that tests can shorten
// it; a reloader reads it once, when it starts.
var reloadInterval = 10 * time.Second

// reloader reads a YAML file again every interval and publishes each version
// that loads and validates as a new *Config. machinery overwrote the Config
// it had returned (*cnf = *newCnf) while the program read it, a data race;
// here no Config is written after it is published, and readers get the
// latest through an atomic pointer.
//
// Every Config the reloader publishes points back to it, so Reloaded and
// StopReloading work on any of them.
type reloader struct {
	path   string
	latest atomic.Pointer[Config]

	stopOnce sync.Once
	stop     chan struct{} // closed by StopReloading
	done     chan struct{} // closed when run returns

	// failures counts the versions of the file that were read and refused
	// (tests wait on it).
	failures atomic.Int64

	// Owned by run.
	lastData []byte // the content of the latest published version
	lastErr  string // the latest error logged, so that it is logged once
}

// startReloading makes cnf, just loaded from data read at path, follow the
// file. cnf must not have been returned yet: this sets its reload field.
func startReloading(cnf *Config, path string, data []byte, interval time.Duration) {
	r := &reloader{
		path:     path,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		lastData: data,
	}
	cnf.reload = r
	r.latest.Store(cnf)
	go r.run(interval)
}

// run re-reads the file on each tick until StopReloading.
func (r *reloader) run(interval time.Duration) {
	defer close(r.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.reloadOnce()
		}
	}
}

// reloadOnce reads the file and publishes it if it changed and loads. A
// file that cannot be read or loaded keeps the previous Config: a reload
// failure is never fatal.
func (r *reloader) reloadOnce() {
	data, err := ReadFromFile(r.path)
	if err == nil && bytes.Equal(data, r.lastData) {
		return
	}
	var cnf *Config
	if err == nil {
		cnf, err = parseYAML(r.path, data)
	}
	if err != nil {
		r.failures.Add(1)
		if msg := err.Error(); msg != r.lastErr {
			r.lastErr = msg
			slog.Default().Warn("config: reload failed; keeping the previous configuration",
				"file", r.path, "error", err)
		}
		return
	}
	cnf.reload = r
	r.lastData = data
	r.lastErr = ""
	r.latest.Store(cnf)
	slog.Default().Info("config: reloaded", "file", r.path)
}

// Reloaded returns the latest configuration loaded from c's file: c itself
// until the file changes, and always c for a Config that is not reloading
// (one loaded without keepReloading, or built by hand, or a copy such as
// WithDefaults returns). Each call may return a different *Config, but never
// one that changes afterwards, so it is safe to read from any goroutine.
//
// Only the application sees a reload: a Server keeps the configuration it
// was created with.
func (c *Config) Reloaded() *Config {
	if c == nil || c.reload == nil {
		return c
	}
	if latest := c.reload.latest.Load(); latest != nil {
		return latest
	}
	return c
}

// StopReloading stops re-reading c's file and returns once the goroutine
// that does it has ended. Reloaded keeps returning the latest configuration.
// It is safe to call more than once, from any goroutine, on any Config the
// reloader produced, and on a Config that is not reloading (it does
// nothing).
func (c *Config) StopReloading() {
	if c == nil || c.reload == nil {
		return
	}
	r := c.reload
	r.stopOnce.Do(func() { close(r.stop) })
	<-r.done
}
