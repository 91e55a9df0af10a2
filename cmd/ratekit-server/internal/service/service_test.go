package service_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/compat"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/service"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/stats"
	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/redisstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	svc *service.Service
	mr  *miniredis.Miniredis
	rdb *redis.Client
}

func newFixture(t testing.TB, yaml string, opts service.Options) *fixture {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	cs, err := compat.New(rdb, compat.Options{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := redisstore.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := core.NewLimiter(cs, core.WithPrefix(""), core.WithDeniedCache(0), core.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	nl, err := core.NewLimiter(ns, core.WithPrefix(""), core.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cl.Close()
		nl.Close()
		cs.Close()
		ns.Close()
		rdb.Close()
	})
	svc := service.New(cl, nl, stats.New(), opts)
	c, _, err := config.Load([]config.File{{Name: "t.yaml", Data: []byte(yaml)}}, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc.SetConfig(c)
	return &fixture{svc: svc, mr: mr, rdb: rdb}
}

func desc(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (f *fixture) call(t *testing.T, ds ...*rlv3.RateLimitDescriptor) *rlspb.RateLimitResponse {
	t.Helper()
	r, err := f.svc.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "d", Descriptors: ds})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSeveralLimitsAllOrNothing: a descriptor of 3 per second and 5 per
// hour (GCRA) lets 3 through, and the fourth, denied by the per-second
// limit, spends nothing of the hourly one.
func TestSeveralLimitsAllOrNothing(t *testing.T) {
	f := newFixture(t, `
domain: d
descriptors:
  - key: u
    rate_limit: {unit: second, requests_per_unit: 3, algorithm: gcra}
    limits: [{unit: hour, requests_per_unit: 5}]
`, service.Options{})
	for i := range 4 {
		r := f.call(t, desc("u", "1"))
		want := rlspb.RateLimitResponse_OK
		if i == 3 {
			want = rlspb.RateLimitResponse_OVER_LIMIT
		}
		if r.OverallCode != want {
			t.Fatalf("request %d: %v, want %v", i, r.OverallCode, want)
		}
	}
	qs, err := f.svc.Peek(context.Background(), "d", desc("u", "1").Entries)
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) != 2 || qs[1].Remaining != 2 {
		t.Fatalf("hourly limit after 3 allowed and 1 denied: %+v; want 2 remaining", qs)
	}
	if err := f.svc.Reset(context.Background(), "d", desc("u", "1").Entries); err != nil {
		t.Fatal(err)
	}
	if r := f.call(t, desc("u", "1")); r.OverallCode != rlspb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("after a reset: %v", r)
	}
}

// TestHostileDescriptors: braces, control bytes and long values never
// reach a key's hash tag as they are, and too many entries or
// descriptors are refused.
func TestHostileDescriptors(t *testing.T) {
	f := newFixture(t, `
domain: d
descriptors:
  - key: v
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: g
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: gcra}
`, service.Options{})
	for _, v := range []string{"}{x", "{a}", "a}b{c", "\x00\x01\r\n", strings.Repeat("x", 64<<10), "#fake", "a|b=c\\"} {
		f.call(t, desc("v", v), desc("g", v))
	}
	for _, k := range f.mr.Keys() {
		open, close := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
		if open < 0 || close < open || strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || close != len(k)-1 {
			t.Errorf("key %q: its hash tag is not one {...} at its end", k)
		}
		tag := k[open+1 : close]
		if strings.ContainsAny(tag, "\x00\r\n") || len(tag) > 128 {
			t.Errorf("key %q keeps a hostile identity", k)
		}
	}
	huge := &rlv3.RateLimitDescriptor{}
	for range 10_000 {
		huge.Entries = append(huge.Entries, &rlv3.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
	}
	many := make([]*rlv3.RateLimitDescriptor, 10_000)
	for i := range many {
		many[i] = desc("v", "x")
	}
	for _, r := range []*rlspb.RateLimitRequest{
		{Domain: "d", Descriptors: []*rlv3.RateLimitDescriptor{huge}},
		{Domain: "d", Descriptors: many},
		{Domain: "d", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: desc("v", "x").Entries, Limit: &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}}}},
	} {
		if _, err := f.svc.ShouldRateLimit(context.Background(), r); !errors.Is(err, service.ErrBadRequest) {
			t.Errorf("a hostile request answered %v, want ErrBadRequest", err)
		}
	}
}

// TestLookSpendsNothing: hits_addend 0 reports without counting.
func TestLookSpendsNothing(t *testing.T) {
	f := newFixture(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n", service.Options{})
	look := desc("k", "1")
	look.HitsAddend = nil
	zero := desc("k", "1")
	zero.HitsAddend = wrap(0)
	for range 3 {
		if r := f.call(t, zero); r.Statuses[0].LimitRemaining != 2 {
			t.Fatalf("a look: %v", r)
		}
	}
	f.call(t, look)
	f.call(t, look)
	if r := f.call(t, zero); r.OverallCode != rlspb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("a look at a full count: %v, want OK with 0 left (as envoy)", r)
	}
	f.call(t, look)
	if r := f.call(t, zero); r.OverallCode != rlspb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("a look past the limit: %v, want OVER_LIMIT", r)
	}
}

func wrap(n uint64) *wrapperspb.UInt64Value { return wrapperspb.UInt64(n) }

// TestCallerLimits: a descriptor's own limit is counted by it, refused,
// or ignored in favour of the files' rule, as the options say; one of a
// unit past CallerMaxUnit is refused.
func TestCallerLimits(t *testing.T) {
	const yaml = "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
	own := func(unit rlspb.RateLimitResponse_RateLimit_Unit) *rlv3.RateLimitDescriptor {
		d := desc("k", "1")
		d.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 7, Unit: typev3.RateLimitUnit(unit)}
		return d
	}
	hour, day := rlspb.RateLimitResponse_RateLimit_HOUR, rlspb.RateLimitResponse_RateLimit_DAY
	for _, c := range []struct {
		name  string
		opts  service.Options
		unit  rlspb.RateLimitResponse_RateLimit_Unit
		limit uint32 // 0: refused
	}{
		{"accept", service.Options{}, day, 7},
		{"accept up to an hour", service.Options{CallerMaxUnit: hour}, hour, 7},
		{"a day past an hour", service.Options{CallerMaxUnit: hour}, day, 0},
		{"refuse", service.Options{CallerLimits: service.RefuseCallerLimits}, hour, 0},
		{"ignore", service.Options{CallerLimits: service.IgnoreCallerLimits, CallerMaxUnit: hour}, day, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, yaml, c.opts)
			r, err := f.svc.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*rlv3.RateLimitDescriptor{own(c.unit)}})
			if c.limit == 0 {
				if !errors.Is(err, service.ErrBadRequest) {
					t.Fatalf("answered %v, %v; want ErrBadRequest", r, err)
				}
				return
			}
			if err != nil || r.Statuses[0].GetCurrentLimit().GetRequestsPerUnit() != c.limit {
				t.Fatalf("answered %v, %v; want a limit of %d", r, err, c.limit)
			}
		})
	}
}

// watched records what Options.Watch is told.
type watched struct {
	mu     sync.Mutex
	events []string
}

func (w *watched) Decided(context.Context, core.DecisionEvent)         {}
func (w *watched) StoreCalled(time.Duration, error)                    {}
func (w *watched) BreakerChanged(core.BreakerState, core.BreakerState) {}
func (w *watched) DecidedIdentity(_ context.Context, e core.DecisionEvent, id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, fmt.Sprintf("%s %s allowed=%v shadow=%v", e.Rule, id, e.Allowed, e.Shadow))
}

// TestWatch: each descriptor's decision goes to the Watch observer of its
// counting, named by its configured rule (a descriptor's own limit by its
// domain and OwnLimit, whatever its values) with the descriptor as the
// identity, the shadow rule's denial as a shadow one; a look is no
// decision and is not told.
func TestWatch(t *testing.T) {
	var compatW, nativeW watched
	f := newFixture(t, `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: s
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: g
    rate_limit: {unit: minute, requests_per_unit: 1, algorithm: gcra}
`, service.Options{Watch: [2]core.IdentityObserver{&compatW, &nativeW}})
	own := desc("x", "v")
	own.Limit = &rlv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: typev3.RateLimitUnit_MINUTE}
	look := desc("k", "a")
	look.HitsAddend = wrap(0)
	for range 2 {
		f.call(t, desc("k", "a"), desc("s", "b"), own)
		f.call(t, desc("g", "c"))
		f.call(t, look)
	}
	slices.Sort(compatW.events)
	want := []string{
		"d.(own limit) d|x=v allowed=true shadow=false", "d.(own limit) d|x=v allowed=true shadow=false",
		"d.k d|k=a allowed=false shadow=false", "d.k d|k=a allowed=true shadow=false",
		"d.s d|s=b allowed=false shadow=true", "d.s d|s=b allowed=true shadow=true",
	}
	if !slices.Equal(compatW.events, want) {
		t.Errorf("envoy-counted descriptors told:\n%s\nwant\n%s", strings.Join(compatW.events, "\n"), strings.Join(want, "\n"))
	}
	if want := []string{"d.g d|g=c allowed=true shadow=false", "d.g d|g=c allowed=false shadow=false"}; !slices.Equal(nativeW.events, want) {
		t.Errorf("ratekit's descriptors told %q, want %q", nativeW.events, want)
	}
}
