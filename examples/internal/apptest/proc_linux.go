//go:build linux

package apptest

import "syscall"

// sysProcAttr makes an app die with the test binary that started it, even
// when that binary dies without running its cleanups (a test timeout): an
// app left running would hold its port and its store's connections. Go
// ends no thread that forked a child here (see runtime.LockOSThread), so
// the signal comes only when the process ends.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
