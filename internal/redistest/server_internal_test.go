package redistest

import (
	"errors"
	"os/exec"
	"testing"
)

// A server whose port is taken, here by another redis-server that answers
// PING, must fail with errAddrInUse (so that Start retries on another
// port) rather than pass the other server off as its own.
func TestLaunchOnTakenPortFailsWithAddrInUse(t *testing.T) {
	t.Parallel()
	other := Start(t)
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		dir := t.TempDir()
		s := &Server{bin: bin, port: other.port, dir: dir, args: serverArgs(config{}, other.port, dir)}
		s.mu.Lock()
		err := s.launch()
		s.mu.Unlock()
		if err == nil {
			_ = s.close()
			t.Fatalf("launch on the taken port %d succeeded", other.port)
		}
		if !errors.Is(err, errAddrInUse) {
			t.Fatalf("launch on the taken port %d: %v, want errAddrInUse", other.port, err)
		}
	}
}

func TestGlobEscape(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"t1-0a1b2c3d:", "t1-0a1b2c3d:"},
		{`a*b?c[d]e\f`, `a\*b\?c\[d\]e\\f`},
	}
	for _, tt := range tests {
		if got := globEscape(tt.in); got != tt.want {
			t.Errorf("globEscape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
