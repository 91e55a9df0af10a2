//go:build linux

package redisproc

import "syscall"

// SysProcAttr has the kernel kill a child process (redis-server, an app
// under test) if this program dies before stopping it.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
