package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// infoText is the shape of INFO stats commandstats from redis-server 7.0.
const infoText = "# Stats\r\n" +
	"total_connections_received:5\r\n" +
	"total_commands_processed:1207\r\n" +
	"instantaneous_ops_per_sec:0\r\n" +
	"total_net_input_bytes:125000\r\n" +
	"total_net_output_bytes:5100\r\n" +
	"total_net_repl_input_bytes:0\r\n" +
	"\r\n" +
	"# Commandstats\r\n" +
	"cmdstat_get:calls=300,usec=140,usec_per_call=0.47,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_evalsha:calls=300,usec=1700,usec_per_call=5.67,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_eval:calls=1,usec=30,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_client|setinfo:calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_info:calls=4,usec=80,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n"

func TestParseInfo(t *testing.T) {
	s, err := parseInfo(infoText)
	if err != nil {
		t.Fatal(err)
	}
	if s.processed != 1207 || s.netIn != 125000 || s.netOut != 5100 {
		t.Errorf("processed %d, in %d, out %d; want 1207, 125000, 5100", s.processed, s.netIn, s.netOut)
	}
	want := map[string]cmdStat{
		"get": {300, 140}, "evalsha": {300, 1700}, "eval": {1, 30},
		"client|setinfo": {2, 3}, "info": {4, 80},
	}
	if len(s.cmds) != len(want) {
		t.Errorf("%d commands, want %d: %v", len(s.cmds), len(want), s.cmds)
	}
	for name, w := range want {
		if got := s.cmds[name]; got != w {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}
	if got, want := s.scriptStats(), (cmdStat{301, 1730}); got != want {
		t.Errorf("scriptStats = %+v, want %+v", got, want)
	}
	if got, want := s.innerStats(), (cmdStat{306, 223}); got != want {
		t.Errorf("innerStats = %+v, want %+v", got, want)
	}
	if got, want := s.commandNames(), []string{"eval", "evalsha", "client|setinfo", "get", "info"}; !slices.Equal(got, want) {
		t.Errorf("commandNames = %v, want %v", got, want)
	}
}

func TestParseInfoRejects(t *testing.T) {
	for name, text := range map[string]string{
		"no stats":         "# Commandstats\r\ncmdstat_get:calls=1,usec=2\r\n",
		"one field short":  strings.Replace(infoText, "total_net_output_bytes", "total_net_output", 1),
		"bad number":       strings.Replace(infoText, "total_net_input_bytes:125000", "total_net_input_bytes:12x", 1),
		"bad calls":        strings.Replace(infoText, "calls=300,usec=140", "calls=3z0,usec=140", 1),
		"no usec":          strings.Replace(infoText, "calls=300,usec=140,", "calls=300,", 1),
		"usec not numeric": strings.Replace(infoText, "usec=1700,", "usec=,", 1),
	} {
		if _, err := parseInfo(text); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDuringTakesOffTheSnapshotsOwnCall(t *testing.T) {
	before := snapshot{
		cmds:  map[string]cmdStat{"info": {10, 200}, "evalsha": {5, 50}, "ping": {1, 1}},
		netIn: 1000, netOut: 9000, processed: 20, cpu: 100 * time.Millisecond, cpuOK: true,
	}
	// one INFO call: 30 bytes in, 2000 out, one command
	mid := snapshot{
		cmds:  map[string]cmdStat{"info": {11, 220}, "evalsha": {5, 50}, "ping": {1, 1}},
		netIn: 1030, netOut: 11000, processed: 21, cpu: 100 * time.Millisecond, cpuOK: true,
	}
	// the run: 100 EVALSHA of 4 commands each, 10,000 bytes in, 400 out;
	// plus mid's INFO call
	after := snapshot{
		cmds:  map[string]cmdStat{"info": {12, 240}, "evalsha": {105, 650}, "get": {100, 40}, "ping": {1, 1}},
		netIn: 1030 + 10000 + 30, netOut: 11000 + 400 + 2000, processed: 21 + 400 + 1,
		cpu: 130 * time.Millisecond, cpuOK: true,
	}
	d := during(before, mid, after)
	if d.netIn != 10000 || d.netOut != 400 || d.processed != 400 || d.cpu != 30*time.Millisecond || !d.cpuOK {
		t.Errorf("in %d, out %d, processed %d, cpu %v (%v); want 10000, 400, 400, 30ms (true)", d.netIn, d.netOut, d.processed, d.cpu, d.cpuOK)
	}
	if _, ok := d.cmds["info"]; ok {
		t.Error("INFO counted in the run")
	}
	if _, ok := d.cmds["ping"]; ok {
		t.Error("PING, not called during the run, listed in it")
	}
	if got, want := d.cmds["evalsha"], (cmdStat{100, 600}); got != want {
		t.Errorf("evalsha %+v, want %+v", got, want)
	}
	if got, want := d.cmds["get"], (cmdStat{100, 40}); got != want {
		t.Errorf("get %+v, want %+v", got, want)
	}
	after.cpuOK = false
	if during(before, mid, after).cpuOK {
		t.Error("cpuOK with a CPU time that was not read")
	}
}
