//go:build linux

package netdelay

import (
	"syscall"
	"time"
)

// preciseSleepUntil sleeps in the nanosleep system call: the Go runtime's
// timers wake a sleeper that has nothing else to do up to a millisecond
// late, more than the latency to add.
func preciseSleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		if err := syscall.Nanosleep(&ts, nil); err == nil {
			return
		}
		// EINTR: a signal cut the sleep short; sleep the rest
	}
}
