package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/bench/internal/figures"
	"github.com/ratekit/ratekit/bench/internal/redisproc"
	"github.com/ratekit/ratekit/bench/internal/serverproc"
)

// The measuring loop must not allocate, or it would count against every
// contender's allocations per decision.
func TestRunAllocatesNothingPerDecision(t *testing.T) {
	keys := &keySet{all: "abc", ends: []int32{1, 2, 3}}
	noop := func() decideFunc {
		return func(key string) (bool, error) { return key != "c", nil }
	}
	const n = 30_000
	lat := make([]time.Duration, n)
	r := run(noop, keys, 0, 1, n, lat, nil)
	if err := r.check(); err != nil {
		t.Fatal(err)
	}
	if r.allowed != 2*n/3 || r.denied != n/3 || r.errors != 0 {
		t.Errorf("allowed %d, denied %d, errors %d; want %d, %d, 0", r.allowed, r.denied, r.errors, 2*n/3, n/3)
	}
	if a := r.allocsPerDecision(); a > 0.01 {
		t.Errorf("%.3f allocations per decision by the runner itself", a)
	}
}

func TestRunCountsErrorsAndEveryCall(t *testing.T) {
	boom := errors.New("boom")
	r := run(func() decideFunc {
		return func(key string) (bool, error) {
			if key == "bad" {
				return false, boom
			}
			return true, nil
		}
	}, &keySet{all: "okbad", ends: []int32{2, 5}}, 1, 8, 1001, nil, nil)
	if err := r.check(); err != nil {
		t.Fatal(err)
	}
	if r.errors != 501 || r.allowed != 500 || !errors.Is(r.firstErr, boom) {
		t.Errorf("errors %d (first %v), allowed %d; want 501 (boom), 500", r.errors, r.firstErr, r.allowed)
	}
}

func TestQuantileAndMedian(t *testing.T) {
	s := make([]time.Duration, 100)
	for i := range s {
		s[i] = time.Duration(i + 1)
	}
	if q := quantile(s, 0.5); q != 50 {
		t.Errorf("p50 of 1..100 = %d, want 50", q)
	}
	if q := quantile(s, 0.99); q != 99 {
		t.Errorf("p99 of 1..100 = %d, want 99", q)
	}
	if m := figures.Median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median = %v, want 2", m)
	}
	if m := figures.Median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median = %v, want 2.5", m)
	}
}

func TestBuildKeysDistinct(t *testing.T) {
	for _, c := range contenders() {
		for _, kc := range keyCases {
			keys, err := buildKeys(c, kc.count)
			if err != nil {
				t.Fatal(err)
			}
			if keys.len() != kc.count {
				t.Fatalf("%s: %d keys, want %d", c.name, keys.len(), kc.count)
			}
			if kc.count > 1 && keys.key(1) != mustKey(t, c, "ip:10.0.0.1") {
				t.Fatalf("%s: key 1 is %q", c.name, keys.key(1))
			}
		}
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		r    exactResult
		want string
	}{
		{exactResult{attempts: 5000, allowed: 1000, bound: 1000, floor: 1000}, "exact"},
		{exactResult{attempts: 5000, allowed: 1010, bound: 1016, refill: 16}, "within refill"},
		{exactResult{attempts: 5000, allowed: 1050, bound: 1076, refill: 16}, "within lease bound (over the limit and refill by 34)"},
		{exactResult{attempts: 5000, allowed: 1080, bound: 1076, refill: 16}, "**over by 4**"},
		{exactResult{attempts: 5000, allowed: 1200, bound: 1000}, "**over by 200**"},
		{exactResult{attempts: 5000, allowed: 900, bound: 1000, floor: 1000}, "under by 100"},
		{exactResult{attempts: 5000, allowed: 990, bound: 1056, refill: 0, floor: 944}, "within lease bound (under the limit by 10: units leased and left unspent)"},
		{exactResult{attempts: 5000, allowed: 940, bound: 1056, refill: 0, floor: 944}, "under by 60"},
		{exactResult{attempts: 800, allowed: 800, bound: 1000}, "inconclusive: fewer attempts than the limit"},
	} {
		if got := tc.r.verdict(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
}

func mustKey(t *testing.T, c contender, id string) string {
	k, err := keyFor(c, id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Against a real redis-server: every contender, the Limiter and middleware
// paths among them, admits 3 of 5 calls under a limit of 3, and ratekit's
// rows write their state under the keys keyFor gives them.
func TestSelfCheckOfEveryContender(t *testing.T) {
	srv, err := redisproc.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(serverproc.Cleanup)
	// the rows that fail closed at their deadline get one a loaded
	// machine under the race detector does not reach: a self-check checks
	// answers, not speed
	defer func(d time.Duration) { limiterTimeout = d }(limiterTimeout)
	limiterTimeout = 5 * time.Second
	client := newClient(srv.Addr, 8)
	defer client.Close()
	err = selfCheck(context.Background(), client, contenders())
	if cerr := closeOpened(); cerr != nil {
		t.Error(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// The shared client is built as README.md's quick start builds it.
func TestClientAsTheQuickStart(t *testing.T) {
	c := newClient("127.0.0.1:1", 256)
	defer c.Close()
	o := c.Options()
	// go-redis keeps MaxRetries -1 as 0, no retry (its default is 3)
	if !o.ContextTimeoutEnabled || o.MaxRetries != 0 || o.PoolSize != 256 {
		t.Errorf("ContextTimeoutEnabled %v, MaxRetries %d, PoolSize %d; want true, 0 (from -1), 256", o.ContextTimeoutEnabled, o.MaxRetries, o.PoolSize)
	}
}

func TestIdentityOf(t *testing.T) {
	for _, c := range contenders() {
		if c.kind != kindRatekit || c.key != nil {
			continue
		}
		if id := identityOf(mustKey(t, c, "ip:10.0.0.1")); id != "ip:10.0.0.1" {
			t.Errorf("%s: identity %q", c.name, id)
		}
	}
	// ratekit-server's keys hold the descriptor's value, the address
	if v := serverValue(mustKey(t, mustFind(t, serverName), "ip:10.0.0.1")); v != "10.0.0.1" {
		t.Errorf("%s: descriptor value %q", serverName, v)
	}
}

func mustFind(t *testing.T, name string) contender {
	c, err := find(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNetworkContenders(t *testing.T) {
	cs, err := networkContenders(contenders(), false)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		if c.name != networkNames[i] {
			t.Errorf("network contender %d is %q, want %q", i, c.name, networkNames[i])
		}
	}
	if len(cs) != len(networkNames) {
		t.Errorf("%d network contenders, want %d", len(cs), len(networkNames))
	}
	if _, err := networkContenders(contenders()[:3], false); err == nil {
		t.Error("no error for a missing contender")
	}
}

// fakeResults returns results of one round on every case, where contender
// i made perSecond[i] decisions/s, except on one hot key at 64 goroutines,
// where it made hot64[i].
func fakeResults(names []string, perSecond, hot64 []float64) *benchResults {
	res := &benchResults{cases: cases()}
	for _, n := range names {
		res.contenders = append(res.contenders, contender{name: n})
	}
	for _, bc := range res.cases {
		var row []*cell
		for i := range names {
			ps := perSecond[i]
			if bc.keys.count == 1 && bc.g == 64 {
				ps = hot64[i]
			}
			row = append(row, &cell{runs: []runResult{{n: 1, perSecond: ps}}})
		}
		res.cells = append(res.cells, row)
	}
	return res
}

func TestBarsMarkWhatMisses(t *testing.T) {
	names := []string{gcraName, redisRateName, clockName, middlewareName, bareName}
	// GCRA beats redis_rate everywhere, misses the clock floor (0.9×) on
	// the hot key at 64; the middleware is 20× the bare script there and
	// 2× elsewhere, where its bar does not hold
	res := fakeResults(names, []float64{100, 90, 100, 200, 100}, []float64{90, 80, 100, 2000, 100})
	got := misses(res)
	want := []string{gcraName + " ÷ " + clockName + ", hot g=64: 0.90×"}
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("misses = %q, want %q", got, want)
	}
	var out strings.Builder
	writeBars(func(f string, a ...any) { fmt.Fprintf(&out, f+"\n", a...) }, res)
	if n := strings.Count(out.String(), " miss**"); n != 1 {
		t.Errorf("%d cells marked, want 1:\n%s", n, out.String())
	}
	if strings.Contains(out.String(), ululeName) {
		t.Errorf("a bar of a contender not in the results:\n%s", out.String())
	}
}

// The ceiling held to as many commands in flight as its case has
// goroutines is reported beside the ceiling, with GCRA's share of each.
func TestCeilingText(t *testing.T) {
	res := fakeResults([]string{gcraName, bareName}, []float64{100_000, 40_000}, []float64{100_000, 40_000})
	res.ceilings = []ceilingRun{{pipelined: 160_000, crowd: 125_000, single: 18_000}}
	k := res.ceilingCase()
	if k < 0 || res.cases[k].g != crowdConnections*ceilingDepth {
		t.Fatalf("the ceiling's case (%d) is not at %d goroutines", k, crowdConnections*ceilingDepth)
	}
	if m, ok := res.ceilingRatio(); !ok || m != 0.625 {
		t.Errorf("ceiling ratio %v, %v; want 0.625", m, ok)
	}
	text := ceilingText(res)
	for _, want := range []string{"160,000/s pipelined 16 deep", "18,000/s one command", "1,024 commands in flight", "held to as many (16 connections 16 deep), redis-benchmark made 125,000/s", gcraName + " on 100,000 keys at 256 goroutines 0.80× of that"} {
		if !strings.Contains(text, want) {
			t.Errorf("ceiling text lacks %q:\n%s", want, text)
		}
	}
}
