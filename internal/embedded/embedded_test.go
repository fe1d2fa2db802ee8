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
	if gone := time.Since(before); gone < 50*time.Millisecond-embedded.ExpiryTick {
		t.Errorf("a key set with PX 50 was gone after %v, more than a tick early", gone)
	}
}
