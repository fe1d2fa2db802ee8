package redistest

import (
	"syscall"
	"testing"
)

// Pause stops the server process with SIGSTOP, as a frozen VM, a swap
// storm or a long fork would: connections stay open, the kernel still
// accepts new ones, and nothing is answered until Resume. The test fails if
// the server is not running.
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGSTOP)
	// A stopped process would hold SIGTERM at cleanup until it is killed.
	tb.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.proc != nil {
			_ = s.proc.cmd.Process.Signal(syscall.SIGCONT)
		}
	})
}

// Resume continues a server stopped by Pause (SIGCONT); it answers what
// was sent to it meanwhile, in order.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGCONT)
}

func (s *Server) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		tb.Fatalf("redistest: %v %s: %v", sig, s.Addr(), errNotRunning)
	}
	if err := s.proc.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("redistest: %v %s: %v", sig, s.Addr(), err)
	}
}
