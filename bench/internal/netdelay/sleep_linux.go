//go:build linux

package netdelay

import (
	"syscall"
	"time"
)

// preciseSleepUntil sleeps in the nanosleep system call until t, on a
// thread whose timer slack it first sets to 1 ns, so that the sleep ends on
// time rather than up to 50 µs late (Linux's default slack). The goroutine
// stays on that thread for the system call that follows.
func preciseSleepUntil(t time.Time) {
	const prSetTimerslack = 29
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0) // best effort: the default slack is only less precise
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
