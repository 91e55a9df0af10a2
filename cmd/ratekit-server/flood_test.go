//go:build linux

package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/internal/redistest"
)

// The flood's size: the defaults keep the test to a few seconds; larger
// values measure (see docs/bounds.md).
var (
	floodRequests = flag.Int("flood.requests", 150, "TestStatsFlood: requests per front door")
	floodValue    = flag.Int("flood.value", 16<<10, "TestStatsFlood: bytes of each descriptor value")
	floodStatsd   = flag.Bool("flood.statsd", false, "TestStatsFlood: the statsd sink (to a closed port) instead of Prometheus")
)

const floodConfig = `domain: f
descriptors:
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 1000000}
  - key: d
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1000000}
  - key: m
    descriptors:
      - key: v
        value_to_metric: true
        rate_limit: {unit: minute, requests_per_unit: 1000000}
`

// TestStatsFlood floods a server, through /json and gRPC, with distinct
// large values in descriptors whose statistics name their values
// (detailed_metric, value_to_metric) and in descriptors that bring their
// own limit. The server's live heap after a GC and its /metrics scrape
// stay under bounds that do not grow with the number of requests.
func TestStatsFlood(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"f.yaml": floodConfig})
	env := map[string]string{"REDIS_URL": rs.Addr(), "USE_PROMETHEUS": "true"}
	if *floodStatsd {
		closed, err := proctest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		env = map[string]string{"REDIS_URL": rs.Addr(), "USE_STATSD": "true", "STATSD_HOST": "127.0.0.1",
			"STATSD_PORT": closed[strings.LastIndexByte(closed, ':')+1:], "STATS_FLUSH_INTERVAL": "200ms"}
	}
	p := start(t, dir, env)
	base := liveHeap(t, p)

	n, size := *floodRequests, *floodValue
	var mu sync.Mutex
	codes := map[string]int{}
	count := func(what string) {
		mu.Lock()
		codes[what]++
		mu.Unlock()
	}
	// each request: two detailed, two value_to_metric and two caller
	// limits, every value distinct
	request := func(i int) *rlspb.RateLimitRequest {
		val := func(j int) string {
			v := fmt.Sprintf("%d-%d-", i, j)
			return v + strings.Repeat("x", max(0, size-len(v)))
		}
		return &rlspb.RateLimitRequest{Domain: "f", Descriptors: []*rlv3.RateLimitDescriptor{
			descriptor("d", val(0)), descriptor("d", val(1)),
			descriptor("m", "1", "v", val(2)), descriptor("m", "1", "v", val(3)),
			{Entries: descriptor("o", val(4)).Entries, Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 2}},
			{Entries: descriptor("o", val(5)).Entries, Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 2}},
		}}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				_, err := p.Client.ShouldRateLimit(context.Background(), request(2*i))
				count(fmt.Sprintf("grpc %v", grpcCode(err)))
				body, _ := json.Marshal(jsonRequest(request(2*i + 1)))
				code, _, err := proctest.PostJSON(p.HTTP, string(body))
				if err != nil {
					count("json error")
					continue
				}
				count("json " + strconv.Itoa(code))
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if *floodStatsd {
		time.Sleep(time.Second) // a few flushes
	}
	heap := liveHeap(t, p)
	scrape := 0
	if !*floodStatsd {
		code, body, err := proctest.Get(p.Prom, "/metrics")
		scrape = len(body)
		if err != nil || code != 200 {
			t.Errorf("/metrics: %d %v", code, err)
			scrape = -1
		}
	}
	t.Logf("%d requests of 6 values of %d bytes per front door in %v (%v): live heap %d MiB (%d MiB idle), RSS %d MiB, scrape %d KiB",
		n, size, took.Round(time.Millisecond), codes, heap>>20, base>>20, rss(t, p.Pid())>>20, scrape>>10)
	// the statistics keep at most a few MiB whatever the traffic; the
	// server's own heap (gRPC buffers, the race detector's bookkeeping)
	// a few more
	if limit := base + 24<<20; heap > limit {
		t.Errorf("live heap %d MiB after the flood (%d MiB idle); want at most %d MiB", heap>>20, base>>20, limit>>20)
	}
	if scrape > 8<<20 {
		t.Errorf("/metrics is %d KiB; want at most 8 MiB", scrape>>10)
	}
	if code, body, _ := proctest.Get(p.HTTP, "/healthcheck"); code != 200 || body != "OK" {
		t.Fatalf("after the flood: %d %q", code, body)
	}
}

// jsonRequest is r as /json reads it.
func jsonRequest(r *rlspb.RateLimitRequest) map[string]any {
	var ds []map[string]any
	for _, d := range r.Descriptors {
		var es []map[string]string
		for _, e := range d.Entries {
			es = append(es, map[string]string{"key": e.Key, "value": e.Value})
		}
		m := map[string]any{"entries": es}
		if l := d.Limit; l != nil {
			m["limit"] = map[string]any{"requests_per_unit": l.RequestsPerUnit, "unit": l.Unit.String()}
		}
		ds = append(ds, m)
	}
	return map[string]any{"domain": r.Domain, "descriptors": ds}
}

func grpcCode(err error) string {
	if err == nil {
		return "OK"
	}
	return status.Code(err).String()
}

var heapAlloc = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)

// liveHeap is the server's heap in use right after a GC, as pprof's heap
// profile reports it (gc=1 collects first).
func liveHeap(t *testing.T, p *proctest.Proc) uint64 {
	t.Helper()
	var n uint64
	for range 2 { // the second reading sees what the first one's GC freed
		code, body, err := proctest.Get(p.Debug, "/debug/pprof/heap?gc=1&debug=1")
		if err != nil || code != 200 {
			t.Fatalf("heap profile: %d %v", code, err)
		}
		m := heapAlloc.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no HeapAlloc in the heap profile")
		}
		n, _ = strconv.ParseUint(m[1], 10, 64)
	}
	return n
}

// rss is the resident set of process pid, in bytes.
func rss(t *testing.T, pid int) uint64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kb, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			v, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(kb), " kB"), 10, 64)
			return v << 10
		}
	}
	return 0
}

var ruleLabel = regexp.MustCompile(`^ratekit_\w+\{.*\brule="([^"]*)"`)

// TestRuleLabels: with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, whose
// counting keys one counter per descriptor in one script, fifty clients'
// distinct values leave the rule label of every ratekit_* series one of
// the windows of the configured limits.
func TestRuleLabels(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"l.yaml": `domain: l
descriptors:
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: api
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: gcra}
`})
	p := start(t, dir, map[string]string{"REDIS_URL": rs.Addr(), "USE_PROMETHEUS": "true", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"})
	for i := range 50 {
		ip := fmt.Sprintf("203.0.113.%d", i)
		for range 3 { // the third goes over the limit of 2
			_, err := p.Client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "l", Descriptors: []*rlv3.RateLimitDescriptor{
				descriptor("ip", ip), descriptor("user", "u"+strconv.Itoa(i)), descriptor("api", ip),
			}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	code, body, err := proctest.Get(p.Prom, "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	seen := map[string]bool{}
	for line := range strings.Lines(body) {
		if m := ruleLabel.FindStringSubmatch(line); m != nil {
			seen[m[1]] = true
		}
	}
	got := slices.Sorted(func(yield func(string) bool) {
		for k := range seen {
			if !yield(k) {
				return
			}
		}
	})
	// the compatible limits are named by their window, ratekit's by their
	// place among the rule's limits
	if want := []string{"rk0", "rl3600s", "rl60s"}; !slices.Equal(got, want) {
		t.Fatalf("rule labels %.10q (%d of them); want %q", got, len(got), want)
	}
}

// TestRequestSize: a request past RATEKIT_MAX_REQUEST_BYTES (256 KiB by
// default) is refused by gRPC and /json; one under it is answered.
func TestRequestSize(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"f.yaml": floodConfig})
	p := start(t, dir, map[string]string{"REDIS_URL": rs.Addr()})
	for _, c := range []struct {
		size       int
		grpc, json string
	}{{200 << 10, "OK", "200"}, {300 << 10, "ResourceExhausted", "413"}} {
		r := &rlspb.RateLimitRequest{Domain: "f", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("d", strings.Repeat("x", c.size))}}
		_, err := p.Client.ShouldRateLimit(context.Background(), r)
		body, _ := json.Marshal(jsonRequest(r))
		code, _, jerr := proctest.PostJSON(p.HTTP, string(body))
		if got := grpcCode(err); got != c.grpc || jerr != nil || strconv.Itoa(code) != c.json {
			t.Errorf("a request of %d KiB: gRPC %s, /json %d %v; want %s and %s", c.size>>10, got, code, jerr, c.grpc, c.json)
		}
	}
}

var key1Label = regexp.MustCompile(`^ratelimit_service_rate_limit_\w+\{domain="f",key1="([^"]*)"`)

// TestOneClientFillsNothing: 40 requests of 256 descriptors, each with a
// limit of its own, keep at most stats.MaxCallerKeys statistics keys, and
// a configured rule hit afterwards still has its own series.
func TestOneClientFillsNothing(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"f.yaml": floodConfig})
	p := start(t, dir, map[string]string{"REDIS_URL": rs.Addr(), "USE_PROMETHEUS": "true"})
	for i := range 40 {
		r := &rlspb.RateLimitRequest{Domain: "f"}
		for j := range 256 {
			r.Descriptors = append(r.Descriptors, &rlv3.RateLimitDescriptor{
				Entries: descriptor("o", fmt.Sprintf("%d-%d", i, j)).Entries,
				Limit:   &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 2},
			})
		}
		if _, err := p.Client.ShouldRateLimit(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Client.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "f", Descriptors: []*rlv3.RateLimitDescriptor{descriptor("plain", "x")}}); err != nil {
		t.Fatal(err)
	}
	code, body, err := proctest.Get(p.Prom, "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	keys := map[string]bool{}
	for line := range strings.Lines(body) {
		if m := key1Label.FindStringSubmatch(line); m != nil {
			keys[m[1]] = true
		}
	}
	// the callers' budget (1,000), the overflow key, the configured rule
	if len(keys) > 1_002 || !keys["plain"] || !keys["_overflow_"] {
		t.Fatalf("%d statistics keys after 10,240 callers' limits (plain: %v, overflow: %v); want at most 1,002", len(keys), keys["plain"], keys["_overflow_"])
	}
}

// TestGRPCStreams: the gRPC port tells every client, in its HTTP/2
// settings, that it takes at most 1024 calls at once on a connection.
func TestGRPCStreams(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"f.yaml": floodConfig})
	p := start(t, dir, map[string]string{"REDIS_URL": rs.Addr()})
	c, err := net.DialTimeout("tcp", p.GRPC, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != 1024 {
		t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d (sent: %v); want 1024", v, ok)
	}
}
