package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/bench/internal/mdsection"
)

func TestParseScriptStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_ping:calls=3,usec=4,usec_per_call=1.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=1200,usec=9000,usec_per_call=7.50,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_eval:calls=1,usec=30,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval_ro:calls=50,usec=30,usec_per_call=0.60,rejected_calls=0,failed_calls=0\r\n"
	if n, d := parseScriptStats(info); n != 1201 || d != 9030*time.Microsecond {
		t.Errorf("parseScriptStats = %d, %v; want 1201, 9.03ms", n, d)
	}
}

func TestCheckProbes(t *testing.T) {
	limited := http.Header{}
	limited.Set("X-RateLimit-Limit", "1000000000")
	limited.Set("X-RateLimit-Remaining", "999999999")
	limited.Set("X-RateLimit-Reset", "1")
	limited.Set("RateLimit-Policy", `"default";q=1000000000;w=60`)
	limited.Set("RateLimit", `"default";r=999999999;t=1`)
	ex := probe{status: 200, header: limited, body: "hello from gin\n"}
	base := probe{status: 200, header: http.Header{}, body: "hello from gin\n"}
	if err := checkProbes(ex, base); err != nil {
		t.Fatal(err)
	}

	noHeaders := ex
	noHeaders.header = http.Header{}
	if err := checkProbes(noHeaders, base); err == nil || !strings.Contains(err.Error(), "no X-RateLimit-Limit") {
		t.Errorf("example without headers: err = %v", err)
	}
	denied := ex
	denied.status = 429
	if err := checkProbes(denied, base); err == nil {
		t.Error("a 429 passed")
	}
	other := base
	other.body = "something else\n"
	if err := checkProbes(ex, other); err == nil || !strings.Contains(err.Error(), "bodies differ") {
		t.Errorf("different bodies: err = %v", err)
	}
	wrongLimit := ex
	wrongLimit.header = limited.Clone()
	wrongLimit.header.Set("X-RateLimit-Limit", "10")
	if err := checkProbes(wrongLimit, base); err == nil {
		t.Error("a limit of 10 passed")
	}
}

func TestMarkdownIsOneSection(t *testing.T) {
	mk := func(ps float64, p50 time.Duration) run {
		return run{wrk: wrkResult{requests: int64(ps * 10), perSecond: ps, p50: p50, p99: 10 * p50}, scriptCalls: int64(ps * 10)}
	}
	hdr := http.Header{}
	hdr.Set("X-RateLimit-Limit", "1000000000")
	rep := &report{
		opts:    options{rounds: 3, duration: 10 * time.Second, minRatio: 0.9, algorithm: "gcra", wrk: wrkSettings{threads: 2, connections: 64, timeout: 5 * time.Second}},
		started: time.Now(), finished: time.Now(),
		results: []*frameworkResult{{
			fw:       "gin",
			example:  []run{mk(900, time.Millisecond), mk(800, time.Millisecond), mk(950, time.Millisecond)},
			baseline: []run{mk(1000, time.Millisecond), mk(1000, time.Millisecond), mk(1000, time.Millisecond)},
			probe:    probe{status: 200, header: hdr, body: "hello from gin\n"},
		}},
	}
	md := rep.markdown()
	sec, ok := mdsection.Find("# Title\n\n" + md + "\n## After\n")
	if !ok || sec != md {
		t.Fatalf("the report is not exactly one section:\n%s", md)
	}
	if !strings.Contains(md, "| gin | 900 | 1,000 | 0.90× (0.80–0.95) | yes |") {
		t.Errorf("summary row missing or wrong:\n%s", md)
	}
	s := rep.results[0].summary()
	if s.ratio != 0.9 || s.example.callsPerRequest != 1 {
		t.Errorf("summary = %+v", s)
	}
}
