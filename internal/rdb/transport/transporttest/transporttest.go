// Package transporttest helps the tests of package transport and of its
// callers: it holds a Batcher's lanes busy, checks that a call returns by
// its deadline, and counts what a client sends.
package transporttest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/b6192125/machinist/internal/rdb/transport"
)

// CountingHook counts pipelines and commands sent.
type CountingHook struct{ Pipelines, Cmds atomic.Int64 }

func (h *CountingHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h *CountingHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error { h.Cmds.Add(1); return next(ctx, cmd) }
}
func (h *CountingHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.Pipelines.Add(1)
		h.Cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// LaneHolder holds lanes of b for a test: hold makes one more lane (the
// next idle one from key's, as Run takes them) busy sending until free is
// called. free is safe to call more than once, and is called when the test
// ends (before b or its store closes, which waits for the lanes, when
// they were made earlier in the test).
func LaneHolder(t *testing.T, b *transport.Batcher, key string) (hold, free func()) {
	release := make(chan struct{})
	var once sync.Once
	free = func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	hold = func() {
		held := make(chan struct{})
		go b.Run(context.Background(), key, func(p goredis.Pipeliner) []goredis.Cmder {
			close(held)
			<-release
			return nil
		}, nil)
		<-held
	}
	return hold, free
}

// callMargin is how long past its deadline a call may return in a test,
// while Redis stays unreachable for longer: far more than returning
// takes, less than the read timeouts a call must not wait for.
const callMargin = 2 * time.Second

// ReturnsBy runs call with a context that ends after timeout and returns
// its error, failing the test when call has not returned callMargin past
// that deadline (it then waits for call to return after release, which
// lets Redis answer again).
func ReturnsBy(t *testing.T, timeout time.Duration, release func(), call func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	watchdog := time.NewTimer(timeout + callMargin)
	defer watchdog.Stop()
	select {
	case err := <-done:
		return err
	case <-watchdog.C:
		release()
		err := <-done
		t.Errorf("the call was still waiting %v past its %v deadline; it returned %v once Redis answered again", callMargin, timeout, err)
		return err
	}
}
