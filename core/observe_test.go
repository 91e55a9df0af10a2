package core_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/internal/observe"
	"github.com/ratekit/ratekit/internal/testkit"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu       sync.Mutex
	events   []core.DecisionEvent
	calls    []error
	breakers [][2]core.BreakerState
}

func (r *recorder) Decided(_ context.Context, e core.DecisionEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) StoreCalled(d time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, err)
}

func (r *recorder) BreakerChanged(from, to core.BreakerState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.breakers = append(r.breakers, [2]core.BreakerState{from, to})
}

// verdicts counts events by rule and verdict, as "rule/verdict".
func (r *recorder) verdicts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]int{}
	for _, e := range r.events {
		m[e.Rule+"/"+string(observe.Verdict(e))]++
	}
	return m
}

func TestShadowRuleNeverDenies(t *testing.T) {
	rec := &recorder{}
	l := newLimiter(t, testkit.MustMemory(), core.WithObserver(rec))
	shadow := rule("new", core.PerMinute(2), "user:1")
	shadow.Shadow = true
	enforced := rule("default", core.PerMinute(5), "user:1")
	allowed := 0
	for i := range 8 {
		d, err := check(t, l, enforced, shadow)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			allowed++
		}
		if i >= 5 {
			// the enforced rule denies, which stops the check before the
			// shadow rule is decided
			if len(d.Results) != 1 || d.Results[0].Rule != "default" || d.Allowed || shadowDenied(d) {
				t.Fatalf("request %d: %+v", i, d)
			}
			if h := adapter.NewHeaders(d, adapter.HeadersBoth, 0); h.Get(adapter.HeaderRetryAfter) == "" {
				t.Fatalf("request %d: denied without Retry-After", i)
			}
			continue
		}
		sh := d.Results[1]
		if !sh.Shadow || d.Results[0].Shadow {
			t.Fatalf("request %d: shadow flags %v, %v", i, d.Results[0].Shadow, sh.Shadow)
		}
		// the shadow rule is spent and decided as if alone: 2 allowed, then
		// denials, while the enforced rule counts every request it admits
		if want := i < 2; sh.Allowed != want {
			t.Fatalf("request %d: shadow rule allowed %v, want %v", i, sh.Allowed, want)
		}
		if shadowDenied(d) != (i >= 2) {
			t.Fatalf("request %d: ShadowDenied %v", i, shadowDenied(d))
		}
		h := adapter.NewHeaders(d, adapter.HeadersBoth, 0)
		if i >= 2 {
			// the shadow denial drives the headers, as it would if enforced,
			// but without Retry-After: the request is not denied
			if got := h.Get(adapter.HeaderRemaining); got != "0" {
				t.Fatalf("request %d: X-RateLimit-Remaining %q, want 0", i, got)
			}
			if got := h.Get(adapter.HeaderRetryAfter); got != "" {
				t.Fatalf("request %d: Retry-After %q on an allowed request", i, got)
			}
		}
	}
	if allowed != 5 {
		t.Fatalf("%d of 8 allowed, want exactly the enforced rule's 5", allowed)
	}
	want := map[string]int{"default/allowed": 5, "default/denied": 3, "new/allowed": 2, "new/shadow_denied": 3}
	if got := rec.verdicts(); fmt.Sprint(got) != fmt.Sprint(want) {
		// requests 5-7 stop at the enforced rule's denial, before the
		// shadow rule is decided
		t.Fatalf("verdicts %v, want %v", got, want)
	}
}

func TestWithShadowDeniesNothing(t *testing.T) {
	for _, policy := range []core.FailurePolicy{core.FailLocal, core.FailOpen, core.FailClosed} {
		t.Run(policy.String(), func(t *testing.T) {
			store := newFakeStore(t, modeOK)
			rec := &recorder{}
			l := newLimiter(t, store, core.WithShadow(), core.WithFailurePolicy(policy), core.WithObserver(rec), core.WithBreaker(core.BreakerConfig{Failures: 1000, Backoff: 0, MaxBackoff: 0}))
			r := rule("default", core.PerMinute(1), "user:1")
			for i := range 5 {
				if i == 3 {
					store.mode.Store(modeFail)
				}
				d, err := check(t, l, r)
				if err != nil || !d.Allowed {
					t.Fatalf("request %d: allowed %v, error %v; shadow mode must deny nothing", i, d.Allowed, err)
				}
				if got := d.Results[0]; !got.Shadow {
					t.Fatalf("request %d: result not marked shadow", i)
				}
			}
			v := rec.verdicts()
			if v["default/allowed"]+v["default/shadow_denied"] != 5 || v["default/shadow_denied"] < 2 || v["default/denied"] != 0 {
				t.Fatalf("verdicts %v", v)
			}
		})
	}
}

func TestObserverEvents(t *testing.T) {
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { client.Close() })
	rec := &recorder{}
	// a generous deadline: a loaded machine must not turn a call into an outage
	l := newLimiter(t, testkit.MustRedis(client), core.WithObserver(rec), core.WithObserver(nopObserver{}), core.WithTimeout(10*time.Second))
	r := rule("login", core.PerHour(2), "user:1")
	for range 4 {
		if _, err := check(t, l, r); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	events, calls := rec.events, rec.calls
	rec.mu.Unlock()
	if len(events) != 4 {
		t.Fatalf("%d events, want 4", len(events))
	}
	for i, e := range events {
		wantAllowed := i < 2
		// the first denial comes from Redis; the second from the
		// denied-key cache, without a store call
		wantCached := i == 3
		if e.Rule != "login" || e.Allowed != wantAllowed || e.Cached != wantCached || e.Shadow || e.Degraded {
			t.Errorf("event %d: %+v", i, e)
		}
	}
	if e := events[1]; e.Remaining != 0 || observe.Used(e.Result) != 1 {
		t.Errorf("second event: remaining %d, used %v; want 0 and 1", e.Remaining, observe.Used(e.Result))
	}
	if e := events[0]; observe.Used(e.Result) != 0.5 {
		t.Errorf("first event: used %v, want 0.5", observe.Used(e.Result))
	}
	if len(calls) != 3 {
		t.Fatalf("%d store calls observed, want 3 (the cached denial makes none)", len(calls))
	}
	for _, err := range calls {
		if err != nil {
			t.Fatalf("store call error %v", err)
		}
	}
}

func TestObserverStoreErrorsAndBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxBackoff = 5 * time.Millisecond
		store := newFakeStore(t, modeFail)
		rec := &recorder{}
		l := newLimiter(t, store, core.WithObserver(rec), core.WithBreaker(core.BreakerConfig{Failures: 2, Backoff: time.Millisecond, MaxBackoff: maxBackoff}))
		r := rule("default", core.PerMinute(100), "user:1")
		for range 2 {
			d, err := check(t, l, r)
			if err != nil || !d.Allowed || !d.Degraded() {
				t.Fatalf("want a degraded local decision, got %+v, %v", d, err)
			}
		}
		store.mode.Store(modeOK)
		time.Sleep(maxBackoff) // the first probe closes the breaker
		synctest.Wait()
		if got := l.BreakerState(); got != core.BreakerClosed {
			t.Fatalf("breaker %v %v after the store came back, want closed", got, maxBackoff)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		failed := 0
		for _, err := range rec.calls {
			if err != nil {
				failed++
				if !errors.Is(err, errDown) || observe.ErrorKind(err) != observe.ErrorKindOther {
					t.Errorf("store error %v of kind %q", err, observe.ErrorKind(err))
				}
			}
		}
		// the two requests failed; the probe, made once the store was back,
		// did not
		if len(rec.calls) != 3 || failed != 2 {
			t.Errorf("%d store calls observed, %d failed; want 3, of which the 2 requests' failed", len(rec.calls), failed)
		}
		want := [][2]core.BreakerState{{core.BreakerClosed, core.BreakerOpen}, {core.BreakerOpen, core.BreakerHalfOpen}, {core.BreakerHalfOpen, core.BreakerClosed}}
		if !slices.Equal(rec.breakers, want) {
			t.Errorf("breaker changes %v, want %v", rec.breakers, want)
		}
		for _, e := range rec.events {
			if !e.Degraded || observe.Verdict(e) != observe.VerdictAllowed {
				t.Errorf("event %+v, want degraded and allowed", e)
			}
		}
	})
}

func TestDebugLogRedactsIdentities(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := newLimiter(t, testkit.MustMemory(), core.WithLogger(logger))
	secret := "user:alice@example.com"
	r := rule("default", core.PerMinute(1), secret)
	for range 2 {
		if _, err := check(t, l, r); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	if strings.Contains(out, "alice") {
		t.Fatalf("the log holds the identity:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per decision:\n%s", len(lines), out)
	}
	red := core.Redact(secret)
	if !strings.HasPrefix(red, "user:") || len(red) != len("user:")+12 {
		t.Fatalf("redacted form %q", red)
	}
	for i, verdict := range []string{"allowed", "denied"} {
		for _, want := range []string{"level=DEBUG", `msg="ratekit: decision"`, "rule=default", "identity=" + red, "verdict=" + verdict} {
			if !strings.Contains(lines[i], want) {
				t.Errorf("line %d lacks %q: %s", i, want, lines[i])
			}
		}
	}
	if core.Redact("user:bob") == red {
		t.Error("two identities redact alike")
	}
	if got := core.Redact("no kind here"); strings.Contains(got, ":") || len(got) != 12 {
		t.Errorf("identity without a kind redacts to %q", got)
	}

	// at Info, nothing is logged for decisions
	var info syncBuffer
	l2 := newLimiter(t, testkit.MustMemory(), core.WithLogger(slog.New(slog.NewTextHandler(&info, nil))))
	if _, err := check(t, l2, r); err != nil {
		t.Fatal(err)
	}
	if info.Len() != 0 {
		t.Fatalf("decisions logged at Info: %s", info.String())
	}
}

func TestWithObserverNil(t *testing.T) {
	if _, err := core.NewLimiter(testkit.MustMemory(), core.WithObserver(nil)); err == nil {
		t.Fatal("WithObserver(nil) accepted")
	}
}

func TestEnforcedDenialOutranksShadow(t *testing.T) {
	l := newLimiter(t, testkit.MustMemory())
	shadow := rule("trial", core.PerHour(1), "user:1")
	shadow.Shadow = true
	enforced := rule("default", core.PerMinute(1), "ip:192.0.2.1")
	for range 2 {
		if _, err := check(t, l, shadow, enforced); err != nil {
			t.Fatal(err)
		}
	}
	d, err := check(t, l, shadow, enforced)
	if err != nil {
		t.Fatal(err)
	}
	if d.Allowed || !shadowDenied(d) || len(d.Results) != 2 {
		t.Fatalf("decision %+v", d)
	}
	// the shadow rule waits an hour, the enforced one a minute: Retry-After
	// must tell the enforced rule's wait
	lim := d.Results[d.Limiting]
	h := adapter.NewHeaders(d, adapter.HeadersLegacy, 0)
	if retry, err := strconv.Atoi(h.Get(adapter.HeaderRetryAfter)); lim.Rule != "default" || err != nil || retry < 1 || retry > 60 {
		t.Fatalf("limiting %q, Retry-After %q", lim.Rule, h.Get(adapter.HeaderRetryAfter))
	}
}

// shadowDenied reports whether a rule in shadow mode would have denied the
// request.
func shadowDenied(d core.Decision) bool {
	for _, r := range d.Results {
		if r.Shadow && !r.Allowed {
			return true
		}
	}
	return false
}

// nopObserver is an observer that does nothing.
type nopObserver struct{}

func (nopObserver) Decided(context.Context, core.DecisionEvent)         {}
func (nopObserver) StoreCalled(time.Duration, error)                    {}
func (nopObserver) BreakerChanged(core.BreakerState, core.BreakerState) {}
