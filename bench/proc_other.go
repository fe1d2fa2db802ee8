//go:build !linux

package main

import (
	"os/exec"
	"syscall"
)

// setChildAttrs puts a child in its own process group, so that a Ctrl-C at
// the terminal reaches only this program, which then stops its children.
func setChildAttrs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
