package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
)

func TestPlanMasters(t *testing.T) {
	for _, c := range []struct {
		rate, us, headroom float64
		cores              float64
		masters            int
	}{
		{1_000_000, 12.3, 0.5, 12.3, 25},  // 24.6 rounds up
		{1_000_000, 5, 0.5, 5, 10},        // exactly 10: not 11
		{100_000, 4.4, 0.7, 0.44, 1},      // under one core
		{10_000_000, 3.6, 0.5, 36, 72},    //
		{10_000_000, 16.2, 0.7, 162, 232}, // 231.43 rounds up
	} {
		m, ok := planMasters(c.rate, c.us, c.headroom)
		if !ok || math.Abs(m.cores-c.cores) > 1e-9 || m.masters != c.masters {
			t.Errorf("planMasters(%g, %g, %g) = %.4f cores, %d masters (%v); want %g, %d", c.rate, c.us, c.headroom, m.cores, m.masters, ok, c.cores, c.masters)
		}
	}
	if _, ok := planMasters(1e6, 0, 0.5); ok {
		t.Error("planned from no CPU figure")
	}
}

func TestHotKeyAndLeaseCaps(t *testing.T) {
	if c, ok := perSecond(12.5); !ok || c != 80_000 {
		t.Errorf("perSecond(12.5) = %v, %v; want 80000", c, ok)
	}
	if _, ok := perSecond(0); ok {
		t.Error("a cap from no CPU")
	}
	// 12.5 µs a lease call, one call per 1024 decisions
	c, ok := leasedCap(12.5, 1.0/1024)
	if !ok || math.Abs(c.usPerDecision-12.5/1024) > 1e-12 || math.Abs(c.cap-81_920_000) > 1e-3 {
		t.Errorf("leasedCap = %+v, %v; want 0.0122 µs, 81,920,000/s", c, ok)
	}
	if _, ok := leasedCap(12.5, 0); ok {
		t.Error("a leased cap from a run without a lease call")
	}
	if got := overshoot(1024, 100); got != 102_300 {
		t.Errorf("overshoot(1024, 100) = %d, want 102300", got)
	}
	if got := overshoot(1, 100); got != 0 {
		t.Errorf("overshoot(1, 100) = %d, want 0", got)
	}
}

func TestSig3(t *testing.T) {
	for x, want := range map[float64]string{89_575_635: "89,600,000", 87_336: "87,300", 571_428.6: "571,000", 999.6: "1,000", 12.34: "12", 0: "0"} {
		if got := sig3(x); got != want {
			t.Errorf("sig3(%v) = %q, want %q", x, got, want)
		}
	}
}

func TestMbits(t *testing.T) {
	// 100 bytes a decision at 1M/s is 800 Mbit/s
	if got := mbits(100, 1e6); got != 800 {
		t.Errorf("mbits(100, 1e6) = %v, want 800", got)
	}
}

func TestRowStat(t *testing.T) {
	r := row{samples: []sample{
		{load: loadResult{decisions: 100}, server: snapshot{cpu: 3 * time.Millisecond, cpuOK: true}},
		{load: loadResult{decisions: 100}, server: snapshot{cpu: 1 * time.Millisecond, cpuOK: true}},
		{load: loadResult{decisions: 200}, server: snapshot{cpu: 4 * time.Millisecond, cpuOK: true}},
	}}
	if got, want := r.stat(sample.cpuUS), (stat{med: 20, lo: 10, hi: 30}); got != want {
		t.Errorf("stat = %+v, want %+v", got, want)
	}
	if !r.cpuOK() {
		t.Error("cpuOK false")
	}
	r.samples[1].server.cpuOK = false
	if r.cpuOK() {
		t.Error("cpuOK with a sample that read no CPU")
	}
}

// fakeRows returns a row per case with one sample each, where a decision
// costs 10 µs of CPU, 100 bytes in and 20 out, and one script call (1.25
// for GCRA unbatched on the hot key, one in 1000 when leasing on it).
func fakeRows() []row {
	var rows []row
	for _, c := range cases(1000) {
		const n = 100_000
		calls := int64(n)
		if c == (runCase{core.GCRA, unbatched, keyCase{"hot", 1}}) {
			calls = n * 5 / 4 // as if a quarter of the calls had fallen back to EVAL
		}
		size := 0
		if c.mode == leasing {
			size = 1024
			if c.keys.count == 1 {
				calls = n / 1000
			}
		}
		rows = append(rows, row{c: c, samples: []sample{{
			load: loadResult{decisions: n, allowed: n, elapsed: time.Second},
			server: snapshot{
				cmds:  map[string]cmdStat{"evalsha": {calls, 5 * calls}, "get": {calls, calls}},
				netIn: 100 * n, netOut: 20 * n, processed: 2 * calls, cpu: time.Second, cpuOK: true,
			},
			leaseSize: size,
		}}})
	}
	return rows
}

func TestReportShowsEverySectionAndItsArithmetic(t *testing.T) {
	o := defaultOptions()
	o.cmdline = "go run ./cmd/capacity"
	rep := &report{opts: o, started: time.Now(), finished: time.Now(), redisVersion: "7.0.15", rows: fakeRows()}
	var b bytes.Buffer
	if err := rep.write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	checkSections(t, out)
	for _, want := range []string{
		"| R1 | gcra | unbatched | 1k | 100,000 | 10.00 | 5.00 | 1.0000 | 2.00 | 100.0 | 20.0 | 0.0% |",
		// 1M × 10 µs = 10 cores at 50%: 20 masters, from R1
		"| gcra | unbatched | R1 | 100,000/s × 10.00 µs = 1.00 cores ÷ 0.5 = **2** | 1,000,000/s × 10.00 µs = 10.00 cores ÷ 0.5 = **20** | 10,000,000/s × 10.00 µs = 100.00 cores ÷ 0.5 = **200** |",
		"| gcra | unbatched | R2 | 1 ÷ 10.00 µs = **100,000/s** |",
		"0.00100 script calls per decision",
		// 10 µs ÷ 1.25 calls = 8 µs a call; × 0.001 calls = 0.008 µs → 125M/s
		"lifted cap: 8.00 µs per call (R2: 10.00 µs ÷ 1.2500 calls per decision) × 0.00100 calls per decision (R6)",
		"= 0.0080 µs per decision → 1 ÷ 0.0080 µs = **125,000,000 decisions/s**",
		"(1024 − 1) × 100 = 102,300 units",
		// 100 bytes × 1M × 8 = 800 Mbit/s, 8 per replica
		"| gcra | unbatched | R1 | 100.0 + 20.0 | 800, 160 Mbit/s (8.00, 1.60) | 8,000, 1,600 Mbit/s (80.0, 16.0) |",
		"EVALSHA 1.0000 × 5.00 µs",
		// the two paths beside the stores, in every table
		"| R19 | gcra | outbound Reserve | 1k | 100,000 | 10.00 | 5.00 | 1.0000 | 2.00 | 100.0 | 20.0 | 0.0% |",
		"| R21 | compatible | ratekit-server gRPC | 1k | 100,000 | 10.00 | 5.00 | 1.0000 | 2.00 | 100.0 | 20.0 | 0.0% |",
		"| compatible | ratekit-server gRPC | R21 | 100,000/s × 10.00 µs = 1.00 cores ÷ 0.5 = **2** |",
		"| gcra | outbound Reserve | R20 | 1 ÷ 10.00 µs = **100,000/s** |",
		"| compatible | ratekit-server gRPC | R21 | 100.0 + 20.0 |",
		"The ratekit-server gRPC rows (R21, R22)",
		"The outbound Reserve rows (R19, R20)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

// checkSections fails t unless out has every section, in order.
func checkSections(t *testing.T, out string) {
	t.Helper()
	at := 0
	for _, s := range sections {
		i := strings.Index(out[at:], "\n"+s+"\n")
		if i < 0 {
			t.Errorf("no section %q after offset %d", s, at)
			continue
		}
		at += i + 1
	}
}

func TestQuickOptions(t *testing.T) {
	o := defaultOptions()
	o.quick = true
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if o.rounds != 1 || o.goroutines != 8 || o.decisions != 64 {
		t.Errorf("quick: %d rounds, %d goroutines, %d decisions", o.rounds, o.goroutines, o.decisions)
	}
	bad := defaultOptions()
	bad.headroom = 1.5
	if bad.check() == nil {
		t.Error("a headroom of 1.5 passed")
	}
	if limitFor(core.SlidingWindowLog).Rate != core.MaxLogRate || limitFor(core.GCRA).Rate != benchRate {
		t.Error("limits are not the benchmark's")
	}
}

// A leased hot key's CPU time below the clock tick is said to be so, not
// planned from.
func TestReportLeasedCPUBelowTheTick(t *testing.T) {
	rows := fakeRows()
	hot := -1
	for i, r := range rows {
		if r.c == (runCase{core.GCRA, leasing, keyCase{"hot", 1}}) {
			hot = i
		}
	}
	rows[hot].samples[0].server.cpu = 0
	rep := &report{opts: defaultOptions(), rows: rows}
	var b bytes.Buffer
	if err := rep.write(&b); err != nil {
		t.Fatal(err)
	}
	if want := "stayed within one clock tick\n  of 10ms, under 0.1000 µs per decision"; !strings.Contains(b.String(), want) {
		t.Errorf("report lacks %q", want)
	}
	if strings.Contains(b.String(), "- measured directly: 0.") {
		t.Error("report plans from a CPU time of zero")
	}
}

// Each case decides on keys of its own kind: storage keys for a store,
// identities for the outbound Limiter, addresses for the server.
func TestKeysOfEveryCase(t *testing.T) {
	for _, c := range cases(1000) {
		keys := keysFor(c)
		seen := map[string]bool{}
		for _, k := range keys {
			seen[k] = true
		}
		if len(keys) != c.keys.count || len(seen) != c.keys.count {
			t.Errorf("%s: %d keys, %d distinct; want %d", c, len(keys), len(seen), c.keys.count)
		}
		var want string
		switch c.mode {
		case reservation:
			want = "ip:10.0.0.1"
		case server:
			want = "10.0.0.1"
		default:
			want = "cap-" + c.alg.String() + ":api:{ip:10.0.0.1}"
		}
		if c.keys.count > 1 && keys[1] != want {
			t.Errorf("%s: key 1 is %q, want %q", c, keys[1], want)
		}
	}
}
