package proccpu

import (
	"os"
	"strings"
	"time"
)

// Tick is the resolution of [CPU]: Linux counts CPU time in clock ticks of
// 1/100 s (USER_HZ).
const Tick = 10 * time.Millisecond

// Model returns the model name of the first CPU in /proc/cpuinfo, or ""
// where there is none to read.
func Model() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
