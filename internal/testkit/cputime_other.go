//go:build !unix

package testkit

import "time"

// processCPU reports that this platform does not tell the process's CPU
// time.
func processCPU() (time.Duration, bool) { return 0, false }
