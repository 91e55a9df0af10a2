// Package rediscost reads what a redis-server has spent: command calls and
// time (INFO commandstats), network bytes (INFO stats) and the process's
// CPU time (/proc/<pid>/stat). Take a Sample before and after some work;
// their Delta, over the decisions the work made, is the Redis cost of one
// decision.
//
//	before, err := rediscost.Sample(ctx, client, srv.Pid())
//	... n decisions ...
//	after, err := rediscost.Sample(ctx, client, srv.Pid())
//	per := rediscost.Delta(before, after).Per(n)
package rediscost

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/proccpu"
)

// Counters are a redis-server's running totals at one moment, or, from
// Delta, what it spent between two moments.
type Counters struct {
	// Calls counts every command but INFO (the sampling's own), those that
	// scripts call included: Redis counts a command a script calls as a
	// call of that command. ScriptCalls and ScriptUsec count EVALSHA and
	// EVAL alone; a script's time includes that of the commands it calls.
	// OtherUsec is the time of every other command but INFO: commands
	// sent by clients and commands called by scripts alike, which Redis
	// does not tell apart (so ScriptUsec + OtherUsec counts the commands
	// scripts call twice).
	Calls                   int64
	ScriptCalls, ScriptUsec int64
	OtherUsec               int64
	// NetIn and NetOut are total_net_input_bytes and
	// total_net_output_bytes, less (in a Delta) the bytes of the earlier
	// sample's own INFO call.
	NetIn, NetOut int64
	// CPU is the server's user and system time, in 10 ms ticks; CPUOK is
	// false when it could not be read (not Linux, or not our process).
	CPU   time.Duration
	CPUOK bool

	// ownIn and ownOut are the bytes of this sample's INFO request and
	// reply, which the next sample counts.
	ownIn, ownOut int64
}

// Sample reads c's counters through client, and the CPU time of process
// pid (the server's; 0 for none).
func Sample(ctx context.Context, client redis.Cmdable, pid int) (Counters, error) {
	text, err := client.Info(ctx, "commandstats", "stats").Result()
	if err != nil {
		return Counters{}, fmt.Errorf("rediscost: INFO: %w", err)
	}
	c, err := parse(text)
	if err != nil {
		return Counters{}, err
	}
	c.ownOut = replyBytes(len(text), protocolOf(client))
	if pid > 0 {
		c.CPU, c.CPUOK = proccpu.CPU(pid)
	}
	return c, nil
}

// infoRequest is the INFO call as it goes over the wire, in RESP.
const infoRequest = "*3\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n$5\r\nstats\r\n"

// protocolOf returns the RESP version client speaks: its option, or
// go-redis's default, 3.
func protocolOf(client redis.Cmdable) int {
	if o, ok := client.(interface{ Options() *redis.Options }); ok && o.Options().Protocol == 2 {
		return 2
	}
	return 3
}

// replyBytes is the size on the wire of INFO's reply of n bytes of text: a
// bulk string in RESP2 ("$", length, CRLF, text, CRLF), a verbatim string in
// RESP3 ("=", length, CRLF, "txt:", text, CRLF).
func replyBytes(n, protocol int) int64 {
	if protocol == 2 {
		return int64(1 + len(strconv.Itoa(n)) + 2 + n + 2)
	}
	return int64(1 + len(strconv.Itoa(n+4)) + 2 + 4 + n + 2)
}

// parse reads the counters from the text of INFO commandstats and stats.
func parse(text string) (Counters, error) {
	c := Counters{ownIn: int64(len(infoRequest))}
	var sawIn, sawOut bool
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var err error
		switch {
		case name == "total_net_input_bytes":
			c.NetIn, err = strconv.ParseInt(value, 10, 64)
			sawIn = true
		case name == "total_net_output_bytes":
			c.NetOut, err = strconv.ParseInt(value, 10, 64)
			sawOut = true
		case strings.HasPrefix(name, "cmdstat_"):
			err = c.addCommand(strings.TrimPrefix(name, "cmdstat_"), value)
		}
		if err != nil {
			return Counters{}, fmt.Errorf("rediscost: INFO line %q: %w", line, err)
		}
	}
	if !sawIn || !sawOut {
		return Counters{}, fmt.Errorf("rediscost: INFO has no total_net_input_bytes or total_net_output_bytes")
	}
	return c, nil
}

// addCommand adds one cmdstat line's value, "calls=3,usec=12,...", to c.
func (c *Counters) addCommand(cmd, value string) error {
	if cmd == "info" {
		return nil
	}
	var calls, usec int64
	for field := range strings.SplitSeq(value, ",") {
		k, v, _ := strings.Cut(field, "=")
		var err error
		switch k {
		case "calls":
			calls, err = strconv.ParseInt(v, 10, 64)
		case "usec":
			usec, err = strconv.ParseInt(v, 10, 64)
		}
		if err != nil {
			return err
		}
	}
	c.Calls += calls
	if cmd == "evalsha" || cmd == "eval" {
		c.ScriptCalls += calls
		c.ScriptUsec += usec
	} else {
		c.OtherUsec += usec
	}
	return nil
}

// Delta returns what the server spent from before to after. Its network
// bytes leave out before's own INFO call; CPUOK holds only if both samples
// read the CPU.
func Delta(before, after Counters) Counters {
	return Counters{
		Calls: after.Calls - before.Calls, OtherUsec: after.OtherUsec - before.OtherUsec,
		ScriptCalls: after.ScriptCalls - before.ScriptCalls, ScriptUsec: after.ScriptUsec - before.ScriptUsec,
		NetIn:  after.NetIn - before.NetIn - before.ownIn,
		NetOut: after.NetOut - before.NetOut - before.ownOut,
		CPU:    after.CPU - before.CPU, CPUOK: before.CPUOK && after.CPUOK,
	}
}

// Add returns the sum of two Deltas: what the server spent over both
// spans. CPUOK holds if it held for both.
func (d Counters) Add(e Counters) Counters {
	return Counters{
		Calls: d.Calls + e.Calls, OtherUsec: d.OtherUsec + e.OtherUsec,
		ScriptCalls: d.ScriptCalls + e.ScriptCalls, ScriptUsec: d.ScriptUsec + e.ScriptUsec,
		NetIn: d.NetIn + e.NetIn, NetOut: d.NetOut + e.NetOut,
		CPU: d.CPU + e.CPU, CPUOK: d.CPUOK && e.CPUOK,
	}
}

// PerDecision is a Delta spread over the decisions made in it.
type PerDecision struct {
	// ScriptUsec and OtherUsec are Redis's command time (INFO
	// commandstats) in scripts and in other commands, as in Counters, and
	// CPUUsec the server process's CPU time, in µs.
	ScriptUsec, OtherUsec, CPUUsec float64
	// Calls is commands (those scripts call included), ScriptCalls script
	// calls (EVALSHA, EVAL).
	Calls, ScriptCalls float64
	// Bytes is network bytes in and out together.
	Bytes float64
	// CPUOK is false when the CPU time could not be read.
	CPUOK bool
}

// Per returns d over n decisions (n must be at least 1).
func (d Counters) Per(n int64) PerDecision {
	f := float64(max(n, 1))
	return PerDecision{
		ScriptUsec: float64(d.ScriptUsec) / f, OtherUsec: float64(d.OtherUsec) / f, CPUUsec: float64(d.CPU.Microseconds()) / f,
		Calls: float64(d.Calls) / f, ScriptCalls: float64(d.ScriptCalls) / f,
		Bytes: float64(d.NetIn+d.NetOut) / f, CPUOK: d.CPUOK,
	}
}
