package rediscost

import (
	"context"
	"runtime"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/redisproc"
)

func TestParse(t *testing.T) {
	text := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=2,usec=30,usec_per_call=15.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_ping:calls=5,usec=1,usec_per_call=0.20,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=700,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n" +
		"\r\n# Stats\r\ntotal_connections_received:3\r\ntotal_net_input_bytes:1000\r\ntotal_net_output_bytes:2000\r\n"
	c, err := parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if c.Calls != 17 || c.OtherUsec != 1 || c.ScriptCalls != 12 || c.ScriptUsec != 80 || c.NetIn != 1000 || c.NetOut != 2000 {
		t.Errorf("parse = %+v", c)
	}
	if _, err := parse("# Stats\r\ntotal_net_input_bytes:1\r\n"); err == nil {
		t.Error("parsed stats without total_net_output_bytes")
	}
	if _, err := parse("cmdstat_get:calls=x,usec=1\r\ntotal_net_input_bytes:1\r\ntotal_net_output_bytes:1\r\n"); err == nil {
		t.Error("parsed calls=x")
	}
}

func TestPer(t *testing.T) {
	p := Counters{Calls: 10, OtherUsec: 40, ScriptUsec: 20, ScriptCalls: 5, NetIn: 300, NetOut: 100, CPU: 2000, CPUOK: true}.Per(10)
	if p.Calls != 1 || p.OtherUsec != 4 || p.ScriptUsec != 2 || p.ScriptCalls != 0.5 || p.Bytes != 40 || p.CPUUsec != 0.2 || !p.CPUOK {
		t.Errorf("Per = %+v", p)
	}
}

// Against a real server: a Delta counts the commands between two samples,
// and nothing of the samples' own INFO calls.
func TestSampleCountsOnlyTheWorkBetween(t *testing.T) {
	srv, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	for _, protocol := range []int{2, 3} {
		client := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: protocol})
		if err := client.Ping(ctx).Err(); err != nil { // connect first
			t.Fatal(err)
		}
		before, err := Sample(ctx, client, srv.Pid())
		if err != nil {
			t.Fatal(err)
		}
		idle, err := Sample(ctx, client, srv.Pid())
		if err != nil {
			t.Fatal(err)
		}
		if d := Delta(before, idle); d.Calls != 0 || d.NetIn != 0 || d.NetOut != 0 {
			t.Errorf("RESP%d: between two samples, nothing done: %+v", protocol, d)
		}
		for range 3 {
			if err := client.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		after, err := Sample(ctx, client, srv.Pid())
		if err != nil {
			t.Fatal(err)
		}
		d := Delta(idle, after)
		// each SET is "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n" (27 bytes) in
		// and "+OK\r\n" (5) out
		if d.Calls != 3 || d.ScriptCalls != 0 || d.ScriptUsec != 0 || d.NetIn != 3*27 || d.NetOut != 3*5 {
			t.Errorf("RESP%d: three SETs: %+v", protocol, d)
		}
		if err := client.Eval(ctx, "redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], 1000) return 1", []string{"n"}).Err(); err != nil {
			t.Fatal(err)
		}
		script, err := Sample(ctx, client, srv.Pid())
		if err != nil {
			t.Fatal(err)
		}
		// one script call, and the two commands it calls
		if d := Delta(after, script); d.ScriptCalls != 1 || d.Calls != 3 {
			t.Errorf("RESP%d: a script of two commands: %+v", protocol, d)
		}
		if d.CPUOK != (runtime.GOOS == "linux") {
			t.Errorf("RESP%d: CPUOK %v on %s", protocol, d.CPUOK, runtime.GOOS)
		}
		client.Close()
	}
}

func TestAddSumsDeltas(t *testing.T) {
	a := Counters{Calls: 1, ScriptCalls: 2, ScriptUsec: 3, OtherUsec: 4, NetIn: 5, NetOut: 6, CPU: 7, CPUOK: true}
	b := Counters{Calls: 10, ScriptCalls: 20, ScriptUsec: 30, OtherUsec: 40, NetIn: 50, NetOut: 60, CPU: 70, CPUOK: true}
	want := Counters{Calls: 11, ScriptCalls: 22, ScriptUsec: 33, OtherUsec: 44, NetIn: 55, NetOut: 66, CPU: 77, CPUOK: true}
	if got := a.Add(b); got != want {
		t.Errorf("Add = %+v, want %+v", got, want)
	}
	b.CPUOK = false
	if a.Add(b).CPUOK {
		t.Error("CPUOK with a delta whose CPU could not be read")
	}
}
