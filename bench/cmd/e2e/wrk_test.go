package main

import (
	"strings"
	"testing"
	"time"
)

// A report of wrk 4.1.0 with --latency, with every optional line.
const wrkFull = `Running 10s test @ http://127.0.0.1:41234/
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.85ms    4.02ms  94.79ms   91.65%
    Req/Sec     9.01k     1.04k   12.79k    71.43%
  Latency Distribution
     50%  789.00us
     75%    3.12ms
     90%    7.03ms
     99%   19.89ms
  179321 requests in 10.10s, 22.16MB read
  Socket errors: connect 0, read 2, write 1, timeout 3
  Non-2xx or 3xx responses: 12
Requests/sec:  17754.55
Transfer/sec:      2.19MB
`

// The same without errors: wrk then prints neither of their lines.
const wrkClean = `Running 1s test @ http://127.0.0.1:18777/
  2 threads and 8 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.23ms    5.44ms  94.79ms   95.65%
    Req/Sec    26.01k     7.04k   36.79k    71.43%
  Latency Distribution
     50%   96.00us
     75%  392.00us
     90%    2.03ms
     99%    1.02s
  54321 requests in 1.10s, 6.16MB read
Requests/sec:  49403.66
Transfer/sec:      5.61MB
`

func TestParseWrk(t *testing.T) {
	r, err := parseWrk(wrkFull)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{
		requests: 179321, elapsed: 10100 * time.Millisecond, perSecond: 17754.55,
		p50: 789 * time.Microsecond, p99: 19890 * time.Microsecond, non2xx: 12,
		readErrs: 2, writeErrs: 1, timeouts: 3,
	}
	if r != want {
		t.Errorf("parseWrk =\n%+v\nwant\n%+v", r, want)
	}
	if r.failures() != 18 {
		t.Errorf("failures = %d, want 18", r.failures())
	}

	r, err = parseWrk(wrkClean)
	if err != nil {
		t.Fatal(err)
	}
	want = wrkResult{requests: 54321, elapsed: 1100 * time.Millisecond, perSecond: 49403.66, p50: 96 * time.Microsecond, p99: 1020 * time.Millisecond}
	if r != want || r.failures() != 0 {
		t.Errorf("parseWrk =\n%+v\nwant\n%+v", r, want)
	}
}

func TestParseWrkRejectsIncompleteReports(t *testing.T) {
	// without --latency there is no distribution
	noLatency := strings.Replace(wrkClean, "     50%   96.00us\n", "", 1)
	if _, err := parseWrk(noLatency); err == nil || !strings.Contains(err.Error(), "p50") {
		t.Errorf("no p50: err = %v", err)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused\n"); err == nil {
		t.Error("parsed a report of a run that never started")
	}
	bad := strings.Replace(wrkFull, "timeout 3", "timeout x", 1)
	if _, err := parseWrk(bad); err == nil {
		t.Error("parsed a bad socket errors line")
	}
}

func TestParseWrkDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"96.00us": 96 * time.Microsecond, "3.12ms": 3120 * time.Microsecond,
		"1.50s": 1500 * time.Millisecond, "2.00m": 2 * time.Minute, "1.00h": time.Hour,
	} {
		got, err := parseWrkDuration(in)
		if err != nil || got != want {
			t.Errorf("parseWrkDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "12", "abcms", "-1ms"} {
		if _, err := parseWrkDuration(in); err == nil {
			t.Errorf("parseWrkDuration(%q) did not fail", in)
		}
	}
}

func TestWholeSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		10 * time.Second: "10s", 1500 * time.Millisecond: "2s", 0: "1s", time.Minute: "60s",
	} {
		if got := wholeSeconds(d); got != want {
			t.Errorf("wholeSeconds(%v) = %q, want %q", d, got, want)
		}
	}
}
