//go:build linux

package main

import "syscall"

// sysProcAttr has the kernel kill redis-server if this program dies before
// stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
