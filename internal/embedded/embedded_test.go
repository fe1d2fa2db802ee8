package embedded_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/embedded"
	"github.com/b6192125/machinist/internal/waitfor"
)

// conn is a client's connection to an engine, speaking RESP.
type conn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

// start starts an engine and connects to it, both closed when the test
// ends. The connection has not authenticated.
func start(t *testing.T) (*embedded.Engine, *conn) {
	t.Helper()
	e, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	c, err := net.Dial("tcp", e.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return e, &conn{t: t, c: c, r: bufio.NewReader(c)}
}

// do sends one command and returns the first line of the reply.
func (c *conn) do(args ...string) string {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.c.Write([]byte(b.String())); err != nil {
		c.t.Fatal(err)
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// Keys expire on their own, without a command moving the clock: the
// engine moves TTLs on as time passes.
func TestKeysExpireAsTimePasses(t *testing.T) {
	t.Parallel()
	e, c := start(t)
	if got := c.do("GET", "k"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("GET before AUTH = %q, want a NOAUTH error: other processes must not use the engine", got)
	}
	if got := c.do("AUTH", e.Password()); got != "+OK" {
		t.Fatalf("AUTH = %q", got)
	}
	before := time.Now() // the key is set after this
	if got := c.do("SET", "k", "v", "PX", "50"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	waitfor.True(t, 10*time.Second, "a key set with PX 50 to expire", func() bool { return c.do("EXISTS", "k") == ":0" })
	if gone := time.Since(before); gone < 50*time.Millisecond-embedded.ExpiryTick {
		t.Errorf("a key set with PX 50 was gone after %v, more than %v early", gone, embedded.ExpiryTick)
	}
}

// With SetTime a test moves the engine's clock: TIME answers the time set,
// and a key expires when the clock passes its TTL, not before.
func TestSetTimeMovesTheClock(t *testing.T) {
	t.Parallel()
	e, c := start(t)
	if got := c.do("AUTH", e.Password()); got != "+OK" {
		t.Fatalf("AUTH = %q", got)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	e.SetTime(at)
	if got := c.do("TIME"); got != "*2" {
		t.Fatalf("TIME = %q, want an array", got)
	}
	c.r.ReadString('\n') // the length of the seconds
	secs, _ := c.r.ReadString('\n')
	c.r.ReadString('\n')
	c.r.ReadString('\n')
	if got := strings.TrimSpace(secs); got != fmt.Sprint(at.Unix()) {
		t.Errorf("TIME seconds = %s, want %d", got, at.Unix())
	}
	if got := c.do("SET", "k", "v", "PX", "1000"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	e.SetTime(at.Add(999 * time.Millisecond))
	if got := c.do("EXISTS", "k"); got != ":1" {
		t.Errorf("EXISTS 999 ms into a 1 s TTL = %s, want 1", got)
	}
	e.SetTime(at.Add(time.Second))
	if got := c.do("EXISTS", "k"); got != ":0" {
		t.Errorf("EXISTS once the 1 s TTL passed = %s, want 0", got)
	}
}
