package redistest

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy between clients and a Redis server, for injecting
// network faults while traffic flows:
//
//   - LoseNextReply: a command reaches Redis but its reply never comes back
//     (a reply lost, or late past the client's read timeout);
//   - HoldCommandTo: a command is held on its way to Redis until released
//     (a request late in the network, or waiting in the buffer of a
//     server that hangs, while the client times out and sends it again);
//   - SetDelay: every chunk of traffic, each way, waits before it is passed
//     on (a slow link);
//   - Stall: nothing passes either way until Unstall (a partition: TCP
//     keeps the connections open and retransmits, so what was held arrives
//     afterwards, in order, on the connections still open);
//   - CutAll: every open connection is closed at once (a reset).
//
// Start one with StartProxy; it stops when the test ends. Its methods may
// be called from any goroutine.
type Proxy struct {
	ln     net.Listener
	target string

	loseMu   sync.Mutex // guards the orders: lose, loseText, hold
	lose     bool       // set by LoseNextReply and LoseReplyTo
	loseText [][]byte   // the texts the command must contain; none: any
	hold     *Hold      // set by HoldCommandTo, until a command matches

	mu      sync.Mutex
	conns   map[*proxyConn]struct{}
	delay   time.Duration
	stalled chan struct{} // closed by Unstall; nil when not stalled
	closed  chan struct{} // closed when the proxy stops
	wg      sync.WaitGroup
}

// proxyConn is one client connection and its connection to Redis.
type proxyConn struct {
	client, server net.Conn
	dropReplies    atomic.Bool
	released       atomic.Pointer[Hold] // a hold let through, until Redis replies
}

// Hold is a command HoldCommandTo holds back.
type Hold struct {
	texts       [][]byte
	held        chan struct{}
	release     chan struct{}
	replied     chan struct{}
	releaseOnce sync.Once
}

// Held is closed once a command is held.
func (h *Hold) Held() <-chan struct{} { return h.held }

// Release lets the held command, and whatever its connection sent after
// it, through to Redis, in order; if none is held yet, the command is let
// through when it comes. Calling it again does nothing.
func (h *Hold) Release() { h.releaseOnce.Do(func() { close(h.release) }) }

// Replied is closed once Redis has answered the held command (the first
// bytes Redis sends on its connection after the release; the client sent
// nothing else there still unanswered when it is a go-redis connection),
// whether or not the client still waits for the reply.
func (h *Hold) Replied() <-chan struct{} { return h.replied }

// StartProxy starts a proxy to the Redis server at addr ("host:port") on a
// free loopback port.
func StartProxy(tb testing.TB, addr string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: addr, conns: map[*proxyConn]struct{}{}, closed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// Addr is the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is a redis:// URL of the proxy.
func (p *Proxy) URL() string { return "redis://" + p.Addr() }

// LoseNextReply makes the next command a client sends go through to Redis
// and its reply, and every later one on that connection, go missing, as
// when Redis hangs past the client's read timeout or the network drops
// the reply.
func (p *Proxy) LoseNextReply() { p.LoseReplyTo() }

// LoseReplyTo is LoseNextReply for the next command that contains every
// one of texts (case-insensitive, e.g. "evalsha" and a task's id): the
// commands before it pass, and so do their replies. A text that names the
// command's own task or keys keeps a maintainer's script, which may run at
// any moment, from taking the loss.
func (p *Proxy) LoseReplyTo(texts ...string) {
	p.loseMu.Lock()
	defer p.loseMu.Unlock()
	p.lose, p.loseText = true, nil
	for _, text := range texts {
		if text != "" {
			p.loseText = append(p.loseText, bytes.ToLower([]byte(text)))
		}
	}
}

// HoldCommandTo holds back the next command that contains every one of
// texts (case-insensitive, as LoseReplyTo's), and whatever its connection
// sends after it, until the returned Hold's Release; other connections
// pass. A client that times out meanwhile and closes the connection does
// not take the command back: what it sent still reaches Redis, and runs,
// once released, as over a real network.
func (p *Proxy) HoldCommandTo(texts ...string) *Hold {
	h := &Hold{held: make(chan struct{}), release: make(chan struct{}), replied: make(chan struct{})}
	for _, text := range texts {
		if text != "" {
			h.texts = append(h.texts, bytes.ToLower([]byte(text)))
		}
	}
	p.loseMu.Lock()
	defer p.loseMu.Unlock()
	p.hold = h
	return h
}

// containsAll reports whether b contains every one of texts (lower case),
// ignoring case.
func containsAll(b []byte, texts [][]byte) bool {
	lower := bytes.ToLower(b)
	for _, text := range texts {
		if !bytes.Contains(lower, text) {
			return false
		}
	}
	return true
}

// loses reports whether the chunk b, just sent by a client, is the one
// whose reply is to be lost, and if so clears the order.
func (p *Proxy) loses(b []byte) bool {
	p.loseMu.Lock()
	defer p.loseMu.Unlock()
	if !p.lose || !containsAll(b, p.loseText) {
		return false
	}
	p.lose = false
	return true
}

// holds returns the Hold the chunk b, just sent by a client, is to be
// held by, if any, and clears the order.
func (p *Proxy) holds(b []byte) *Hold {
	p.loseMu.Lock()
	defer p.loseMu.Unlock()
	h := p.hold
	if h == nil || !containsAll(b, h.texts) {
		return nil
	}
	p.hold = nil
	return h
}

// SetDelay makes every chunk of traffic, each way, wait d before it is
// passed on; 0 passes it at once.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.delay = d
}

// Stall holds all traffic, each way and on new connections too, until
// Unstall.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == nil {
		p.stalled = make(chan struct{})
	}
}

// Unstall lets held traffic through, in order.
func (p *Proxy) Unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != nil {
		close(p.stalled)
		p.stalled = nil
	}
}

// CutAll closes every connection open now, both ways; new connections are
// accepted as before.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.client.Close()
		_ = c.server.Close()
	}
}

// pass waits as the proxy's faults say before a chunk is passed on. It
// returns false if the proxy stopped meanwhile.
func (p *Proxy) pass() bool {
	for {
		p.mu.Lock()
		stalled, delay := p.stalled, p.delay
		p.mu.Unlock()
		if stalled == nil {
			if delay > 0 {
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-p.closed:
					t.Stop()
					return false
				}
			}
			return true
		}
		select {
		case <-stalled:
		case <-p.closed:
			return false
		}
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.copyCommands(c)
			// Only the way to Redis closes: what the client sent before it
			// closed still runs, and Redis's reply is read (copyReplies),
			// until Redis closes its end.
			closeWrite(server)
		}()
		go func() {
			defer p.wg.Done()
			p.copyReplies(c)
			_ = client.Close()
			_ = server.Close()
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
		}()
	}
}

// closeWrite closes the sending side of conn, or, where it has none of
// its own, conn.
func closeWrite(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = conn.Close()
}

// copyCommands copies what the client sends to Redis; the first bytes
// after LoseNextReply make the connection drop its replies, and those
// HoldCommandTo names wait for their Release.
func (p *Proxy) copyCommands(c *proxyConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if h := p.holds(buf[:n]); h != nil {
				close(h.held)
				select {
				case <-h.release:
				case <-p.closed:
					return
				}
				c.released.Store(h)
			}
			if p.loses(buf[:n]) {
				c.dropReplies.Store(true)
			}
			if _, werr := c.server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// copyReplies copies what Redis sends to the client, or drops it once
// dropReplies is set.
func (p *Proxy) copyReplies(c *proxyConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			if h := c.released.Swap(nil); h != nil {
				close(h.replied)
			}
			if !p.pass() {
				return
			}
			if !c.dropReplies.Load() {
				if _, werr := c.client.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	close(p.closed)
	_ = p.ln.Close()
	p.CutAll()
	p.wg.Wait()
}
