//go:build !linux

package netdelay

import "time"

// preciseSleepUntil sleeps on the runtime's timers, which may wake up to a
// millisecond late.
func preciseSleepUntil(t time.Time) { time.Sleep(time.Until(t)) }
