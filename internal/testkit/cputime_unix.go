//go:build unix

package testkit

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time, user and system, that this process has
// used so far, over all its threads (its children's not included), and
// whether the platform tells it.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
