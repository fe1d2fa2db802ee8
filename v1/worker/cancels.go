package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/b6192125/machinist/internal/service"
	brokers "github.com/b6192125/machinist/v1/brokers/iface"
)

// cancelWatch stops the running tasks cancelled from any process (their
// lease is gone: see brokers.Canceller); a broken watch is set up again
// after a backoff. Run starts it only when the store cancels
// (pair.Store.Cancels); elsewhere a cancelled task stops at its next
// lease renewal.
type cancelWatch struct {
	service.Base
	arch *service.Archetype
	// watch is the store's WatchCancels; cancel stops a task, and resumed
	// is called when the watch is set up again after an outage, during
	// which a cancellation may have been missed.
	watch   func(ctx context.Context, fn func(uuid string)) error
	cancel  func(uuid string)
	resumed func(ctx context.Context)
	// ready is closed once the watch is first set up.
	ready chan struct{}
}

func (w *Worker) newCancelWatch() *cancelWatch {
	return &cancelWatch{
		arch:    w.arch,
		watch:   w.store.WatchCancels,
		cancel:  w.cancelRunning,
		resumed: w.renewNow,
		ready:   make(chan struct{}),
	}
}

// Start launches the watch.
func (c *cancelWatch) Start(ctx context.Context) error {
	ctx, shouldStart, stopped, err := c.StartInit(ctx)
	if !shouldStart {
		return err
	}
	go func() {
		defer close(stopped)
		c.run(ctx)
	}()
	return nil
}

// run watches until ctx ends or the store is closed.
func (c *cancelWatch) run(ctx context.Context) {
	var once sync.Once
	// Failures are logged as the other loops log them: once, then once
	// per interval while they go on, and once when the watch is back.
	fails := c.arch.FailureLog("watching cancellations")
	watched := func(uuid string) {
		if uuid != "" {
			c.cancel(uuid)
			return
		}
		// Set up, or set up again after an outage.
		fails.Succeeded()
		first := false
		once.Do(func() { close(c.ready); first = true })
		if !first {
			go c.resumed(ctx)
		}
	}
	backoff := service.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for failures := 1; ctx.Err() == nil; failures++ {
		err := c.watch(ctx, watched)
		if ctx.Err() != nil || errors.Is(err, brokers.ErrClosed) {
			return
		}
		fails.Failed(err)
		t := c.arch.Clock.NewTimer(backoff.Delay(failures))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// cancelRunning stops the task uuid if this worker runs it: its lease is
// lost (the broker took it), so its context ends and nothing is settled.
// A cancellation of a task not (yet) running here is kept for a
// LeaseDuration, in case it was fetched and is about to start.
func (w *Worker) cancelRunning(uuid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for r := range w.active {
		if r.d.Signature.UUID == uuid {
			r.cancelled.Store(true)
			r.d.Lease.Lose()
			return
		}
	}
	now := w.arch.Clock.Now()
	for id, until := range w.cancelled {
		if !now.Before(until) {
			delete(w.cancelled, id)
		}
	}
	if w.cancelled == nil {
		w.cancelled = make(map[string]time.Time)
	}
	w.cancelled[uuid] = now.Add(w.p.Config.LeaseDuration)
}
