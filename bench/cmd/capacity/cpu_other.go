//go:build !linux

package main

import "time"

// cpuTick is the resolution of procCPU, which has nothing to read here.
const cpuTick = 10 * time.Millisecond

// procCPU is not available here: the report leaves the process CPU
// columns empty and plans from nothing.
func procCPU(int) (time.Duration, bool) { return 0, false }

// cpuModel has nothing to read here.
func cpuModel() string { return "" }
