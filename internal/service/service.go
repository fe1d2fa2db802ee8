package service

import (
	"context"
	"sync"
)

// Service is a background loop: Start launches it and returns, Stop ends
// it and returns once it has ended.
//
// Start returns nil if the service started, or was already running; it
// returns ErrStopped after Stop, and may return an error of its own (an
// invalid configuration) before starting anything. Stop may be called any
// number of times, from any goroutine, before Start or after; it must not be
// called from the service's own goroutine, which it waits for.
type Service interface {
	Start(ctx context.Context) error
	Stop()
}

// Base implements the start/stop protocol of a Service; a loop embeds it
// and writes only its Start (River's startstop.BaseStartStop):
//
//	type forwarder struct {
//		service.Base
//		...
//	}
//
//	func (f *forwarder) Start(ctx context.Context) error {
//		ctx, shouldStart, stopped, err := f.StartInit(ctx)
//		if !shouldStart {
//			return err
//		}
//		go func() {
//			defer close(stopped)
//			f.run(ctx) // returns when ctx is done
//		}()
//		return nil
//	}
//
// Base's Stop cancels that ctx and waits for stopped to be closed. The zero
// Base is ready to use; it must not be copied after first use.
type Base struct {
	mu      sync.Mutex
	state   state
	cancel  context.CancelFunc
	started chan struct{} // closed when StartInit lets the service start
	stopped chan struct{} // closed by the service's goroutine, or by Stop before Start
}

type state int

const (
	stateNew state = iota
	stateRunning
	stateStopped
)

// StartInit is called first by Start. If the service should start it
// returns a context, derived from ctx, that Stop cancels, true, and the
// channel that the service's goroutine must close when it returns. The
// goroutine must be launched (or, if Start gives up, stopped closed) once
// StartInit has returned true, or Stop waits forever: check what can fail
// before calling StartInit.
//
// It returns false and a nil error if the service is already running, and
// false and ErrStopped once Stop has been called. A service whose context
// was cancelled by its parent has ended but still counts as running until
// Stop.
func (b *Base) StartInit(ctx context.Context) (_ context.Context, shouldStart bool, stopped chan struct{}, _ error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.initLocked()
	switch b.state {
	case stateRunning:
		return ctx, false, nil, nil
	case stateStopped:
		return ctx, false, nil, ErrStopped
	}
	b.state = stateRunning
	ctx, b.cancel = context.WithCancel(ctx)
	close(b.started)
	return ctx, true, b.stopped, nil
}

// Stop cancels the service's context and waits for its goroutine to close
// stopped. Stop before Start returns at once, and a later Start returns
// ErrStopped. It is safe to call more than once and from several goroutines;
// every call returns once the service has ended.
func (b *Base) Stop() {
	b.mu.Lock()
	b.initLocked()
	prev := b.state
	b.state = stateStopped
	cancel, stopped := b.cancel, b.stopped
	if prev == stateNew {
		close(stopped) // nothing will run
	}
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	<-stopped
}

// Started returns a channel closed once Start has started the service. It
// is never closed for a service stopped before it started.
func (b *Base) Started() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.initLocked()
	return b.started
}

// Stopped returns a channel closed once the service's goroutine has
// returned, or by Stop if the service never started.
func (b *Base) Stopped() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.initLocked()
	return b.stopped
}

func (b *Base) initLocked() {
	if b.started == nil {
		b.started = make(chan struct{})
		b.stopped = make(chan struct{})
	}
}
