package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/bench/internal/mdsection"
)

func TestCheckProbes(t *testing.T) {
	limited := http.Header{}
	limited.Set("X-RateLimit-Limit", "60000000")
	limited.Set("X-RateLimit-Remaining", "59999999")
	limited.Set("X-RateLimit-Reset", "1")
	limited.Set("RateLimit-Policy", `"default";q=60000000;w=60`)
	limited.Set("RateLimit", `"default";r=59999999;t=1`)
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
	mk := func(ps float64, p50 time.Duration, calls float64, decisions int64) run {
		n := int64(ps * 10)
		if decisions >= 0 {
			decisions = n
		}
		return run{wrk: wrkResult{requests: n, perSecond: ps, p50: p50, p99: 10 * p50}, scriptCalls: int64(float64(n) * calls), decisions: decisions}
	}
	ms := time.Millisecond
	hdr := http.Header{}
	hdr.Set("X-RateLimit-Limit", "60000000")
	rep := &report{
		opts:    options{rounds: 3, duration: 10 * time.Second, minRatio: 0.9, algorithm: "gcra", wrk: wrkSettings{threads: 2, connections: 64, timeout: 5 * time.Second}},
		started: time.Now(), finished: time.Now(),
		results: []*frameworkResult{{
			fw:       "gin",
			example:  []run{mk(900, ms, 1, 0), mk(800, ms, 1, 0), mk(950, ms, 1, 0)},
			batched:  []run{mk(1200, ms, 0.1, 0), mk(1100, ms, 0.1, 0), mk(1300, ms, 0.1, 0)},
			baseline: []run{mk(1000, ms, 1, -1), mk(1000, ms, 1, -1), mk(1000, ms, 1, -1)},
			probe:    probe{status: 200, header: hdr, body: "hello from gin\n"},
		}},
	}
	md := rep.markdown()
	sec, ok := mdsection.Find("# Title\n\n" + md + "\n## After\n")
	if !ok || sec != md {
		t.Fatalf("the report is not exactly one section:\n%s", md)
	}
	for _, want := range []string{
		"| gin | as shipped | 1,200 | 1,000 | 1.20× (1.10–1.30) | 1.00ms / 10.0ms | 1.00ms / 10.0ms | yes |",
		"| gin | -batch=false | 900 | 1,000 | 0.90× (0.80–0.95) | 1.00ms / 10.0ms | 1.00ms / 10.0ms | – |",
		"| gin | 2 | as shipped | 1,100 | 1.00ms | 10.0ms | 11,000 | 1.000 | 0.100 |",
		"| gin | 3 | baseline | 1,000 | 1.00ms | 10.0ms | 10,000 | – | 1.000 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("row %q missing:\n%s", want, md)
		}
	}
	s := rep.results[0].summary()
	if s.exampleVs.ratio != 0.9 || s.batchedVs.ratio != 1.2 || s.example.callsPerRequest != 1 {
		t.Errorf("summary = %+v", s)
	}
	if !meetsBar(s, 1.0) || meetsBar(s, 1.25) {
		t.Errorf("meetsBar at 1.2× with an equal p99: want true at 1.0, false at 1.25")
	}
	s.batched.p99 = s.baseline.p99 + time.Microsecond
	if meetsBar(s, 1.0) {
		t.Errorf("meetsBar with a worse p99: want false")
	}
}

func TestParseDecisions(t *testing.T) {
	text := `# HELP ratekit_decisions_total Decisions.
# TYPE ratekit_decisions_total counter
ratekit_decisions_total{degraded="false",outcome="allowed",rule="default"} 1200
ratekit_decisions_total{degraded="false",outcome="denied",rule="default"} 3
ratekit_decisions_total{degraded="true",outcome="allowed",rule="default"} 1
# HELP go_goroutines Goroutines.
# TYPE go_goroutines gauge
go_goroutines 12
`
	if n, err := parseDecisions(text); err != nil || n != 1204 {
		t.Errorf("parseDecisions = %d, %v; want 1204", n, err)
	}
	if _, err := parseDecisions("# TYPE go_goroutines gauge\ngo_goroutines 12\n"); err == nil {
		t.Error("no ratekit_decisions_total: no error")
	}
}

func TestCheckRun(t *testing.T) {
	mk := func(requests, calls, decisions int64) run {
		return run{wrk: wrkResult{requests: requests}, scriptCalls: calls, decisions: decisions}
	}
	ex := &app{name: "example gin", example: true}
	batched := &app{name: "example gin -batch", example: true, batched: true}
	base := &app{name: "baseline gin"}
	for _, c := range []struct {
		a    *app
		r    run
		fail string
	}{
		{ex, mk(1000, 1001, 1001), ""},
		{ex, mk(1000, 1000, 500), "decisions"},
		{ex, mk(1000, 500, 1000), "script calls"},
		{batched, mk(1000, 90, 1002), ""},
		{batched, mk(1000, 90, 2000), "decisions"},
		{batched, mk(1000, 1100, 1000), "script calls"},
		{base, mk(1000, 1000, -1), ""},
		{base, mk(1000, 2000, -1), "script calls"},
	} {
		err := checkRun(c.a, c.r)
		if c.fail == "" && err != nil || c.fail != "" && (err == nil || !strings.Contains(err.Error(), c.fail)) {
			t.Errorf("%s %+v: err = %v, want one about %q", c.a.name, c.r, err, c.fail)
		}
	}
}
