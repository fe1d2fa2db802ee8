// Package embedded runs a Redis-compatible engine inside the process
// (miniredis), so that the store, its Lua scripts and all, runs with no
// Redis server to install.
//
// Where the engine differs from Redis, this package makes up for it:
//
//   - miniredis expires keys only when told how much time has passed: an
//     Engine moves every TTL on by the time elapsed every ExpiryTick, so a
//     key may expire up to one tick early. TIME is the wall clock.
//   - Its in-memory connections (Miniredis.Dial, a net.Pipe) have no
//     buffer: a client writing a pipeline while the server writes the
//     first replies blocks both. An Engine listens on a loopback port.
package embedded

import (
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// ExpiryTick is how often an Engine moves its keys' TTLs on. Each move
// visits every key, so a shorter tick costs more.
const ExpiryTick = 10 * time.Millisecond

// Engine is a Redis-compatible server in the process, on a loopback port.
type Engine struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	done chan struct{}
}

// Start starts an Engine. Close stops it.
func Start() (*Engine, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("embedded: start the engine: %w", err)
	}
	e := &Engine{m: m, stop: make(chan struct{}), done: make(chan struct{})}
	go e.expire()
	return e, nil
}

// Addr is the engine's address, host:port.
func (e *Engine) Addr() string { return e.m.Addr() }

// Close stops the engine; what it held is gone.
func (e *Engine) Close() {
	close(e.stop)
	<-e.done
	e.m.Close()
}

// expire moves the TTLs on by the time elapsed, every ExpiryTick.
func (e *Engine) expire() {
	defer close(e.done)
	tick := time.NewTicker(ExpiryTick)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-e.stop:
			return
		case now := <-tick.C:
			e.m.FastForward(now.Sub(last))
			last = now
		}
	}
}
