package config

import (
	"bytes"
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/b6192125/machinist/internal/clock"
	"github.com/b6192125/machinist/internal/service"
)

// reloadInterval is how often a Config loaded with keepReloading reads its
// file again (machinery's 10 seconds).
const reloadInterval = 10 * time.Second

// reloadClock times the reloaders. Tests replace it with a clock.Fake and
// advance it; a reloader reads it once, when it starts.
var reloadClock clock.Clock = clock.Real()

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
	loop   *service.Periodic // StopReloading stops it

	// failures counts the versions of the file that were read and refused
	// (tests read it).
	failures atomic.Int64

	// Owned by the loop.
	lastData []byte // the content of the latest published version
	lastErr  string // the latest error logged, so that it is logged once
}

// startReloading makes cnf, just loaded from data read at path, follow the
// file: a service.Periodic reads it every interval (the pause between the
// end of a read and the next one) until StopReloading. cnf must not have
// been returned yet: this sets its reload field.
func startReloading(cnf *Config, path string, data []byte, interval time.Duration) {
	r := &reloader{path: path, lastData: data}
	r.loop = service.NewPeriodic(service.PeriodicParams{
		Name:      "config reloader",
		Interval:  interval,
		RunFunc:   r.reloadOnce,
		Archetype: service.NewArchetype(nil, reloadClock),
	})
	cnf.reload = r
	r.latest.Store(cnf)
	// The reloader lives until StopReloading, not for a caller's request:
	// there is no context to inherit. Start fails only on invalid params,
	// and then the Config simply does not reload.
	if err := r.loop.Start(context.Background()); err != nil {
		slog.Default().Error("config: cannot reload", "file", path, "error", err)
	}
}

// reloadOnce reads the file and publishes it if it changed and loads. A
// file that cannot be read or loaded keeps the previous Config: a reload
// failure is never fatal. It logs each different error once, and returns
// nil: the file is read again every interval, failing or not, with no
// backoff.
func (r *reloader) reloadOnce(context.Context) error {
	data, err := ReadFromFile(r.path)
	if err == nil && bytes.Equal(data, r.lastData) {
		return nil
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
		return nil
	}
	cnf.reload = r
	r.lastData = data
	r.lastErr = ""
	r.latest.Store(cnf)
	slog.Default().Info("config: reloaded", "file", r.path)
	return nil
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
	c.reload.loop.Stop()
}
