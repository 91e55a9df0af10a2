package envoytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/internal/redistest"
)

var bins Binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "envoytest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, err = Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pair is envoy's server and ratekit's, each on its own redis-server, on
// the same settings and files.
type pair struct {
	envoy, ratekit           *proctest.Proc
	envoyRedis, ratekitRedis *redistest.Server
	dir                      string
}

func startPair(t *testing.T, files map[string]string, env map[string]string) *pair {
	t.Helper()
	redistest.Require(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, files)
	p := &pair{dir: dir}
	for _, side := range []struct {
		name  string
		bin   string
		dst   **proctest.Proc
		redis **redistest.Server
	}{{"envoy", bins.Envoy, &p.envoy, &p.envoyRedis}, {"ratekit", bins.Ratekit, &p.ratekit, &p.ratekitRedis}} {
		rs := redistest.StartServer(t)
		*side.redis = rs
		e := proctest.RuntimeEnv(dir)
		// answers, not outages, are compared: a deadline a loaded machine
		// meets (past the default 50 ms the local fallback would answer)
		e["RATEKIT_TIMEOUT"] = "5s"
		e["REDIS_URL"] = rs.Addr()
		for k, v := range env {
			e[k] = v
		}
		proc, err := proctest.Start(side.name, side.bin, e)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proc.Stop)
		*side.dst = proc
	}
	return p
}

// entry, desc and req build requests compactly.
func entry(k, v string) *rlv3.RateLimitDescriptor_Entry {
	return &rlv3.RateLimitDescriptor_Entry{Key: k, Value: v}
}

func desc(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, entry(kv[i], kv[i+1]))
	}
	return d
}

func hits(d *rlv3.RateLimitDescriptor, n uint64) *rlv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func own(d *rlv3.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit) *rlv3.RateLimitDescriptor {
	d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	return d
}

func req(domain string, ds ...*rlv3.RateLimitDescriptor) *rlspb.RateLimitRequest {
	return &rlspb.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// awaitWindow waits until the current minute has room for a sequence of
// within, so that no minute window ends during it.
func awaitWindow(within time.Duration) {
	now := time.Now()
	left := now.Truncate(time.Minute).Add(time.Minute).Sub(now)
	if left < within+time.Second {
		time.Sleep(left + 200*time.Millisecond)
	}
}

// awaitSecond waits until just after the next whole second.
func awaitSecond() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond).Sub(now))
}

// compare sends r to both servers, envoy first, and fails unless the
// answers are the same field by field. Durations until reset may differ
// by the seconds that passed between the two calls, no more.
func (p *pair) compare(t *testing.T, step string, r *rlspb.RateLimitRequest) *rlspb.RateLimitResponse {
	t.Helper()
	x := p.exchange(r)
	return x.check(t, step)
}

// exchanged is one request's answers from both servers, and the seconds
// that passed between the first call and the last answer.
type exchanged struct {
	er, rr     *rlspb.RateLimitResponse
	eerr, rerr error
	slack      int64
}

func (p *pair) exchange(r *rlspb.RateLimitRequest) exchanged {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t0 := time.Now()
	er, eerr := p.envoy.Client.ShouldRateLimit(ctx, r)
	rr, rerr := p.ratekit.Client.ShouldRateLimit(ctx, r)
	return exchanged{er, rr, eerr, rerr, time.Now().Unix() - t0.Unix()}
}

func (x exchanged) check(t *testing.T, step string) *rlspb.RateLimitResponse {
	t.Helper()
	er, rr, eerr, rerr, slack := x.er, x.rr, x.eerr, x.rerr, x.slack
	if (eerr == nil) != (rerr == nil) {
		t.Fatalf("%s: envoy: %v %v\nratekit: %v %v", step, prototext.Format(er), eerr, prototext.Format(rr), rerr)
	}
	if eerr != nil {
		// envoy answers Unknown; ratekit InvalidArgument, same message
		if a, b := status.Convert(eerr).Message(), status.Convert(rerr).Message(); a != b {
			t.Fatalf("%s: errors differ: envoy %q, ratekit %q", step, a, b)
		}
		return nil
	}
	if d := diff(er, rr, slack); d != "" {
		t.Fatalf("%s: answers differ: %s\nenvoy:   %s\nratekit: %s", step, d, prototext.Format(er), prototext.Format(rr))
	}
	return rr
}

// diff reports how b differs from a, durations until reset and reset
// headers allowed to differ by up to slack seconds.
func diff(a, b *rlspb.RateLimitResponse, slack int64) string {
	a, b = proto.Clone(a).(*rlspb.RateLimitResponse), proto.Clone(b).(*rlspb.RateLimitResponse)
	if len(a.Statuses) == len(b.Statuses) {
		for i := range a.Statuses {
			da, db := a.Statuses[i].GetDurationUntilReset(), b.Statuses[i].GetDurationUntilReset()
			if da != nil && db != nil && abs(da.Seconds-db.Seconds) <= slack {
				db.Seconds = da.Seconds
			}
		}
	}
	if len(a.ResponseHeadersToAdd) == len(b.ResponseHeadersToAdd) {
		for i := range a.ResponseHeadersToAdd {
			ha, hb := a.ResponseHeadersToAdd[i], b.ResponseHeadersToAdd[i]
			var x, y int64
			if _, err := fmt.Sscan(ha.Value, &x); err == nil && ha.Key == hb.Key {
				if _, err := fmt.Sscan(hb.Value, &y); err == nil && abs(x-y) <= slack && strings.Contains(strings.ToLower(ha.Key), "reset") {
					hb.Value = ha.Value
				}
			}
		}
	}
	if proto.Equal(a, b) {
		return ""
	}
	return "not equal"
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

const mainConfig = `
domain: shop
descriptors:
  # a value
  - key: path
    value: /checkout
    rate_limit: {unit: minute, requests_per_unit: 3, name: checkout}
  # any value, each counted apart
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 5}
  # a wildcard
  - key: file
    value: "img/*"
    rate_limit: {unit: hour, requests_per_unit: 2}
  # a wildcard shared by every value it matches
  - key: bucket
    value: "logs-*"
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  # nested: a limit only where the entries end
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 4}
    descriptors:
      - key: plan
        value: free
        rate_limit: {unit: minute, requests_per_unit: 2}
      - key: plan
        value: gold
        rate_limit: {unlimited: true}
      - key: plan
        value: vip
        rate_limit:
          unit: minute
          requests_per_unit: 10
          replaces: [{name: perip}]
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 2, name: perip}
  # shadow and quota modes
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  # whitelisted: no rate_limit, no children
  - key: health
  - key: zero
    rate_limit: {unit: day, requests_per_unit: 0}
  - key: weekly
    rate_limit: {unit: week, requests_per_unit: 3}
  - key: second
    rate_limit: {unit: second, requests_per_unit: 2}
`

// TestCompareAnswers sends both servers the same sequences, over gRPC,
// covering every semantic of envoy's service, and compares every answer.
func TestCompareAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"defaults", nil},
		{"headers", map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_REMAINING_HEADER": "X-Left"}},
		{"global-shadow", map[string]string{"SHADOW_MODE": "true", "LIMIT_RESPONSE_HEADERS_ENABLED": "true"}},
		{"global-quota", map[string]string{"QUOTA_MODE": "true", "RESPONSE_DYNAMIC_METADATA": "true"}},
		{"metadata", map[string]string{"RESPONSE_DYNAMIC_METADATA": "true"}},
		{"stop-increment", map[string]string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"}},
		{"prefix", map[string]string{"CACHE_KEY_PREFIX": "rl_"}},
		{"local-cache", map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "1048576"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPair(t, map[string]string{"shop.yaml": mainConfig}, tc.env)
			awaitWindow(20 * time.Second)
			n := 0
			step := func(r *rlspb.RateLimitRequest) {
				t.Helper()
				n++
				p.compare(t, fmt.Sprintf("step %d", n), r)
			}
			for range 5 {
				step(req("shop", desc("path", "/checkout")))
				step(req("shop", desc("path", "/cart"), desc("path", "/other")))
			}
			for range 4 {
				step(req("shop", desc("file", "img/a.png"), desc("file", "img/b.png"), desc("file", "doc/x")))
				step(req("shop", desc("bucket", "logs-1"), desc("bucket", "logs-2")))
			}
			for range 4 {
				step(req("shop", desc("user", "u1", "plan", "free")))
				step(req("shop", desc("user", "u1")))
				step(req("shop", desc("user", "u1", "plan", "gold")))
				step(req("shop", desc("user", "u1", "plan", "vip"), desc("ip", "10.0.0.1")))
				step(req("shop", desc("ip", "10.0.0.1")))
				step(req("shop", desc("user", "u1", "plan", "free", "extra", "x")))
			}
			for range 3 {
				step(req("shop", desc("shadow", "a"), desc("quota", "b"), desc("health", "ok")))
				step(req("shop", desc("quota", "b")))
				step(req("shop", desc("zero", "z")))
				step(req("shop", desc("weekly", "w")))
			}
			// hits: per request, per descriptor, 0 to look
			r := req("shop", desc("path", "/h1"), hits(desc("path", "/h2"), 3), hits(desc("path", "/h1"), 0))
			r.HitsAddend = 2
			step(r)
			step(r)
			// more hits than the limit: with a local cache ratekit refuses
			// them without counting (a difference kept, see the guide)
			if tc.env["LOCAL_CACHE_SIZE_IN_BYTES"] == "" {
				step(req("shop", hits(desc("path", "/h2"), 0), hits(desc("path", "/h3"), 9)))
				step(req("shop", hits(desc("path", "/h3"), 0)))
			}
			// a descriptor's own limit, sharing the count of its unit (with
			// a local cache, envoy's remembers the key over whatever the
			// limit: a difference kept, see the guide)
			for range 3 {
				if tc.env["LOCAL_CACHE_SIZE_IN_BYTES"] != "" {
					break
				}
				step(req("shop", own(desc("path", "/own"), 2, typev3.RateLimitUnit_MINUTE), desc("path", "/own")))
				step(req("shop", own(desc("nothing", "configured"), 1, typev3.RateLimitUnit_HOUR)))
			}
			// unknown domains, unmatched descriptors, errors
			step(req("nowhere", desc("path", "/checkout")))
			step(req("shop", desc("unknown", "x"), desc()))
			step(req("", desc("path", "/x")))
			step(req("shop"))
			// the same descriptor twice in one request
			step(req("shop", desc("path", "/twice"), desc("path", "/twice"), desc("path", "/twice")))
			step(req("shop", desc("path", "/twice"), desc("path", "/twice"), desc("path", "/twice")))
			// seconds: three calls within one second, on both servers; a
			// sequence that crossed a second (a loaded machine) is sent
			// again in the next, on a fresh descriptor
			for attempt := 0; ; attempt++ {
				awaitSecond()
				start := time.Now().Unix()
				var xs []exchanged
				for range 3 {
					xs = append(xs, p.exchange(req("shop", desc("second", fmt.Sprint("s", attempt)))))
				}
				if time.Now().Unix() == start {
					for i, x := range xs {
						x.check(t, fmt.Sprintf("second %d", i))
					}
					break
				}
				if attempt == 5 {
					t.Fatal("no three calls fit in one second")
				}
			}
		})
	}
}

// TestCompareJSON compares /json: status codes and bodies.
func TestCompareJSON(t *testing.T) {
	p := startPair(t, map[string]string{"shop.yaml": mainConfig}, map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true"})
	awaitWindow(10 * time.Second)
	bodies := []string{
		`{"domain":"shop","descriptors":[{"entries":[{"key":"path","value":"/checkout"}]}]}`,
		`{"domain":"shop","descriptors":[{"entries":[{"key":"path","value":"/checkout"}]},{"entries":[{"key":"health"}]}]}`,
		`{"domain":"shop","descriptors":[{"entries":[{"key":"path","value":"/checkout"}]}],"hitsAddend":2}`,
		`{"domain":"shop","descriptors":[{"entries":[{"key":"path","value":"/checkout"}],"hitsAddend":0}]}`,
		`{"domain":"shop","descriptors":[{"entries":[{"key":"path","value":"/j"}],"limit":{"requestsPerUnit":1,"unit":"MINUTE"}}]}`,
		`{"domain":"shop","descriptors":[{"entries":[{"key":"path","value":"/j"}],"limit":{"requestsPerUnit":1,"unit":"MINUTE"}}]}`,
		`{"domain":"","descriptors":[]}`,
		`{"domain":"shop"}`,
		`not json`,
		`{"domain":"shop","descriptors":[{"entries":[{"key":"path","value":1}]}]}`,
		`{"domain":"shop","unknownField":true,"descriptors":[{"entries":[{"key":"path"}]}]}`,
		`{"domain":"nowhere","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}`,
		``,
	}
	for i, b := range bodies {
		t0 := time.Now()
		ec, eb, err := proctest.PostJSON(p.envoy.HTTP, b)
		if err != nil {
			t.Fatal(err)
		}
		rc, rb, err := proctest.PostJSON(p.ratekit.HTTP, b)
		if err != nil {
			t.Fatal(err)
		}
		slack := time.Now().Unix() - t0.Unix()
		if ec != rc {
			t.Fatalf("body %d: status %d from envoy, %d from ratekit\n%s\n%s", i, ec, rc, eb, rb)
		}
		if ec != 200 && ec != 429 {
			if eb != rb {
				t.Fatalf("body %d: envoy %q, ratekit %q", i, eb, rb)
			}
			continue
		}
		var ea, ra rlspb.RateLimitResponse
		if err := unmarshalJSON(eb, &ea); err != nil {
			t.Fatal(err)
		}
		if err := unmarshalJSON(rb, &ra); err != nil {
			t.Fatal(err)
		}
		if d := diff(&ea, &ra, slack); d != "" {
			t.Fatalf("body %d: %s\nenvoy:   %s\nratekit: %s", i, d, eb, rb)
		}
	}
}

// TestCompareDebugAndHealth compares /healthcheck and /rlconfig.
func TestCompareDebugAndHealth(t *testing.T) {
	p := startPair(t, map[string]string{"shop.yaml": mainConfig}, nil)
	for _, path := range []string{"/healthcheck"} {
		ec, eb, _ := proctest.Get(p.envoy.HTTP, path)
		rc, rb, _ := proctest.Get(p.ratekit.HTTP, path)
		if ec != rc || eb != rb {
			t.Fatalf("%s: envoy %d %q, ratekit %d %q", path, ec, eb, rc, rb)
		}
	}
	for _, svc := range []string{"ratelimit", "", "unknown"} {
		var codes [2]string
		for i, proc := range []*proctest.Proc{p.envoy, p.ratekit} {
			conn, err := grpc.NewClient(proc.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			r, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
			codes[i] = fmt.Sprint(r.GetStatus(), status.Code(err))
			conn.Close()
		}
		if codes[0] != codes[1] {
			t.Errorf("gRPC health of %q: envoy %s, ratekit %s", svc, codes[0], codes[1])
		}
	}
	_, eb, _ := proctest.Get(p.envoy.Debug, "/rlconfig")
	_, rb, _ := proctest.Get(p.ratekit.Debug, "/rlconfig")
	if a, b := sortedLines(eb), sortedLines(rb); !reflect.DeepEqual(a, b) {
		t.Fatalf("/rlconfig differs:\nenvoy:\n%s\nratekit:\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}

func sortedLines(s string) []string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(l)
	return l
}

func unmarshalJSON(s string, m proto.Message) error {
	var probe map[string]any
	if err := json.Unmarshal([]byte(s), &probe); err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	return protojsonUnmarshal([]byte(s), m)
}

// TestRedisGone kills each server's redis-server: envoy's answers every
// request with an error, ratekit's decides on its own and says OK within
// its deadline.
func TestRedisGone(t *testing.T) {
	p := startPair(t, map[string]string{"shop.yaml": mainConfig}, map[string]string{"RATEKIT_TIMEOUT": "50ms", "REDIS_TIMEOUT": "1s"})
	p.compare(t, "before", req("shop", desc("path", "/gone")))
	p.envoyRedis.Kill(t)
	p.ratekitRedis.Kill(t)
	var envoyErrs, ratekitErrs int
	var slowest time.Duration
	t0 := time.Now()
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if _, err := p.envoy.Client.ShouldRateLimit(ctx, req("shop", desc("path", "/gone"))); err != nil {
			envoyErrs++
		}
		cancel()
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		t1 := time.Now()
		r, err := p.ratekit.Client.ShouldRateLimit(ctx, req("shop", desc("path", "/gone")))
		slowest = max(slowest, time.Since(t1))
		cancel()
		if err != nil {
			ratekitErrs++
			t.Logf("ratekit: %v", err)
		} else if r.Statuses[0].GetCurrentLimit().GetRequestsPerUnit() != 5 {
			t.Fatalf("ratekit without Redis: %v", r)
		}
	}
	t.Logf("Redis gone, 5 requests each: envoy %d errors; ratekit %d errors, its slowest answer %v; %v in all", envoyErrs, ratekitErrs, slowest, time.Since(t0))
	if envoyErrs != 5 || ratekitErrs != 0 {
		t.Fatalf("envoy %d errors, ratekit %d; want 5 and 0", envoyErrs, ratekitErrs)
	}
}
