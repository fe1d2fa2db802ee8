package embedded_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/b6192125/machinist/internal/embedded"
)

// do sends one command in RESP and returns the first line of the reply.
func do(t *testing.T, conn net.Conn, r *bufio.Reader, args ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// Keys expire on their own, without a command moving the clock: the
// engine moves TTLs on as time passes.
func TestKeysExpireAsTimePasses(t *testing.T) {
	t.Parallel()
	e, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	conn, err := net.Dial("tcp", e.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	if got := do(t, conn, r, "GET", "k"); !strings.HasPrefix(got, "-NOAUTH") {
		t.Fatalf("GET before AUTH = %q, want a NOAUTH error: other processes must not use the engine", got)
	}
	if got := do(t, conn, r, "AUTH", e.Password()); got != "+OK" {
		t.Fatalf("AUTH = %q", got)
	}
	before := time.Now() // the key is set after this
	if got := do(t, conn, r, "SET", "k", "v", "PX", "50"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for do(t, conn, r, "EXISTS", "k") != ":0" {
		if time.Now().After(deadline) {
			t.Fatal("a key set with PX 50 still exists after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	if gone := time.Since(before); gone < 50*time.Millisecond-embedded.ExpiryMargin {
		t.Errorf("a key set with PX 50 was gone after %v, more than %v early", gone, embedded.ExpiryMargin)
	}
}

// With SetTime a test moves the engine's clock: TIME answers the time set,
// and a key expires when the clock passes its TTL, not before.
func TestSetTimeMovesTheClock(t *testing.T) {
	t.Parallel()
	e, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	conn, err := net.Dial("tcp", e.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	if got := do(t, conn, r, "AUTH", e.Password()); got != "+OK" {
		t.Fatalf("AUTH = %q", got)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	e.SetTime(at)
	if got := do(t, conn, r, "TIME"); got != "*2" {
		t.Fatalf("TIME = %q, want an array", got)
	}
	r.ReadString('\n') // $10
	secs, _ := r.ReadString('\n')
	r.ReadString('\n')
	r.ReadString('\n')
	if got := strings.TrimSpace(secs); got != fmt.Sprint(at.Unix()) {
		t.Errorf("TIME seconds = %s, want %d", got, at.Unix())
	}
	if got := do(t, conn, r, "SET", "k", "v", "PX", "1000"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	e.SetTime(at.Add(999 * time.Millisecond))
	if got := do(t, conn, r, "EXISTS", "k"); got != ":1" {
		t.Errorf("EXISTS 999 ms into a 1 s TTL = %s, want 1", got)
	}
	e.SetTime(at.Add(time.Second))
	if got := do(t, conn, r, "EXISTS", "k"); got != ":0" {
		t.Errorf("EXISTS once the 1 s TTL passed = %s, want 0", got)
	}
}
