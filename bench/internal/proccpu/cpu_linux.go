//go:build linux

package proccpu

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// CPU returns the CPU time (user and system) process pid has used, from
// /proc/<pid>/stat; ok is false when it cannot be read.
func CPU(pid int) (cpu time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStat(string(b))
}

// parseProcStat reads utime and stime (fields 14 and 15, in clock ticks of
// 1/100 s) from the text of /proc/<pid>/stat. The command name, field 2,
// is in parentheses and may hold spaces, so fields are counted after its
// closing parenthesis.
func parseProcStat(stat string) (time.Duration, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is f[11], stime f[12]
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(u+s) * tick, true
}
