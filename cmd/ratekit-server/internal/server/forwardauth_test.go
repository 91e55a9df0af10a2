package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/compat"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/service"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/stats"
	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/redisstore"
)

const checkConfig = `
domain: d
descriptors:
  - key: u
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: g
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: gcra}
  - key: s
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: domain
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: generic_key
    value: login
    descriptors:
      - key: u
        rate_limit: {name: login, unit: minute, requests_per_unit: 1}
  - key: big
    rate_limit: {unit: minute, requests_per_unit: 1000000}
`

// checkFixture is a Service on miniredis, and its /check handler.
type checkFixture struct {
	svc *service.Service
	mr  *miniredis.Miniredis
	h   http.HandlerFunc
}

func newCheckFixture(tb testing.TB, yaml string, opts service.Options, trusted ...netip.Prefix) *checkFixture {
	tb.Helper()
	mr := miniredis.RunT(tb)
	// Redis's clock, which the windows follow, stands still in the middle
	// of a minute: no window ends between two checks of a test
	mr.SetTime(time.Date(2030, 1, 1, 12, 0, 30, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	cs, _ := compat.New(rdb, compat.Options{})
	ns, _ := redisstore.New(rdb)
	cl, err := core.NewLimiter(cs, core.WithPrefix(""), core.WithDeniedCache(0), core.WithTimeout(time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	nl, err := core.NewLimiter(ns, core.WithPrefix(""), core.WithTimeout(time.Second))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cl.Close(); nl.Close(); ns.Close(); cs.Close(); rdb.Close() })
	svc := service.New(cl, nl, stats.New(), opts)
	if yaml != "" {
		c, _, err := config.Load([]config.File{{Name: "t.yaml", Data: []byte(yaml)}}, config.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		svc.SetConfig(c)
	}
	ipKey, err := newIPKey(trusted)
	if err != nil {
		tb.Fatal(err)
	}
	return &checkFixture{svc: svc, mr: mr, h: checkHandler(svc, ipKey, discard)}
}

func (f *checkFixture) check(query string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/check?"+query, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	f.h(w, r)
	return w
}

// remaining peeks at what a descriptor of domain d has left.
func (f *checkFixture) remaining(t *testing.T, kv ...string) int {
	t.Helper()
	var es []*rlv3.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(kv); i += 2 {
		es = append(es, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	qs, err := f.svc.Peek(context.Background(), "d", es)
	if err != nil {
		t.Fatal(err)
	}
	return qs[0].Remaining
}

func wantHeaders(t *testing.T, w *httptest.ResponseRecorder, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s: %q, want %q (all: %v)", k, got, v, w.Header())
		}
	}
}

// TestCheckAnswers: 204 while allowed, 429 (or deny_status) when over,
// the library's headers on both, Retry-After and a problem body on a
// denial; a descriptor no rule matches is let through with no headers.
func TestCheckAnswers(t *testing.T) {
	f := newCheckFixture(t, checkConfig, service.Options{})
	w := f.check("domain=d&u=1")
	if w.Code != 204 || w.Body.Len() != 0 {
		t.Fatalf("first: %d %q", w.Code, w.Body)
	}
	wantHeaders(t, w, map[string]string{
		"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "1",
		"RateLimit-Policy": `"d.u";q=2;w=60`, "Retry-After": "",
	})
	if v := w.Header().Get("X-RateLimit-Reset"); v == "" {
		t.Error("no X-RateLimit-Reset")
	}
	if w := f.check("domain=d&u=1"); w.Code != 204 || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("second: %d %v", w.Code, w.Header())
	}
	w = f.check("domain=d&u=1")
	if w.Code != 429 {
		t.Fatalf("third: %d", w.Code)
	}
	wantHeaders(t, w, map[string]string{"X-RateLimit-Limit": "2", "X-RateLimit-Remaining": "0", "Content-Type": "application/problem+json"})
	// Redis's clock stands at hh:mm:30: the window ends in 30 s
	wantHeaders(t, w, map[string]string{"Retry-After": "30", "X-RateLimit-Reset": "30", "RateLimit": `"d.u";r=0;t=30`})
	var body struct{ Status int }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Status != 429 {
		t.Fatalf("body %q", w.Body)
	}
	w = f.check("domain=d&u=1&deny_status=403")
	if w.Code != 403 || w.Header().Get("Retry-After") == "" || w.Header().Get("X-RateLimit-Limit") != "2" {
		t.Fatalf("deny_status=403: %d %v", w.Code, w.Header())
	}
	if w := f.check("domain=d&nothing=1"); w.Code != 204 || len(w.Header()) != 0 {
		t.Fatalf("unmatched: %d %v", w.Code, w.Header())
	}
	if w := f.check("domain=unknown&u=1"); w.Code != 204 || len(w.Header()) != 0 {
		t.Fatalf("unknown domain: %d %v", w.Code, w.Header())
	}
	// GCRA: the capacity is the burst, and a denial waits for one unit
	for range 3 {
		f.check("domain=d&g=1")
	}
	w = f.check("domain=d&g=1")
	if w.Code != 429 || w.Header().Get("Retry-After") != "20" || w.Header().Get("X-RateLimit-Reset") != "60" {
		t.Fatalf("GCRA over: %d %v", w.Code, w.Header())
	}
}

// TestCheckSameCountsAsGRPC: /check and ShouldRateLimit spend from the
// same counters.
func TestCheckSameCountsAsGRPC(t *testing.T) {
	f := newCheckFixture(t, checkConfig, service.Options{})
	if _, err := f.svc.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "u", Value: "7"}}}}}); err != nil {
		t.Fatal(err)
	}
	if w := f.check("domain=d&u=7"); w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("after one gRPC call and one check: %v", w.Header())
	}
	if w := f.check("domain=d&u=7"); w.Code != 429 {
		t.Fatalf("third hit: %d", w.Code)
	}
}

// TestCheckSeveralDescriptors: descriptor starts another descriptor;
// each is counted apart, as envoy counts them; the headers describe the
// most restrictive and list both.
func TestCheckSeveralDescriptors(t *testing.T) {
	f := newCheckFixture(t, checkConfig, service.Options{})
	q := "domain=d&u=9&descriptor&generic_key=login&u=9"
	w := f.check(q)
	if w.Code != 204 {
		t.Fatalf("first: %d", w.Code)
	}
	wantHeaders(t, w, map[string]string{
		"X-RateLimit-Limit": "1", "X-RateLimit-Remaining": "0",
		"RateLimit-Policy": `"d.u";q=2;w=60, "login";q=1;w=60`,
	})
	w = f.check(q)
	if w.Code != 429 || w.Header().Get("X-RateLimit-Limit") != "1" {
		t.Fatalf("second: %d %v", w.Code, w.Header())
	}
	if got := f.remaining(t, "u", "9"); got != 0 {
		t.Fatalf("u=9 has %d left after two checks; want 0 (envoy counts each descriptor apart)", got)
	}
	// a leading descriptor is allowed; empty ones are not
	if w := f.check("domain=d&descriptor&u=10"); w.Code != 204 {
		t.Fatalf("leading descriptor: %d %s", w.Code, w.Body)
	}
}

// TestCheckHeaders: values from request headers, their last line; a
// descriptor whose header is absent or empty is left out; ip_from takes
// the last address and groups IPv6 by /64.
func TestCheckHeaders(t *testing.T) {
	f := newCheckFixture(t, checkConfig, service.Options{})
	if w := f.check("domain=d&key=u&value_from=x-user", "X-User", " alice "); w.Code != 204 || w.Header().Get("X-RateLimit-Remaining") != "1" {
		t.Fatalf("value_from: %d %v", w.Code, w.Header())
	}
	if got := f.remaining(t, "u", "alice"); got != 1 {
		t.Fatalf("u=alice: %d left, want 1", got)
	}
	f.check("domain=d&key=u&value_from=X-User", "X-User", "forged", "X-User", "alice")
	if got := f.remaining(t, "u", "alice"); got != 0 {
		t.Fatalf("two lines: the last one counts; u=alice has %d left", got)
	}
	for _, h := range [][]string{nil, {"X-User", ""}, {"X-User", "  "}} {
		if w := f.check("domain=d&key=u&value_from=X-User", h...); w.Code != 204 || len(w.Header()) != 0 {
			t.Fatalf("header %v: %d %v", h, w.Code, w.Header())
		}
	}
	// the other descriptor still counts
	if w := f.check("domain=d&key=u&value_from=X-User&descriptor&u=bob"); w.Code != 204 || w.Header().Get("RateLimit-Policy") != `"d.u";q=2;w=60` {
		t.Fatalf("one descriptor left out: %d %v", w.Code, w.Header())
	}
	for _, tc := range []struct{ xff, id string }{
		{"6.6.6.6, 10.1.2.3", "10.1.2.3"},
		{"10.1.2.4", "10.1.2.4"},
		{"::ffff:10.1.2.5", "10.1.2.5"},
		{"10.1.2.6:4711", "10.1.2.6"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"x, [2001:db8:1:3::9]:443", "2001:db8:1:3::/64"},
		{"fe80::1%eth0", "fe80::/64"},
	} {
		f.check("domain=d&key=u&ip_from=X-Forwarded-For", "X-Forwarded-For", tc.xff)
		if got := f.remaining(t, "u", tc.id); got != 1 {
			t.Errorf("X-Forwarded-For %q: u=%s has %d left, want 1", tc.xff, tc.id, got)
		}
	}
	for _, bad := range []string{"1.2.3.4, nonsense", "1.2.3.4,", "unknown", "", " "} {
		w := f.check("domain=d&key=u&ip_from=X-Forwarded-For", "X-Forwarded-For", bad)
		if w.Code != 400 || strings.Contains(w.Body.String(), "nonsense") {
			t.Errorf("X-Forwarded-For %q: %d %q", bad, w.Code, w.Body)
		}
	}
	if w := f.check("domain=d&key=u&ip_from=X-Forwarded-For"); w.Code != 400 || !strings.Contains(w.Body.String(), "no X-Forwarded-For header") {
		t.Errorf("no X-Forwarded-For: %d %q", w.Code, w.Body)
	}
	// behind trusted proxies, the client is the first address from the
	// right that is not one of them
	tp := newCheckFixture(t, checkConfig, service.Options{}, netip.MustParsePrefix("10.0.0.0/8"))
	for _, tc := range []struct{ xff, id string }{
		{"6.6.6.6, 203.0.113.5, 10.0.0.7", "203.0.113.5"},
		{"203.0.113.6, 10.0.0.7, 10.1.1.1", "203.0.113.6"},
		{"10.0.0.8", "10.0.0.8"},
		{"garbage, 10.0.0.9", "10.0.0.9"},
	} {
		tp.check("domain=d&key=u&ip_from=X-Forwarded-For", "X-Forwarded-For", tc.xff)
		if got := tp.remaining(t, "u", tc.id); got != 1 {
			t.Errorf("trusting 10/8, X-Forwarded-For %q: u=%s has %d left, want 1", tc.xff, tc.id, got)
		}
	}
	// lines added by proxies, one each, read from the last
	tp.check("domain=d&key=u&ip_from=X-Forwarded-For", "X-Forwarded-For", "6.6.6.6, 203.0.113.7", "X-Forwarded-For", "10.2.3.4")
	if got := tp.remaining(t, "u", "203.0.113.7"); got != 1 {
		t.Errorf("two lines: u=203.0.113.7 has %d left, want 1", got)
	}
	if w := f.check("domain=d&key=u&value_from=X-User", "X-User", strings.Repeat("a", maxCheckValue+1)); w.Code != 400 {
		t.Errorf("a header value over the bound: %d", w.Code)
	}
}

// TestCheckControls: hits_addend spends that many; a reserved word as a
// key through key=&value=; shadow_mode lets an over-limit request through
// with its numbers and no Retry-After.
func TestCheckControls(t *testing.T) {
	f := newCheckFixture(t, checkConfig, service.Options{})
	if w := f.check("domain=d&u=h&hits_addend=2"); w.Code != 204 || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("hits_addend=2: %d %v", w.Code, w.Header())
	}
	if w := f.check("domain=d&key=domain&value=x"); w.Code != 204 || w.Header().Get("RateLimit-Policy") != `"d.domain";q=1;w=60` {
		t.Fatalf("key=domain: %d %v", w.Code, w.Header())
	}
	f.check("domain=d&s=1")
	w := f.check("domain=d&s=1")
	if w.Code != 204 || w.Header().Get("X-RateLimit-Remaining") != "0" || w.Header().Get("Retry-After") != "" {
		t.Fatalf("shadow_mode over: %d %v", w.Code, w.Header())
	}
	// beside a real denial, the shadow rule's is not the one the fields
	// describe
	f.check("domain=d&s=2&descriptor&u=2&hits_addend=2")
	w = f.check("domain=d&s=2&descriptor&u=2")
	if w.Code != 429 || w.Header().Get("X-RateLimit-Limit") != "2" || w.Header().Get("RateLimit-Policy") != `"d.s";q=1;w=60, "d.u";q=2;w=60` {
		t.Fatalf("a shadow denial beside a real one: %d %v", w.Code, w.Header())
	}
	g := newCheckFixture(t, checkConfig, service.Options{GlobalShadow: true})
	g.check("domain=d&u=1&hits_addend=2")
	if w := g.check("domain=d&u=1"); w.Code != 204 || w.Header().Get("Retry-After") != "" {
		t.Fatalf("SHADOW_MODE over: %d %v", w.Code, w.Header())
	}
	e := newCheckFixture(t, checkConfig, service.Options{Headers: true, LimitHeader: "RateLimit-Limit", RemainingHeader: "RateLimit-Remaining", ResetHeader: "RateLimit-Reset"})
	if w := e.check("domain=d&u=1"); w.Header().Get("RateLimit-Limit") != "2" || w.Header().Get("RateLimit-Remaining") != "1" {
		t.Fatalf("LIMIT_RESPONSE_HEADERS_ENABLED: %v", w.Header())
	}
	n := newCheckFixture(t, "", service.Options{})
	if w := n.check("domain=d&u=1"); w.Code != 503 {
		t.Fatalf("no configuration: %d", w.Code)
	}
}

// TestCheckGatewayGone: a check whose request context ended before the
// decision (net/http ends it when a read of the connection fails, as when
// the gateway half-closes it) answers nothing: no status, and above all not
// the 200 that a handler returning without one would send, which a gateway
// takes for an allowed request. Nothing is counted.
func TestCheckGatewayGone(t *testing.T) {
	f := newCheckFixture(t, checkConfig, service.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the half-close below reached the server
		f.h(w, r)
	}))
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /check?domain=d&u=a HTTP/1.1\r\nHost: ratekit\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	answer, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	if len(answer) > 0 {
		t.Fatalf("the check answered %q; want the connection closed without an answer", answer)
	}
	if got := f.remaining(t, "u", "a"); got != 2 {
		t.Fatalf("%d of 2 left after a check nobody waited for; want nothing spent", got)
	}
}

// TestCheckRefuses: every malformed query is a 400 (414 when too long)
// whose message names the problem.
func TestCheckRefuses(t *testing.T) {
	f := newCheckFixture(t, checkConfig, service.Options{})
	many := func(n int, pair string) string { return strings.TrimSuffix(strings.Repeat(pair+"&", n), "&") }
	for _, tc := range []struct{ query, want string }{
		{"", "want domain=D"},
		{"u=1", "want domain=D"},
		{"domain=d", "want domain=D"},
		{"domain=&u=1", "an empty domain"},
		{"domain=d&domain=e&u=1", "domain given twice"},
		{"domain=d&u=1&hits_addend=x", "hits_addend"},
		{"domain=d&u=1&hits_addend=4294967296", "hits_addend"},
		{"domain=d&u=1&hits_addend=1&hits_addend=1", "hits_addend"},
		{"domain=d&u=1&deny_status=200", "deny_status"},
		{"domain=d&u=1&deny_status=600", "deny_status"},
		{"domain=d&u=1&descriptor=x", "descriptor takes no value"},
		{"domain=d&u=1&descriptor", "no entries"},
		{"domain=d&u=1&descriptor&descriptor&u=2", "no entries"},
		{"domain=d&key=u", "not followed"},
		{"domain=d&key=u&u=1", "not followed"},
		{"domain=d&key=&value=1", "an empty key="},
		{"domain=d&value=1", "without a key="},
		{"domain=d&key=u&value_from=X%20Bad", "wants a header name"},
		{"domain=d&key=u&ip_from=", "wants a header name"},
		{"domain=d&u", "without ="},
		{"domain=d&=1", "empty key"},
		{"domain=d&u=%zz", "percent-encoded"},
		{"domain=d&" + strings.Repeat("k", maxCheckKey+1) + "=1", "a key of"},
		{"domain=d&u=" + strings.Repeat("v", maxCheckValue+1), "a value of"},
		{"domain=d&" + many(maxCheckEntries+1, "u=1"), "entries"},
		{"domain=d&" + many(maxCheckDescriptors+1, "u=1&descriptor") + "&u=1", "descriptors"},
	} {
		w := f.check(tc.query)
		if w.Code != 400 || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%.80q: %d %q, want 400 with %q", tc.query, w.Code, w.Body, tc.want)
		}
	}
	if w := f.check("domain=d&u=" + strings.Repeat("v", maxCheckQuery)); w.Code != 414 {
		t.Errorf("a query over %d bytes: %d", maxCheckQuery, w.Code)
	}
	if len(f.mr.Keys()) != 0 {
		t.Fatalf("refused checks counted: %v", f.mr.Keys())
	}
}

// TestCheckNoSlotSteering: whatever a client puts in a value, the storage
// key's Cluster hash tag is the library's, a hash when the value holds
// braces, so no client picks a slot.
func TestCheckNoSlotSteering(t *testing.T) {
	f := newCheckFixture(t, checkConfig, service.Options{})
	for _, v := range []string{"}{", "a}b", "{x}", "x{", "\x00\r\n", strings.Repeat("z", 200)} {
		if w := f.check("domain=d&key=big&value_from=X-Id", "X-Id", v); w.Code != 204 {
			t.Fatalf("%q: %d %s", v, w.Code, w.Body)
		}
		if w := f.check("domain=d&big=" + url.QueryEscape(v)); w.Code != 204 {
			t.Fatalf("%q: %d %s", v, w.Code, w.Body)
		}
	}
	for _, k := range f.mr.Keys() {
		open, end := strings.IndexByte(k, '{'), strings.LastIndexByte(k, '}')
		if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || end != len(k)-1 || k[open+1] != '#' {
			t.Errorf("key %q: want one hash tag {#<hash>} at its end", k)
		}
	}
	if len(f.mr.Keys()) == 0 {
		t.Fatal("no key written")
	}
}

// encode writes q back as a canonical query: parsing it gives q again.
func (q checkQuery) encode() string {
	var parts []string
	add := func(k, v string) { parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(v)) }
	add("domain", q.domain)
	if q.hits != 0 {
		add("hits_addend", strconv.FormatUint(uint64(q.hits), 10))
	}
	if q.denyStatus != 0 {
		add("deny_status", strconv.Itoa(q.denyStatus))
	}
	for _, d := range q.descriptors {
		parts = append(parts, "descriptor")
		for _, e := range d {
			add("key", e.key)
			add([]string{"value", "value_from", "ip_from"}[e.src], e.value)
		}
	}
	return strings.Join(parts, "&")
}

// FuzzCheck sends any query and headers to /check: a 204, 429, 400 or
// 414, never a panic or another status; an accepted query keeps the bounds
// and reads back the same from its canonical form. The seed corpus is in
// testdata/fuzz/FuzzCheck.
func FuzzCheck(f *testing.F) {
	fx := newCheckFixture(f, checkConfig, service.Options{})
	f.Fuzz(func(t *testing.T, query, xff, user string) {
		r := httptest.NewRequest(http.MethodGet, "/check", nil)
		r.URL.RawQuery = query
		r.Header["X-Forwarded-For"] = []string{xff}
		r.Header["X-User"] = []string{user}
		w := httptest.NewRecorder()
		fx.h(w, r)
		q, err := parseCheck(query)
		if err != nil {
			if !errors.Is(err, errCheckSyntax) && !errors.Is(err, errCheckTooBig) {
				t.Fatalf("an error of no kind: %v", err)
			}
			if w.Code != 400 && w.Code != 414 {
				t.Fatalf("status %d for a refused query %q (%v)", w.Code, query, err)
			}
			return
		}
		deny := cmp.Or(q.denyStatus, 429)
		if w.Code != 204 && w.Code != 400 && w.Code != deny {
			t.Fatalf("status %d for %q", w.Code, query)
		}
		n := 0
		for _, d := range q.descriptors {
			if len(d) == 0 {
				t.Fatalf("an empty descriptor from %q", query)
			}
			for _, e := range d {
				if e.key == "" || len(e.key) > maxCheckKey || len(e.value) > maxCheckValue {
					t.Fatalf("entry %+v out of bounds from %q", e, query)
				}
				n++
			}
		}
		if len(q.descriptors) > maxCheckDescriptors || n > maxCheckEntries || q.domain == "" {
			t.Fatalf("%d descriptors, %d entries, domain %q from %q", len(q.descriptors), n, q.domain, query)
		}
		if enc := q.encode(); len(enc) <= maxCheckQuery {
			back, err := parseCheck(enc)
			if err != nil || !reflect.DeepEqual(back, q) {
				t.Fatalf("%q reads back from %q as %+v, %v; want %+v", query, enc, back, err, q)
			}
		}
	})
}
