package redistest

import "syscall"

// sysProcAttr makes the kernel kill redis-server when the test binary dies
// without running its cleanups (a panic, a -timeout, a SIGKILL), so that no
// server outlives the tests that started it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
