//go:build !linux

package proccpu

import "time"

// CPU is not available here: ok is always false.
func CPU(int) (time.Duration, bool) { return 0, false }
