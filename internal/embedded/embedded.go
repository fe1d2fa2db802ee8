// Package embedded runs a Redis-compatible engine inside the process
// (miniredis), so that the store, its Lua scripts and all, runs with no
// Redis server to install.
//
// Where the engine differs from Redis, this package makes up for it:
//
//   - miniredis expires keys only when told how much time has passed: an
//     Engine moves every TTL on by the time elapsed every ExpiryTick, and
//     before a client's command whenever a tick is due, so that a key
//     expires within ExpiryTick of its time however late the ticker runs.
//     TIME is the wall clock until a test sets the clock (SetTime); from
//     then on TIME and the TTLs follow that clock alone, and together.
//   - Its in-memory connections (Miniredis.Dial, a net.Pipe) have no
//     buffer: a client writing a pipeline while the server writes the
//     first replies blocks both. An Engine listens on a loopback port,
//     with a random password so that other processes of the machine cannot
//     use it.
//
// One difference is left, which a test that sets the clock sees: a key is
// gone in the millisecond its TTL ends, where Redis keeps it through that
// millisecond. The scripts' own deadlines (a task's lease, an archive's
// age limit) end as the engine's keys do; a periodic claim's lease runs
// through its last millisecond on both.
package embedded

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// ExpiryTick is how often an Engine moves its keys' TTLs on, and so how
// early or late a key may expire until SetTime. Each move visits every
// key, so a shorter tick costs more. A move counts the time since the
// last one, including the part of it before a key was set; a move is made
// before any client's command once a tick is due, so the command that set
// a key came less than a tick after the last move, and one that reads it
// sees the TTLs less than a tick behind.
const ExpiryTick = 10 * time.Millisecond

// Engine is a Redis-compatible server in the process, on a loopback port.
type Engine struct {
	m        *miniredis.Miniredis
	password string
	stop     chan struct{}
	done     chan struct{}

	mu     sync.Mutex
	frozen bool      // SetTime was called: the wall clock no longer moves it
	last   time.Time // the last move of the TTLs, until frozen

	peersMu sync.Mutex
	peers   map[*server.Peer]bool // the clients' connections
}

// Start starts an Engine. Close stops it.
func Start() (*Engine, error) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	password := hex.EncodeToString(b[:])
	m := miniredis.NewMiniRedis()
	m.RequireAuth(password)
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("embedded: start the engine: %w", err)
	}
	e := &Engine{m: m, password: password, stop: make(chan struct{}), done: make(chan struct{}),
		last: time.Now(), peers: map[*server.Peer]bool{}}
	m.Server().SetPreHook(e.beforeCommand)
	go e.expire()
	return e, nil
}

// beforeCommand moves the TTLs on before a client's command, if a tick is
// due. Commands a script runs come through here too, while the script
// holds the engine; they are told apart and left alone.
func (e *Engine) beforeCommand(c *server.Peer, cmd string, args ...string) bool {
	if e.client(c) {
		e.catchUp()
	}
	return false // the command runs
}

// client reports whether c is a client's connection rather than the peer
// miniredis makes for a script's redis.call, which comes with its context
// set; a client's connection has none before its first command.
func (e *Engine) client(c *server.Peer) bool {
	e.peersMu.Lock()
	defer e.peersMu.Unlock()
	if e.peers[c] {
		return true
	}
	if c.Ctx != nil {
		return false
	}
	e.peers[c] = true
	c.OnDisconnect(func() {
		e.peersMu.Lock()
		delete(e.peers, c)
		e.peersMu.Unlock()
	})
	return true
}

// catchUp moves the TTLs on by the time since the last move, if that is a
// tick or more, until SetTime.
func (e *Engine) catchUp() {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if d := now.Sub(e.last); !e.frozen && d >= ExpiryTick {
		e.m.FastForward(d)
		e.last = now
	}
}

// Addr is the engine's address, host:port.
func (e *Engine) Addr() string { return e.m.Addr() }

// Password is the password a client gives (AUTH) before any command.
func (e *Engine) Password() string { return e.password }

// Close stops the engine; what it held is gone.
func (e *Engine) Close() {
	close(e.stop)
	<-e.done
	e.m.Close()
}

// SetTime sets the engine's clock to at, for tests that control time:
// TIME answers at, and the keys' TTLs move on by the time from the
// engine's last time to at (at the first call, from the wall clock's
// now). From then on the wall clock moves nothing. The engine moves the
// TTLs before the next command, with TIME, so that no command, nor any
// script, sees one moved and not the other. Keys set before the first
// call may still be up to ExpiryTick off; a test that times a key sets it
// after.
func (e *Engine) SetTime(at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.frozen {
		e.frozen = true
		e.m.ClockTTL(true) // counted from the wall clock's now
	}
	e.m.SetTime(at)
}

// expire moves the TTLs on by the time elapsed, every ExpiryTick, until
// SetTime.
func (e *Engine) expire() {
	defer close(e.done)
	tick := time.NewTicker(ExpiryTick)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			e.catchUp()
		}
	}
}

var shared = struct {
	sync.Mutex
	engines map[string]*sharedEngine
}{engines: map[string]*sharedEngine{}}

type sharedEngine struct {
	e    *Engine
	refs int
}

// Acquire returns the process's engine named name, starting it if none
// runs, and the function that releases this reference to it: the engine
// stops with the last. Each call with the empty name starts an engine of
// its own.
func Acquire(name string) (*Engine, func(), error) {
	if name == "" {
		e, err := Start()
		if err != nil {
			return nil, nil, err
		}
		return e, e.Close, nil
	}
	shared.Lock()
	defer shared.Unlock()
	s, ok := shared.engines[name]
	if !ok {
		e, err := Start()
		if err != nil {
			return nil, nil, err
		}
		s = &sharedEngine{e: e}
		shared.engines[name] = s
	}
	s.refs++
	var once sync.Once
	release := func() {
		once.Do(func() {
			shared.Lock()
			s.refs--
			last := s.refs == 0
			if last {
				delete(shared.engines, name)
			}
			shared.Unlock()
			if last {
				s.e.Close()
			}
		})
	}
	return s.e, release, nil
}
