//go:build !linux

package redistest

import "syscall"

// sysProcAttr has no parent-death signal outside Linux: a test binary that
// dies without running its cleanups leaves its servers running.
func sysProcAttr() *syscall.SysProcAttr { return nil }
