package redistest

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy between clients and a Redis server, for injecting
// network faults: a reply lost (the command still reaches Redis, as when
// a reply is lost or arrives after the client's read timeout). Start one with
// StartProxy; it stops when the test ends.
type Proxy struct {
	ln     net.Listener
	target string

	loseNext atomic.Bool // set by LoseNextReply

	mu    sync.Mutex
	conns map[*proxyConn]struct{}
	wg    sync.WaitGroup
}

// proxyConn is one client connection and its connection to Redis.
type proxyConn struct {
	client, server net.Conn
	mu             sync.Mutex
	dropReplies    bool
}

// StartProxy starts a proxy to the Redis server at addr ("host:port") on a
// free loopback port.
func StartProxy(tb testing.TB, addr string) *Proxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: addr, conns: map[*proxyConn]struct{}{}}
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
func (p *Proxy) LoseNextReply() { p.loseNext.Store(true) }

// cutAll closes every connection open now, both ways.
func (p *Proxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.client.Close()
		_ = c.server.Close()
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
			_ = server.Close()
		}()
		go func() {
			defer p.wg.Done()
			c.copyReplies()
			_ = client.Close()
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
		}()
	}
}

// copyCommands copies what the client sends to Redis; the first bytes
// after LoseNextReply make the connection drop its replies.
func (p *Proxy) copyCommands(c *proxyConn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			if p.loseNext.CompareAndSwap(true, false) {
				c.mu.Lock()
				c.dropReplies = true
				c.mu.Unlock()
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
func (c *proxyConn) copyReplies() {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 {
			c.mu.Lock()
			drop := c.dropReplies
			c.mu.Unlock()
			if !drop {
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
	_ = p.ln.Close()
	p.cutAll()
	p.wg.Wait()
}
