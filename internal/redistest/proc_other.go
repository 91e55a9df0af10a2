//go:build !linux

package redistest

import (
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// waitStopped gives the signal a moment to take effect where the process
// state cannot be observed cheaply.
func waitStopped(pid int, timeout time.Duration) error {
	time.Sleep(10 * time.Millisecond)
	return nil
}
