package promlimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/promlimit"
	"github.com/ratekit/ratekit/redisstore"
)

func newLimiter(t *testing.T, store core.Store, opts ...core.Option) *core.Limiter {
	t.Helper()
	l, err := core.NewLimiter(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// memoryStore returns a new memorystore.Store, closed when the test ends.
func memoryStore(t *testing.T) *memorystore.Store {
	t.Helper()
	s, err := memorystore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rule returns a rule of identity id.
func rule(name string, limit core.Limit, id string) core.Rule {
	return core.Rule{Name: name, Limit: limit, Key: keyfuncs.Static(id)}
}

var request = adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil))

// checks checks the request n times against rules, and returns how many
// decisions allowed it.
func checks(t *testing.T, l *core.Limiter, n int, rules ...core.Rule) (allowed int) {
	t.Helper()
	for range n {
		d, err := l.Check(context.Background(), request, rules)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
	}
	return allowed
}

// compare checks the named metrics of c against want, in the text
// exposition format without HELP and TYPE lines, which it adds.
func compare(t *testing.T, c prometheus.Collector, want string, names ...string) {
	t.Helper()
	var b strings.Builder
	for _, block := range strings.Split(strings.TrimSpace(want), "\n\n") {
		name := strings.TrimSpace(block)
		name = name[:strings.IndexAny(name, "{ ")]
		typ, help := "counter", helps[name]
		if name == "ratekit_breaker_state" {
			typ = "gauge"
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s\n", name, help, name, typ, strings.TrimSpace(block))
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(b.String()), names...); err != nil {
		t.Error(err)
	}
}

// helps holds the help text of each metric, as the Collector gives it.
var helps = func() map[string]string {
	c := promlimit.MustNew()
	c.Decided(context.Background(), core.DecisionEvent{Rule: "r", Result: core.Result{Limit: core.PerMinute(1)}})
	c.StoreCalled(time.Millisecond, errors.New("down"))
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	m := map[string]string{}
	for _, f := range families {
		m[f.GetName()] = f.GetHelp()
	}
	return m
}()

// histogram returns the sample count and sum of the histogram series of
// name whose labels include the given ones.
func histogram(t testing.TB, c prometheus.Collector, name string, labels ...string) (count uint64, sum float64) {
	t.Helper()
	families, err := gatherer(c).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels...) {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0, 0
}

// value returns the value of the counter or gauge series of name whose
// labels include the given ones, or 0 when there is none.
func value(t testing.TB, c prometheus.Collector, name string, labels ...string) float64 {
	t.Helper()
	families, err := gatherer(c).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels...) {
				if g := m.GetGauge(); g != nil {
					return g.GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, labels ...string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			found = found || lp.GetName() == labels[i] && lp.GetValue() == labels[i+1]
		}
		if !found {
			return false
		}
	}
	return true
}

// A known sequence through a Limiter over a memorystore.Store: exact counts of
// decisions, near-limit decisions and store calls.
func TestMemoryStoreSequence(t *testing.T) {
	c := promlimit.MustNew()
	l := newLimiter(t, memoryStore(t), core.WithObserver(c))
	api := rule("api", core.PerMinute(5), "user:1")
	if got := checks(t, l, 7, api); got != 5 {
		t.Fatalf("%d allowed, want 5", got)
	}
	// remaining 4, 3, 2, 1, 0: used 0.2, 0.4, 0.6, 0.8, 1; then two denials
	compare(t, c, `
ratekit_decisions_total{degraded="false",outcome="allowed",rule="api"} 5
ratekit_decisions_total{degraded="false",outcome="denied",rule="api"} 2
ratekit_decisions_total{degraded="false",outcome="shadow_denied",rule="api"} 0
ratekit_decisions_total{degraded="true",outcome="allowed",rule="api"} 0
ratekit_decisions_total{degraded="true",outcome="denied",rule="api"} 0
ratekit_decisions_total{degraded="true",outcome="shadow_denied",rule="api"} 0

ratekit_near_limit_total{rule="api"} 2

ratekit_denied_cache_hits_total{rule="api"} 0

ratekit_breaker_state{state="closed"} 1
ratekit_breaker_state{state="half-open"} 0
ratekit_breaker_state{state="open"} 0
`, "ratekit_decisions_total", "ratekit_near_limit_total", "ratekit_denied_cache_hits_total", "ratekit_breaker_state")

	if n, sum := histogram(t, c, "ratekit_quota_used_ratio", "rule", "api"); n != 7 || math.Abs(sum-(0.2+0.4+0.6+0.8+1+1+1)) > 1e-9 {
		t.Errorf("quota used: %d samples summing to %v, want 7 summing to 5", n, sum)
	}
	if n, _ := histogram(t, c, "ratekit_store_duration_seconds", "result", "ok"); n != 7 {
		t.Errorf("%d store calls timed, want 7", n)
	}
	if n, _ := histogram(t, c, "ratekit_store_duration_seconds", "result", "error"); n != 0 {
		t.Errorf("%d failed store calls timed, want 0", n)
	}
	if got := value(t, c, "ratekit_decisions_total", "rule", "api", "outcome", "denied", "degraded", "false"); got != 2 {
		t.Errorf("denied: %v, want 2", got)
	}
}

// Over Redis (miniredis), the denied-key cache answers the second denial
// without a store call.
func TestDeniedCacheHits(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	c := promlimit.MustNew()
	rs, err := redisstore.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	l := newLimiter(t, rs, core.WithObserver(c))
	login := rule("login", core.PerHour(2), "user:1")
	if got := checks(t, l, 4, login); got != 2 {
		t.Fatalf("%d allowed, want 2", got)
	}
	compare(t, c, `
ratekit_decisions_total{degraded="false",outcome="allowed",rule="login"} 2
ratekit_decisions_total{degraded="false",outcome="denied",rule="login"} 2
ratekit_decisions_total{degraded="false",outcome="shadow_denied",rule="login"} 0
ratekit_decisions_total{degraded="true",outcome="allowed",rule="login"} 0
ratekit_decisions_total{degraded="true",outcome="denied",rule="login"} 0
ratekit_decisions_total{degraded="true",outcome="shadow_denied",rule="login"} 0

ratekit_near_limit_total{rule="login"} 1

ratekit_denied_cache_hits_total{rule="login"} 1
`, "ratekit_decisions_total", "ratekit_near_limit_total", "ratekit_denied_cache_hits_total")
	if n, _ := histogram(t, c, "ratekit_store_duration_seconds", "result", "ok"); n != 3 {
		t.Errorf("%d store calls timed, want 3 (the cached denial makes none)", n)
	}
	if got := value(t, c, "ratekit_store_errors_total", "kind", "other"); got != 0 {
		t.Errorf("store errors: %v", got)
	}
}

// A rule in shadow mode, behind the net/http adapter: its denials count as
// shadow_denied, and every request passes.
func TestShadowThroughAdapter(t *testing.T) {
	c := promlimit.MustNew()
	l := newLimiter(t, memoryStore(t), core.WithObserver(c))
	clientIP, err := keyfuncs.IP()
	if err != nil {
		t.Fatal(err)
	}
	mw, err := nethttp.New(l, []core.Rule{
		{Name: "enforced", Limit: core.PerMinute(100), Key: clientIP},
		{Name: "trial", Limit: core.PerMinute(1), Key: clientIP, Shadow: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	for i := range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if w.Code != http.StatusOK {
			t.Errorf("request %d: status %d, want 200: shadow mode never denies", i+1, w.Code)
		}
	}
	compare(t, c, `
ratekit_decisions_total{degraded="false",outcome="allowed",rule="enforced"} 3
ratekit_decisions_total{degraded="false",outcome="allowed",rule="trial"} 1
ratekit_decisions_total{degraded="false",outcome="denied",rule="enforced"} 0
ratekit_decisions_total{degraded="false",outcome="denied",rule="trial"} 0
ratekit_decisions_total{degraded="false",outcome="shadow_denied",rule="enforced"} 0
ratekit_decisions_total{degraded="false",outcome="shadow_denied",rule="trial"} 2
ratekit_decisions_total{degraded="true",outcome="allowed",rule="enforced"} 0
ratekit_decisions_total{degraded="true",outcome="allowed",rule="trial"} 0
ratekit_decisions_total{degraded="true",outcome="denied",rule="enforced"} 0
ratekit_decisions_total{degraded="true",outcome="denied",rule="trial"} 0
ratekit_decisions_total{degraded="true",outcome="shadow_denied",rule="enforced"} 0
ratekit_decisions_total{degraded="true",outcome="shadow_denied",rule="trial"} 0

ratekit_near_limit_total{rule="enforced"} 0
ratekit_near_limit_total{rule="trial"} 1
`, "ratekit_decisions_total", "ratekit_near_limit_total")
}

// WithShadow puts every rule in shadow mode.
func TestWithShadow(t *testing.T) {
	c := promlimit.MustNew()
	l := newLimiter(t, memoryStore(t), core.WithObserver(c), core.WithShadow())
	if got := checks(t, l, 5, rule("api", core.PerMinute(2), "user:1")); got != 5 {
		t.Errorf("%d of 5 allowed: shadow mode never denies", got)
	}
	for _, o := range []struct {
		outcome string
		want    float64
	}{{"allowed", 2}, {"denied", 0}, {"shadow_denied", 3}} {
		if got := value(t, c, "ratekit_decisions_total", "rule", "api", "outcome", o.outcome, "degraded", "false"); got != o.want {
			t.Errorf("%s: %v, want %v", o.outcome, got, o.want)
		}
	}
}

// store is a core.Store that fails with err while err is set.
type store struct {
	mem *memorystore.Store
	err atomic.Pointer[error]
}

func newStore(t *testing.T) *store {
	return &store{mem: memoryStore(t)}
}

func (s *store) fail(err error) {
	if err == nil {
		s.err.Store(nil)
		return
	}
	s.err.Store(&err)
}

func (s *store) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	if p := s.err.Load(); p != nil {
		if errors.Is(*p, context.DeadlineExceeded) {
			<-ctx.Done() // a store that does not answer
			return nil, ctx.Err()
		}
		return nil, *p
	}
	return s.mem.AllowAllN(ctx, checks, n)
}

// redisError is an error Redis answered with, as go-redis reports one.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// Failed store calls count by kind; under FailLocal the decisions are
// degraded and allowed.
func TestStoreErrorsByKind(t *testing.T) {
	s := newStore(t)
	c := promlimit.MustNew()
	// a breaker that never opens: every request calls the store
	l := newLimiter(t, s, core.WithObserver(c), core.WithBreaker(core.BreakerConfig{Failures: 1000}), core.WithTimeout(20*time.Millisecond))
	api := rule("api", core.PerMinute(100), "user:1")
	for _, err := range []error{
		redisError("LOADING Redis is loading the dataset in memory"),
		redisError("BUSY script"),
		&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")},
		errors.New("out of luck"),
		context.DeadlineExceeded,
		nil,
	} {
		s.fail(err)
		if got := checks(t, l, 1, api); got != 1 {
			t.Fatalf("with store error %v: denied, want a local decision that allows", err)
		}
	}
	compare(t, c, `
ratekit_store_errors_total{kind="canceled"} 0
ratekit_store_errors_total{kind="closed"} 0
ratekit_store_errors_total{kind="connection"} 1
ratekit_store_errors_total{kind="malformed"} 0
ratekit_store_errors_total{kind="other"} 1
ratekit_store_errors_total{kind="redis"} 2
ratekit_store_errors_total{kind="timeout"} 1

ratekit_decisions_total{degraded="false",outcome="allowed",rule="api"} 1
ratekit_decisions_total{degraded="false",outcome="denied",rule="api"} 0
ratekit_decisions_total{degraded="false",outcome="shadow_denied",rule="api"} 0
ratekit_decisions_total{degraded="true",outcome="allowed",rule="api"} 5
ratekit_decisions_total{degraded="true",outcome="denied",rule="api"} 0
ratekit_decisions_total{degraded="true",outcome="shadow_denied",rule="api"} 0

ratekit_breaker_state{state="closed"} 1
ratekit_breaker_state{state="half-open"} 0
ratekit_breaker_state{state="open"} 0
`, "ratekit_store_errors_total", "ratekit_decisions_total", "ratekit_breaker_state")
	if n, sum := histogram(t, c, "ratekit_store_duration_seconds", "result", "error"); n != 5 || sum < 0.020 {
		t.Errorf("failed calls: %d timed, %vs in all; want 5, and at least the 20 ms deadline", n, sum)
	}
	if n, _ := histogram(t, c, "ratekit_store_duration_seconds", "result", "ok"); n != 1 {
		t.Errorf("%d successful calls timed, want 1", n)
	}
}

// The breaker gauge follows the breaker: open after a failure, and an open
// breaker spares the store (no call, no error), then closed again once
// the store answers.
func TestBreakerState(t *testing.T) {
	s := newStore(t)
	c := promlimit.MustNew()
	// opens at the first failure; the first probe comes after an hour
	l := newLimiter(t, s, core.WithObserver(c), core.WithBreaker(core.BreakerConfig{Failures: 1, Backoff: time.Hour, MaxBackoff: time.Hour}),
		core.WithFailurePolicy(core.FailClosed))
	api := rule("api", core.PerMinute(100), "user:1")
	s.fail(errors.New("down"))
	for range 3 {
		d, err := l.Check(context.Background(), request, []core.Rule{api})
		if !errors.Is(err, core.ErrUnavailable) || d.Allowed {
			t.Fatalf("decision %+v, %v; want a fail-closed denial", d, err)
		}
	}
	compare(t, c, `
ratekit_breaker_state{state="closed"} 0
ratekit_breaker_state{state="half-open"} 0
ratekit_breaker_state{state="open"} 1

ratekit_store_errors_total{kind="canceled"} 0
ratekit_store_errors_total{kind="closed"} 0
ratekit_store_errors_total{kind="connection"} 0
ratekit_store_errors_total{kind="malformed"} 0
ratekit_store_errors_total{kind="other"} 1
ratekit_store_errors_total{kind="redis"} 0
ratekit_store_errors_total{kind="timeout"} 0

ratekit_decisions_total{degraded="false",outcome="allowed",rule="api"} 0
ratekit_decisions_total{degraded="false",outcome="denied",rule="api"} 0
ratekit_decisions_total{degraded="false",outcome="shadow_denied",rule="api"} 0
ratekit_decisions_total{degraded="true",outcome="allowed",rule="api"} 0
ratekit_decisions_total{degraded="true",outcome="denied",rule="api"} 3
ratekit_decisions_total{degraded="true",outcome="shadow_denied",rule="api"} 0
`, "ratekit_breaker_state", "ratekit_store_errors_total", "ratekit_decisions_total")

	// A breaker that probes every few milliseconds, through half-open,
	// back to closed.
	var (
		mu      sync.Mutex
		changes []string
	)
	c2 := promlimit.MustNew()
	l2 := newLimiter(t, s, core.WithObserver(c2), core.WithBreaker(core.BreakerConfig{Failures: 1, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}),
		core.OnBreakerChange(func(from, to core.BreakerState) {
			mu.Lock()
			defer mu.Unlock()
			changes = append(changes, to.String())
		}))
	checks(t, l2, 1, api)
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(changes) >= 3 // open, half-open, open again
	})
	if v := value(t, c2, "ratekit_breaker_state", "state", "closed"); v != 0 {
		t.Errorf("closed = %v while the store fails, want 0", v)
	}
	s.fail(nil)
	waitFor(t, func() bool { return value(t, c2, "ratekit_breaker_state", "state", "closed") == 1 })
	for _, state := range []string{"open", "half-open"} {
		if v := value(t, c2, "ratekit_breaker_state", "state", state); v != 0 {
			t.Errorf("%s = %v once closed, want 0", state, v)
		}
	}
	if n, _ := histogram(t, c2, "ratekit_store_duration_seconds", "result", "error"); n < 2 {
		t.Errorf("%d failed calls timed, want the request's and at least one probe's", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// 10,000 clients on 10,000 paths make no more series than one client on
// one path, and no label value holds an identity or a path.
func TestLabelsBounded(t *testing.T) {
	c := promlimit.MustNew()
	l := newLimiter(t, memoryStore(t), core.WithObserver(c))
	clientIP, err := keyfuncs.IP()
	if err != nil {
		t.Fatal(err)
	}
	perClient, err := nethttp.New(l, []core.Rule{{Name: "default", Limit: core.PerMinute(1), Key: clientIP}})
	if err != nil {
		t.Fatal(err)
	}
	// keyed by the route pattern, never the raw path
	perRoute, err := nethttp.New(l, []core.Rule{{Name: "per-route", Limit: core.PerMinute(100), Key: keyfuncs.Join(keyfuncs.Route(), clientIP)}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", perRoute(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	h := perClient(mux)
	get := func(i int) int {
		r := httptest.NewRequest("GET", "/items/"+strconv.Itoa(1e6+i), nil)
		r.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	get(0)
	get(0) // denied
	want := testutil.CollectAndCount(c)
	const clients = 10_000
	denied := 0
	for i := 1; i <= clients; i++ {
		for range 2 {
			if get(i) == http.StatusTooManyRequests {
				denied++
			}
		}
	}
	if denied != clients {
		t.Errorf("%d denied, want %d: one per client", denied, clients)
	}
	if got := testutil.CollectAndCount(c); got != want {
		t.Errorf("%d series after %d clients, want %d as after one", got, clients, want)
	}
	// 2 rules × 9, 2 store duration, 7 error kinds, 3 breaker states
	if want != 2*9+2+7+3 {
		t.Errorf("%d series, want %d", want, 2*9+2+7+3)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				values[lp.GetName()+"="+lp.GetValue()] = true
				if strings.Contains(lp.GetValue(), "10.") || strings.Contains(lp.GetValue(), "/items") {
					t.Errorf("%s: label %s=%q holds an identity or a path", f.GetName(), lp.GetName(), lp.GetValue())
				}
			}
		}
	}
	if len(values) > 20 {
		t.Errorf("%d distinct labels: %v", len(values), values)
	}
	if got := value(t, c, "ratekit_decisions_total", "rule", "default", "outcome", "denied", "degraded", "false"); got != clients+1 {
		t.Errorf("default denied %v, want %d", got, clients+1)
	}
}

// Rules beyond the bound count under {other}.
func TestMaxRules(t *testing.T) {
	c := promlimit.MustNew(promlimit.WithMaxRules(3))
	l := newLimiter(t, memoryStore(t), core.WithObserver(c))
	for i := range 10 {
		checks(t, l, 2, rule("rule-"+strconv.Itoa(i), core.PerMinute(1), "user:1"))
	}
	series := testutil.CollectAndCount(c, "ratekit_decisions_total")
	if series != 4*6 {
		t.Errorf("%d decision series, want 24: 6 for each of 3 rules and {other}", series)
	}
	for _, r := range []struct {
		rule            string
		allowed, denied float64
	}{{"rule-0", 1, 1}, {"rule-2", 1, 1}, {promlimit.OtherRule, 7, 7}} {
		if got := value(t, c, "ratekit_decisions_total", "rule", r.rule, "outcome", "allowed", "degraded", "false"); got != r.allowed {
			t.Errorf("%s allowed: %v, want %v", r.rule, got, r.allowed)
		}
		if got := value(t, c, "ratekit_decisions_total", "rule", r.rule, "outcome", "denied", "degraded", "false"); got != r.denied {
			t.Errorf("%s denied: %v, want %v", r.rule, got, r.denied)
		}
	}
}

// A rule name that is not UTF-8 still makes a valid label.
func TestRuleNameNotUTF8(t *testing.T) {
	c := promlimit.MustNew()
	c.Decided(context.Background(), core.DecisionEvent{Rule: "caf\xe9", Result: core.Result{Limit: core.PerMinute(1), Allowed: true}})
	if got := value(t, c, "ratekit_decisions_total", "rule", "caf\uFFFD", "outcome", "allowed", "degraded", "false"); got != 1 {
		t.Errorf("got %v, want 1", got)
	}
	if err := testutil.GatherAndCompare(gatherer(c), strings.NewReader(""), "none"); err != nil {
		t.Error(err) // Gather validates every label
	}
}

func gatherer(c prometheus.Collector) prometheus.Gatherer {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	return reg
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  promlimit.Option
		want string // in the error; "" for none
	}{
		{"near limit 0", promlimit.WithNearLimit(0), "near-limit threshold 0"},
		{"near limit 1.5", promlimit.WithNearLimit(1.5), "near-limit threshold 1.5"},
		{"near limit NaN", promlimit.WithNearLimit(math.NaN()), "near-limit threshold NaN"},
		{"near limit 1", promlimit.WithNearLimit(1), ""},
		{"max rules 0", promlimit.WithMaxRules(0), "0 rules"},
		{"store buckets unsorted", promlimit.WithStoreBuckets(.1, .01), "increasing"},
		{"store buckets none", promlimit.WithStoreBuckets(), "no bounds"},
		{"used buckets", promlimit.WithUsedBuckets(.5, 1), ""},
		{"const label rule", promlimit.WithConstLabels(prometheus.Labels{"rule": "x"}), "rule"},
		{"const label invalid", promlimit.WithConstLabels(prometheus.Labels{"bad\xffname": "x"}), "bad"},
		{"const label", promlimit.WithConstLabels(prometheus.Labels{"limiter": "api"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := promlimit.New(tc.opt)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Error("MustNew with a bad option did not panic")
		}
	}()
	promlimit.MustNew(promlimit.WithMaxRules(-1))
}

// A threshold of 0.5 counts decisions from half the quota used.
func TestNearLimitThreshold(t *testing.T) {
	c := promlimit.MustNew(promlimit.WithNearLimit(0.5))
	l := newLimiter(t, memoryStore(t), core.WithObserver(c))
	checks(t, l, 5, rule("api", core.PerMinute(4), "user:1")) // used .25 .5 .75 1, then a denial
	if got := value(t, c, "ratekit_near_limit_total", "rule", "api"); got != 3 {
		t.Errorf("near limit %v, want 3", got)
	}
}

// Two Limiters, each with a Collector told apart by a constant label, on
// one registry.
func TestConstLabels(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	a := promlimit.MustNew(promlimit.WithConstLabels(prometheus.Labels{"limiter": "a"}))
	b := promlimit.MustNew(promlimit.WithConstLabels(prometheus.Labels{"limiter": "b"}))
	reg.MustRegister(a, b)
	la := newLimiter(t, memoryStore(t), core.WithObserver(a))
	lb := newLimiter(t, memoryStore(t), core.WithObserver(b))
	checks(t, la, 1, rule("api", core.PerMinute(1), "user:1"))
	checks(t, lb, 2, rule("api", core.PerMinute(1), "user:1"))
	err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP ratekit_denied_cache_hits_total `+helps["ratekit_denied_cache_hits_total"]+`
# TYPE ratekit_denied_cache_hits_total counter
ratekit_denied_cache_hits_total{limiter="a",rule="api"} 0
ratekit_denied_cache_hits_total{limiter="b",rule="api"} 0
`), "ratekit_denied_cache_hits_total")
	if err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(b, "ratekit_breaker_state"); n != 3 {
		t.Errorf("%d breaker series, want 3", n)
	}
}

// Decided and StoreCalled allocate nothing once a rule has been seen.
func TestNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	c := promlimit.MustNew()
	ctx := context.Background()
	e := core.DecisionEvent{Rule: "api", Result: core.Result{Limit: core.PerMinute(10), Allowed: true, Remaining: 1}}
	c.Decided(ctx, e)
	if n := testing.AllocsPerRun(1000, func() {
		c.Decided(ctx, e)
		c.StoreCalled(time.Millisecond, nil)
	}); n != 0 {
		t.Errorf("%v allocations per decision, want 0", n)
	}
}

// Many goroutines, many rules, scrapes going on: run with -race.
func TestConcurrent(t *testing.T) {
	c := promlimit.MustNew(promlimit.WithMaxRules(8))
	l := newLimiter(t, memoryStore(t), core.WithObserver(c))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				checks(t, l, 1, rule("rule-"+strconv.Itoa((g+i)%16), core.PerMinute(50), "user:"+strconv.Itoa(g)))
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			testutil.CollectAndCount(c)
		}
	})
	wg.Wait()
	families, err := gatherer(c).Gather()
	if err != nil {
		t.Fatal(err)
	}
	total, rules := 0.0, map[string]bool{}
	for _, f := range families {
		if f.GetName() != "ratekit_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "rule" {
					rules[lp.GetValue()] = true
				}
			}
		}
	}
	if len(rules) != 9 || !rules[promlimit.OtherRule] {
		t.Errorf("rule labels %v, want 8 rules and %s", rules, promlimit.OtherRule)
	}
	if total != 8*200 {
		t.Errorf("%v decisions counted, want %d", total, 8*200)
	}
}
