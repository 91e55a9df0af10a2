package otellimit_test

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/otellimit"
	"github.com/ratekit/ratekit/redisstore"
)

// A known sequence over a memorystore.Store on a stopped clock: exact counts,
// utilization and store calls, then the quota coming back with time.
func TestMemoryStoreSequence(t *testing.T) {
	o, reader := newObserver(t)
	clock := adaptertest.NewClock()
	l := memoryLimiter(t, clock, o)
	api := rule("api", core.PerMinute(5), "user:1")
	if got := checkN(t, l, 7, api); got != 5 {
		t.Fatalf("%d of 7 allowed, want 5", got)
	}
	// 4, 3, 2, 1 and 0 left: 0.2, 0.4, 0.6, 0.8 and 1 used, then two
	// denials at 1. The store calls take no time on a stopped clock.
	expect(t, reader, decisionPoints("api", [6]int{5, 2, 0, 0, 0, 0})+`
		ratekit.near_limit{rule=api} 2
		ratekit.quota.utilization{rule=api} count=7 sum=5
		ratekit.denied_cache.hits{rule=api} 0
		ratekit.store.duration{result=ok} count=7 sum=0
		ratekit.breaker.state{state=closed} 1
		ratekit.breaker.state{state=half-open} 0
		ratekit.breaker.state{state=open} 0
	`, "ratekit.decisions", "ratekit.near_limit", "ratekit.quota.utilization", "ratekit.denied_cache.hits",
		"ratekit.store.duration", "ratekit.store.errors", "ratekit.breaker.state")

	clock.Advance(time.Minute) // the whole quota back: 0.2, then 0.4 used
	if got := checkN(t, l, 2, api); got != 2 {
		t.Fatalf("%d of 2 allowed a minute later, want 2", got)
	}
	expect(t, reader, decisionPoints("api", [6]int{7, 2, 0, 0, 0, 0})+`
		ratekit.near_limit{rule=api} 2
		ratekit.quota.utilization{rule=api} count=9 sum=5.6
	`, "ratekit.decisions", "ratekit.near_limit", "ratekit.quota.utilization")
}

// Over Redis, which the Limiter does not decide in process, the denied-key
// cache answers the second denial without a store call.
func TestDeniedCacheHits(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	store, err := redisstore.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	o, reader := newObserver(t)
	// a deadline no loaded machine misses: a timeout would decide locally
	l := adaptertest.NewLimiterOver(t, store, core.WithObserver(o), core.WithTimeout(10*time.Second))
	if got := checkN(t, l, 4, rule("login", core.PerHour(2), "user:1")); got != 2 {
		t.Fatalf("%d of 4 allowed, want 2", got)
	}
	expect(t, reader, decisionPoints("login", [6]int{2, 2, 0, 0, 0, 0})+`
		ratekit.near_limit{rule=login} 1
		ratekit.denied_cache.hits{rule=login} 1
	`, "ratekit.decisions", "ratekit.near_limit", "ratekit.denied_cache.hits", "ratekit.store.errors")
	if p := histogram(t, reader, "ratekit.store.duration", attribute.String("result", "ok")); p.Count != 3 {
		t.Errorf("%d store calls, want 3: the cached denial makes none", p.Count)
	}
}

// A rule in shadow mode lets every request through; its would-be denials
// count as shadow_denied, and use all of its quota.
func TestShadowRule(t *testing.T) {
	o, reader := newObserver(t)
	l := memoryLimiter(t, adaptertest.NewClock(), o)
	enforced := rule("enforced", core.PerMinute(100), "user:1")
	trial := rule("trial", core.PerMinute(1), "user:1")
	trial.Shadow = true
	if got := checkN(t, l, 3, enforced, trial); got != 3 {
		t.Errorf("%d of 3 allowed: a rule in shadow mode never denies", got)
	}
	expect(t, reader, decisionPoints("enforced", [6]int{3, 0, 0, 0, 0, 0})+
		decisionPoints("trial", [6]int{1, 0, 2, 0, 0, 0})+`
		ratekit.near_limit{rule=enforced} 0
		ratekit.near_limit{rule=trial} 1
		ratekit.quota.utilization{rule=enforced} count=3 sum=0.06
		ratekit.quota.utilization{rule=trial} count=3 sum=3
	`, "ratekit.decisions", "ratekit.near_limit", "ratekit.quota.utilization")
}

// core.WithShadow puts every rule in shadow mode.
func TestWithShadow(t *testing.T) {
	o, reader := newObserver(t)
	l := memoryLimiter(t, adaptertest.NewClock(), o, core.WithShadow())
	if got := checkN(t, l, 5, rule("api", core.PerMinute(2), "user:1")); got != 5 {
		t.Errorf("%d of 5 allowed: shadow mode never denies", got)
	}
	expect(t, reader, decisionPoints("api", [6]int{2, 0, 3, 0, 0, 0}), "ratekit.decisions")
}

// Rules past the bound count under {other}, with their outcomes.
func TestMaxRules(t *testing.T) {
	o, reader := newObserver(t, otellimit.WithMaxRules(3))
	l := memoryLimiter(t, adaptertest.NewClock(), o)
	for i := range 10 {
		checkN(t, l, 2, rule("rule-"+strconv.Itoa(i), core.PerMinute(1), "user:1"))
	}
	got := points(t, reader, "ratekit.decisions")
	if n := strings.Count(got, "\n") + 1; n != 4*6 {
		t.Errorf("%d decision points, want 24: six for each of three rules and {other}:\n%s", n, got)
	}
	for _, want := range []string{
		"ratekit.decisions{degraded=false,outcome=allowed,rule=rule-0} 1",
		"ratekit.decisions{degraded=false,outcome=denied,rule=rule-2} 1",
		"ratekit.decisions{degraded=false,outcome=allowed,rule={other}} 7",
		"ratekit.decisions{degraded=false,outcome=denied,rule={other}} 7",
	} {
		if !hasLine(got, want) {
			t.Errorf("no %s in\n%s", want, got)
		}
	}
	if strings.Contains(got, "rule-3") {
		t.Errorf("rule-3, past the bound, has points of its own:\n%s", got)
	}
}

// Two thousand clients make no more streams than one, and no attribute
// holds an identity.
func TestAttributesBounded(t *testing.T) {
	o, reader := newObserver(t)
	l := memoryLimiter(t, adaptertest.NewClock(), o)
	per := func(i int) core.Rule { return rule("per-user", core.PerMinute(1), "user:"+strconv.Itoa(i)) }
	all := []string{"ratekit.decisions", "ratekit.near_limit", "ratekit.quota.utilization",
		"ratekit.denied_cache.hits", "ratekit.store.duration", "ratekit.store.errors", "ratekit.breaker.state"}
	checkN(t, l, 2, per(0))
	count := func() int { return strings.Count(points(t, reader, all...), "\n") + 1 }
	want := count()
	if want != 9+1+3 { // a rule's nine, successful store calls, the breaker's three
		t.Errorf("%d streams for one rule, want 13:\n%s", want, points(t, reader, all...))
	}
	const clients = 2_000
	denied := 0
	for i := 1; i <= clients; i++ {
		denied += 2 - checkN(t, l, 2, per(i))
	}
	if denied != clients {
		t.Errorf("%d denied, want %d", denied, clients)
	}
	if got := count(); got != want {
		t.Errorf("%d streams after %d clients, want %d as after one", got, clients, want)
	}
	if got := points(t, reader, all...); strings.Contains(got, "user:") {
		t.Errorf("an identity in the attributes:\n%s", got)
	}
}

// The default bound keeps ratekit.decisions within the SDK's default limit
// of 2000 streams an instrument, whatever the number of rules; past 332
// rules, the SDK folds the excess into one stream that has no rule.
func TestDefaultBoundFitsSDKLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []otellimit.Option
		streams  int
		overflow bool
	}{
		{"default", nil, (otellimit.DefaultMaxRules + 1) * 6, false},
		{"333 rules", []otellimit.Option{otellimit.WithMaxRules(333)}, 2000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, reader := newObserver(t, tc.opts...)
			for i := range 1000 {
				o.Decided(context.Background(), core.DecisionEvent{Rule: "rule-" + strconv.Itoa(i), Result: core.Result{Limit: core.PerMinute(1)}})
			}
			data, _ := collect(t, reader)["ratekit.decisions"].Data.(metricdata.Sum[int64])
			overflow := false
			for _, p := range data.DataPoints {
				overflow = overflow || p.Attributes.HasValue("otel.metric.overflow")
			}
			if len(data.DataPoints) != tc.streams || overflow != tc.overflow {
				t.Errorf("%d streams, overflow %t; want %d, %t", len(data.DataPoints), overflow, tc.streams, tc.overflow)
			}
		})
	}
}

// A rule name that is not UTF-8 makes a valid attribute value.
func TestRuleNameNotUTF8(t *testing.T) {
	o, reader := newObserver(t)
	o.Decided(context.Background(), core.DecisionEvent{Rule: "caf\xe9", Result: core.Result{Limit: core.PerMinute(2), Allowed: true, Remaining: 1}})
	if got, want := points(t, reader, "ratekit.quota.utilization"), "ratekit.quota.utilization{rule=caf\uFFFD} count=1 sum=0.5"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// WithNearLimit moves the threshold; the bucket options set the bounds.
func TestThresholdAndBuckets(t *testing.T) {
	o, reader := newObserver(t, otellimit.WithNearLimit(0.5),
		otellimit.WithUtilizationBuckets(.5, 1), otellimit.WithStoreBuckets(.001, .01))
	l := memoryLimiter(t, adaptertest.NewClock(), o)
	checkN(t, l, 5, rule("api", core.PerMinute(4), "user:1")) // .25 .5 .75 1 used, then a denial
	expect(t, reader, "ratekit.near_limit{rule=api} 3", "ratekit.near_limit")
	p := histogram(t, reader, "ratekit.quota.utilization", attribute.String("rule", "api"))
	if !slices.Equal(p.Bounds, []float64{.5, 1}) || !slices.Equal(p.BucketCounts, []uint64{2, 3, 0}) {
		t.Errorf("utilization buckets %v counts %v, want [0.5 1] and [2 3 0]", p.Bounds, p.BucketCounts)
	}
	o.StoreCalled(2*time.Millisecond, nil)
	p = histogram(t, reader, "ratekit.store.duration", attribute.String("result", "ok"))
	if !slices.Equal(p.Bounds, []float64{.001, .01}) || !slices.Equal(p.BucketCounts, []uint64{5, 1, 0}) {
		t.Errorf("store buckets %v counts %v, want [0.001 0.01] and [5 1 0]", p.Bounds, p.BucketCounts)
	}
}

// Two Limiters on one MeterProvider, their Observers set apart by a
// constant attribute: each breaker has its points.
func TestConstAttributes(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { provider.Shutdown(context.Background()) })
	for _, name := range []string{"a", "b"} {
		o, err := otellimit.New(otellimit.WithMeterProvider(provider),
			otellimit.WithConstAttributes(attribute.String("limiter", name), attribute.Int("shard", 1)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		l := memoryLimiter(t, adaptertest.NewClock(), o)
		checkN(t, l, len(name), rule("api", core.PerMinute(1), "user:1"))
	}
	expect(t, reader, `
		ratekit.denied_cache.hits{limiter=a,rule=api,shard=1} 0
		ratekit.denied_cache.hits{limiter=b,rule=api,shard=1} 0
		ratekit.breaker.state{limiter=a,shard=1,state=closed} 1
		ratekit.breaker.state{limiter=a,shard=1,state=half-open} 0
		ratekit.breaker.state{limiter=a,shard=1,state=open} 0
		ratekit.breaker.state{limiter=b,shard=1,state=closed} 1
		ratekit.breaker.state{limiter=b,shard=1,state=half-open} 0
		ratekit.breaker.state{limiter=b,shard=1,state=open} 0
		ratekit.store.duration{limiter=a,result=ok,shard=1} count=1 sum=0
		ratekit.store.duration{limiter=b,result=ok,shard=1} count=1 sum=0
	`, "ratekit.denied_cache.hits", "ratekit.breaker.state", "ratekit.store.duration")
}

// Without WithMeterProvider, the instruments are the global provider's.
func TestGlobalMeterProvider(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { provider.Shutdown(context.Background()) })
	previous := otel.GetMeterProvider()
	otel.SetMeterProvider(provider)
	t.Cleanup(func() { otel.SetMeterProvider(previous) })
	o, err := otellimit.New()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.StoreCalled(time.Second, core.ErrClosed)
	expect(t, reader, "ratekit.store.errors{kind=closed} 1", "ratekit.store.errors")
}

// Close unregisters the breaker's callback, once.
func TestClose(t *testing.T) {
	o, reader := newObserver(t)
	if got := points(t, reader, "ratekit.breaker.state"); strings.Count(got, "\n") != 2 {
		t.Fatalf("breaker points before Close:\n%s", got)
	}
	for range 2 {
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := points(t, reader, "ratekit.breaker.state"); got != "" {
		t.Errorf("breaker points after Close:\n%s", got)
	}
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  otellimit.Option
		want string // in the error; "" for none
	}{
		{"nil provider", otellimit.WithMeterProvider(nil), "nil MeterProvider"},
		{"noop provider", otellimit.WithMeterProvider(noop.NewMeterProvider()), ""},
		{"near limit 0", otellimit.WithNearLimit(0), "threshold 0 "},
		{"near limit 1.5", otellimit.WithNearLimit(1.5), "threshold 1.5 "},
		{"near limit NaN", otellimit.WithNearLimit(math.NaN()), "threshold NaN "},
		{"near limit 1", otellimit.WithNearLimit(1), ""},
		{"max rules 0", otellimit.WithMaxRules(0), "at most 0 rules"},
		{"max rules 1", otellimit.WithMaxRules(1), ""},
		{"store buckets none", otellimit.WithStoreBuckets(), "store buckets: none"},
		{"store buckets unsorted", otellimit.WithStoreBuckets(.1, .01), "strictly increasing"},
		{"store buckets repeated", otellimit.WithStoreBuckets(.1, .1), "strictly increasing"},
		{"store buckets infinite", otellimit.WithStoreBuckets(.1, math.Inf(1)), "not a finite"},
		{"utilization buckets", otellimit.WithUtilizationBuckets(.5, 1), ""},
		{"utilization buckets NaN", otellimit.WithUtilizationBuckets(math.NaN()), "utilization buckets"},
		{"const rule", otellimit.WithConstAttributes(attribute.String("rule", "x")), `"rule": the instruments' own`},
		{"const state", otellimit.WithConstAttributes(attribute.Bool("state", true)), `"state"`},
		{"const empty key", otellimit.WithConstAttributes(attribute.String("", "x")), "empty key"},
		{"const empty value", otellimit.WithConstAttributes(attribute.KeyValue{Key: "x"}), ""},
		{"const twice", otellimit.WithConstAttributes(attribute.String("x", "1"), attribute.Int("x", 2)), "given twice"},
		{"const value", otellimit.WithConstAttributes(attribute.String("x", "\xff")), "value is not UTF-8"},
		{"const key", otellimit.WithConstAttributes(attribute.String("\xff", "x")), "key is not UTF-8"},
		{"const", otellimit.WithConstAttributes(attribute.String("limiter", "api")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := otellimit.New(tc.opt)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("New: %v, want an error mentioning %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o.Decided(context.Background(), core.DecisionEvent{Rule: "r", Result: core.Result{Limit: core.PerMinute(1)}})
			o.Close()
		})
	}
}

// Decided allocates nothing once the rule has been seen, past the bound
// too, nor does StoreCalled for a call that succeeded.
func TestNoAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	o, _ := newObserver(t, otellimit.WithMaxRules(1))
	ctx := context.Background()
	seen := core.DecisionEvent{Rule: "api", Result: core.Result{Limit: core.PerMinute(10), Allowed: true, Remaining: 1}, Cached: true}
	other := core.DecisionEvent{Rule: "login", Result: core.Result{Limit: core.PerMinute(10), Degraded: true}, Shadow: true}
	o.Decided(ctx, seen)
	o.Decided(ctx, other)
	if n := testing.AllocsPerRun(1000, func() {
		o.Decided(ctx, seen)
		o.Decided(ctx, other)
		o.StoreCalled(time.Millisecond, nil)
	}); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}

// Eight goroutines deciding over twice as many rules as the bound while
// the reader collects: run with -race. Every decision is counted once,
// under its rule or {other}.
func TestConcurrent(t *testing.T) {
	o, reader := newObserver(t, otellimit.WithMaxRules(8))
	l := memoryLimiter(t, adaptertest.NewClock(), o)
	var rules [16]core.Rule
	for i := range rules {
		rules[i] = rule("rule-"+strconv.Itoa(i), core.PerMinute(50), "user:1")
	}
	const workers, each = 8, 200
	var deciding sync.WaitGroup
	for w := range workers {
		deciding.Go(func() {
			for i := range each {
				checkN(t, l, 1, rules[(w*5+i)%len(rules)])
			}
		})
	}
	done := make(chan struct{})
	go func() {
		deciding.Wait()
		close(done)
	}()
	for collecting := true; collecting; {
		select {
		case <-done:
			collecting = false
		default:
			collect(t, reader)
		}
	}
	data, _ := collect(t, reader)["ratekit.decisions"].Data.(metricdata.Sum[int64])
	byRule := map[string]int64{}
	for _, p := range data.DataPoints {
		v, _ := p.Attributes.Value("rule")
		byRule[v.AsString()] += p.Value
	}
	var total int64
	for _, n := range byRule {
		total += n
	}
	if _, ok := byRule[otellimit.OtherRule]; len(byRule) != 9 || !ok {
		t.Errorf("decisions by rule %v, want 8 rules and %s", byRule, otellimit.OtherRule)
	}
	if total != workers*each {
		t.Errorf("%d decisions, want %d", total, workers*each)
	}
}

// hasLine reports whether line is one of the lines of text.
func hasLine(text, line string) bool {
	return slices.Contains(strings.Split(text, "\n"), line)
}
