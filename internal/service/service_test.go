package service_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/b6192125/machinist/internal/service"
)

// loop is the smallest Service on Base: it waits for its context.
type loop struct {
	service.Base
	launches atomic.Int32
	ended    atomic.Bool
}

var _ service.Service = (*loop)(nil)

func (l *loop) Start(ctx context.Context) error {
	ctx, shouldStart, stopped, err := l.StartInit(ctx)
	if !shouldStart {
		return err
	}
	l.launches.Add(1)
	go func() {
		defer close(stopped)
		<-ctx.Done()
		l.ended.Store(true)
	}()
	return nil
}

func TestBaseStopWaitsForTheGoroutine(t *testing.T) {
	t.Parallel()
	l := &loop{}
	if isClosed(l.Started()) || isClosed(l.Stopped()) {
		t.Fatal("Started or Stopped closed before Start")
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !isClosed(l.Started()) {
		t.Error("Started not closed after Start")
	}
	if isClosed(l.Stopped()) {
		t.Error("Stopped closed while the loop runs")
	}
	l.Stop()
	if !l.ended.Load() {
		t.Error("Stop returned before the goroutine ended")
	}
	if !isClosed(l.Stopped()) {
		t.Error("Stopped not closed after Stop")
	}
}

func TestBaseStartTwiceStartsOnce(t *testing.T) {
	t.Parallel()
	l := &loop{}
	t.Cleanup(l.Stop)
	for range 3 {
		if err := l.Start(context.Background()); err != nil {
			t.Fatalf("Start on a running service = %v, want nil", err)
		}
	}
	if n := l.launches.Load(); n != 1 {
		t.Errorf("%d goroutines launched, want 1", n)
	}
}

func TestBaseStopBeforeStart(t *testing.T) {
	t.Parallel()
	l := &loop{}
	l.Stop()
	l.Stop()
	if !isClosed(l.Stopped()) {
		t.Error("Stopped not closed by Stop before Start")
	}
	if isClosed(l.Started()) {
		t.Error("Started closed though the service never started")
	}
	if err := l.Start(context.Background()); !errors.Is(err, service.ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
	if n := l.launches.Load(); n != 0 {
		t.Errorf("%d goroutines launched after Stop, want 0", n)
	}
}

func TestBaseStartAfterStop(t *testing.T) {
	t.Parallel()
	l := &loop{}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Stop()
	if err := l.Start(context.Background()); !errors.Is(err, service.ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
	l.Stop()
	if n := l.launches.Load(); n != 1 {
		t.Errorf("%d goroutines launched, want 1", n)
	}
}

func TestBaseConcurrentStops(t *testing.T) {
	t.Parallel()
	l := &loop{}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			l.Stop()
			if !l.ended.Load() {
				t.Error("a Stop returned before the goroutine ended")
			}
		})
	}
	wg.Wait()
}

// A service whose parent context ends has ended; Stop still works, and it
// does not start again.
func TestBaseParentContextCancelled(t *testing.T) {
	t.Parallel()
	l := &loop{}
	ctx, cancel := context.WithCancel(context.Background())
	if err := l.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	closed(t, "Stopped after the parent context ended", l.Stopped())
	if err := l.Start(context.Background()); err != nil {
		t.Errorf("Start = %v, want nil (still counts as running)", err)
	}
	if n := l.launches.Load(); n != 1 {
		t.Errorf("%d goroutines launched, want 1", n)
	}
	l.Stop()
}
