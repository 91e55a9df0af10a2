package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cmdStat is one command's line of INFO commandstats.
type cmdStat struct {
	calls int64
	usec  int64 // time spent executing it, in µs
}

// snapshot is what Redis and the kernel say about the server at one
// moment; the difference of two is what happened in between.
type snapshot struct {
	cmds      map[string]cmdStat // by command name, from INFO commandstats
	netIn     int64              // total_net_input_bytes
	netOut    int64              // total_net_output_bytes
	processed int64              // total_commands_processed
	cpu       time.Duration      // the server process's utime+stime
	cpuOK     bool               // cpu was read
}

// scriptCommands are the commands that run a script. Redis 7 also counts
// each command a script calls (TIME, GET, SET...) in INFO commandstats and
// in total_commands_processed, and includes its time in the calling
// script's usec: the script commands' usec is the whole execution time,
// and summing every command would count the inner ones twice.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

func isScriptCommand(name string) bool { return slices.Contains(scriptCommands, name) }

// parseInfo reads the output of INFO stats commandstats: every cmdstat_
// line, and the stats fields of a snapshot. It fails when one of those
// fields is missing or a line it reads is malformed.
func parseInfo(text string) (snapshot, error) {
	s := snapshot{cmds: map[string]cmdStat{}}
	fields := map[string]*int64{
		"total_net_input_bytes":    &s.netIn,
		"total_net_output_bytes":   &s.netOut,
		"total_commands_processed": &s.processed,
	}
	seen := 0
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if cmd, isCmd := strings.CutPrefix(name, "cmdstat_"); isCmd {
			st, err := parseCmdStat(value)
			if err != nil {
				return snapshot{}, fmt.Errorf("INFO commandstats: %s: %w", name, err)
			}
			s.cmds[cmd] = st
			continue
		}
		if p := fields[name]; p != nil {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return snapshot{}, fmt.Errorf("INFO stats: %s: %w", name, err)
			}
			*p = n
			seen++
		}
	}
	if seen != len(fields) {
		return snapshot{}, fmt.Errorf("INFO stats: %d of the %d fields total_net_input_bytes, total_net_output_bytes and total_commands_processed", seen, len(fields))
	}
	return s, nil
}

// parseCmdStat reads calls and usec from the value of a cmdstat_ line,
// "calls=3,usec=4,usec_per_call=1.33,rejected_calls=0,failed_calls=0".
func parseCmdStat(value string) (cmdStat, error) {
	var st cmdStat
	var haveCalls, haveUsec bool
	for kv := range strings.SplitSeq(value, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var p *int64
		switch k {
		case "calls":
			p, haveCalls = &st.calls, true
		case "usec":
			p, haveUsec = &st.usec, true
		default:
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return cmdStat{}, fmt.Errorf("%s: %w", k, err)
		}
		*p = n
	}
	if !haveCalls || !haveUsec {
		return cmdStat{}, fmt.Errorf("no calls or usec in %q", value)
	}
	return st, nil
}

// sub returns s minus earlier: what happened between the two. Commands
// with no call in between are left out.
func (s snapshot) sub(earlier snapshot) snapshot {
	d := snapshot{
		cmds:      map[string]cmdStat{},
		netIn:     s.netIn - earlier.netIn,
		netOut:    s.netOut - earlier.netOut,
		processed: s.processed - earlier.processed,
		cpu:       s.cpu - earlier.cpu,
		cpuOK:     s.cpuOK && earlier.cpuOK,
	}
	for name, st := range s.cmds {
		e := earlier.cmds[name]
		if st.calls > e.calls {
			d.cmds[name] = cmdStat{calls: st.calls - e.calls, usec: st.usec - e.usec}
		}
	}
	return d
}

// during returns what a run cost the server, from three snapshots: before
// and mid taken back to back just before the run, after just after it.
// The snapshots' own INFO call (what mid minus before shows) is taken off
// the bytes and commands that after minus mid shows, and INFO itself is
// left out of the commands. CPU time is not corrected: one INFO call costs
// far less than the clock tick it is read in.
func during(before, mid, after snapshot) snapshot {
	own := mid.sub(before)
	d := after.sub(mid)
	d.netIn -= own.netIn
	d.netOut -= own.netOut
	d.processed -= own.processed
	delete(d.cmds, "info")
	return d
}

// scriptStats returns the calls and usec of the script commands in s.
func (s snapshot) scriptStats() cmdStat {
	var t cmdStat
	for name, st := range s.cmds {
		if isScriptCommand(name) {
			t.calls += st.calls
			t.usec += st.usec
		}
	}
	return t
}

// innerStats returns the calls and usec of every command that is not a
// script command: under this load, the commands the scripts call.
func (s snapshot) innerStats() cmdStat {
	var t cmdStat
	for name, st := range s.cmds {
		if !isScriptCommand(name) {
			t.calls += st.calls
			t.usec += st.usec
		}
	}
	return t
}

// commandNames returns the names in s, script commands first, each group
// sorted.
func (s snapshot) commandNames() []string {
	names := slices.Sorted(maps.Keys(s.cmds))
	slices.SortStableFunc(names, func(a, b string) int {
		switch sa, sb := isScriptCommand(a), isScriptCommand(b); {
		case sa && !sb:
			return -1
		case sb && !sa:
			return 1
		}
		return 0
	})
	return names
}
