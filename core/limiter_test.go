package core_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/memorystore"
)

// errDown is the error of a fakeStore that fails.
var errDown = errors.New("fake store: connection refused")

// Modes of a fakeStore.
const (
	modeOK    = iota // answer from a memorystore.Store
	modeFail         // fail at once with errDown
	modeHang         // block until released, ignoring the context, as a go-redis client without ContextTimeoutEnabled does against a stopped server
	modeStall        // block until the context ends, as a client with ContextTimeoutEnabled does
	modePanic        // panic
)

// requestKey marks the contexts of the test's own Check calls, so that a
// fakeStore tells them from the breaker's probes.
type requestKey struct{}

// fakeStore is a Store whose behaviour a test switches while it runs.
type fakeStore struct {
	mem     *memorystore.Store
	mode    atomic.Int32
	release chan struct{} // closed to end every modeHang call

	requests    atomic.Int64 // calls from the test's Checks
	probes      atomic.Int64 // calls from the breaker
	inflight    atomic.Int64
	maxInflight atomic.Int64
}

func newFakeStore(t *testing.T, mode int32) *fakeStore {
	s := &fakeStore{mem: testkit.MustMemory(), release: make(chan struct{})}
	s.mode.Store(mode)
	t.Cleanup(func() { s.mem.Close() })
	return s
}

// unblock ends every modeHang call, past and future.
func (s *fakeStore) unblock() {
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

func (s *fakeStore) AllowN(ctx context.Context, key string, limit core.Limit, n int) (core.Result, error) {
	res, err := s.AllowAllN(ctx, []core.Check{{Key: key, Limit: limit}}, n)
	if err != nil {
		return core.Result{}, err
	}
	return res[0], nil
}

func (s *fakeStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	if ctx.Value(requestKey{}) != nil {
		s.requests.Add(1)
	} else {
		s.probes.Add(1)
	}
	in := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		m := s.maxInflight.Load()
		if in <= m || s.maxInflight.CompareAndSwap(m, in) {
			break
		}
	}
	switch s.mode.Load() {
	case modeFail:
		return nil, errDown
	case modeHang:
		<-s.release
		return nil, errDown
	case modeStall:
		<-ctx.Done()
		return nil, ctx.Err()
	case modePanic:
		panic("fake store: boom")
	}
	return s.mem.AllowAllN(ctx, checks, n)
}

// staticRequest is a core.Request that carries only its context.
type staticRequest struct{ ctx context.Context }

func (r staticRequest) Context() context.Context   { return r.ctx }
func (staticRequest) Method() string               { return "GET" }
func (staticRequest) Path() string                 { return "/" }
func (staticRequest) Route() string                { return "/" }
func (staticRequest) Header(string) string         { return "" }
func (staticRequest) HeaderValues(string) []string { return nil }
func (staticRequest) Query(string) string          { return "" }
func (staticRequest) RemoteAddr() string           { return "192.0.2.1:1234" }

// requestCtx returns a context marked as a test request.
func requestCtx() context.Context {
	return context.WithValue(context.Background(), requestKey{}, true)
}

// rule returns a rule named name that limits the identity id by limit.
func rule(name string, limit core.Limit, id string) core.Rule {
	return core.Rule{Name: name, Limit: limit, Key: func(core.Request) (string, error) { return id, nil }}
}

// newLimiter returns a Limiter over store, closed when the test ends.
func newLimiter(t *testing.T, store core.Store, opts ...core.Option) *core.Limiter {
	t.Helper()
	l, err := core.NewLimiter(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// check runs one Check of rules with a request context.
func check(t *testing.T, l *core.Limiter, rules ...core.Rule) (core.Decision, error) {
	t.Helper()
	ctx := requestCtx()
	return l.Check(ctx, staticRequest{ctx}, rules)
}

func TestFailurePolicies(t *testing.T) {
	limit := core.PerMinute(100)
	tests := []struct {
		policy      core.FailurePolicy
		wantAllowed bool
		wantErr     bool
	}{
		{core.FailLocal, true, false},
		{core.FailOpen, true, false},
		{core.FailClosed, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.policy.String(), func(t *testing.T) {
			for _, mode := range []int32{modeFail, modeStall} {
				synctest.Test(t, func(t *testing.T) { // modeStall waits for the deadline
					store := newFakeStore(t, mode)
					l := newLimiter(t, store, core.WithFailurePolicy(tt.policy), core.WithTimeout(20*time.Millisecond))
					d, err := check(t, l, rule("a", limit, "user:1"), rule("b", limit.WithAlgorithm(core.FixedWindow), "user:1"))
					if gotErr := err != nil; gotErr != tt.wantErr {
						t.Fatalf("mode %d: err %v, want error %v", mode, err, tt.wantErr)
					}
					if tt.wantErr {
						if !errors.Is(err, core.ErrUnavailable) {
							t.Errorf("mode %d: err %v does not wrap ErrUnavailable", mode, err)
						}
						wantCause := error(errDown)
						if mode == modeStall {
							wantCause = context.DeadlineExceeded
						}
						if !errors.Is(err, wantCause) {
							t.Errorf("mode %d: err %v does not wrap the store's error %v", mode, err, wantCause)
						}
					}
					if d.Allowed != tt.wantAllowed {
						t.Errorf("mode %d: Allowed %v, want %v", mode, d.Allowed, tt.wantAllowed)
					}
					if len(d.Results) != 2 || !d.Degraded() {
						t.Fatalf("mode %d: results %+v, want 2, degraded", mode, d.Results)
					}
					for _, r := range d.Results {
						if !r.Degraded || r.Allowed != tt.wantAllowed {
							t.Errorf("mode %d: result %+v, want degraded, allowed %v", mode, r, tt.wantAllowed)
						}
						if !tt.wantAllowed && r.RetryAfter < time.Second {
							t.Errorf("mode %d: fail-closed RetryAfter %v, want at least 1s", mode, r.RetryAfter)
						}
					}
				})
			}
		})
	}
}

func TestFailClosedWhileBreakerOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFakeStore(t, modeFail)
		l := newLimiter(t, store, core.WithFailurePolicy(core.FailClosed), core.WithBreaker(core.BreakerConfig{Failures: 2, Backoff: time.Minute, MaxBackoff: time.Minute}))
		r := rule("a", core.PerMinute(10), "user:1")
		for range 2 {
			check(t, l, r)
		}
		if got := l.BreakerState(); got != core.BreakerOpen {
			t.Fatalf("breaker %v after 2 failures, want open", got)
		}
		synctest.Wait() // the prober has drawn its wait
		before := store.requests.Load()
		d, err := check(t, l, r)
		if got := store.requests.Load(); got != before {
			t.Errorf("%d store calls while the breaker is open, want none", got-before)
		}
		for _, target := range []error{core.ErrUnavailable, core.ErrBreakerOpen, errDown} {
			if !errors.Is(err, target) {
				t.Errorf("err %v does not wrap %v", err, target)
			}
		}
		if d.Allowed || len(d.Results) != 1 || !d.Results[0].Degraded {
			t.Fatalf("decision %+v, want one degraded denial", d)
		}
		// Retry-After is the time until the next probe: at least a second,
		// at most MaxBackoff, and the probe comes exactly then
		retry := d.Results[0].RetryAfter
		if retry < time.Second || retry > time.Minute {
			t.Fatalf("RetryAfter %v, want the time until the next probe (1s to 1m)", retry)
		}
		probes := store.probes.Load()
		time.Sleep(retry - time.Nanosecond)
		synctest.Wait()
		if got := store.probes.Load(); got != probes {
			t.Errorf("%d probes before the RetryAfter of %v was over, want none", got-probes, retry)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := store.probes.Load(); got != probes+1 {
			t.Errorf("%d probes at the end of the RetryAfter of %v, want 1", got-probes, retry)
		}
	})
}

func TestFailLocalEnforcesLimit(t *testing.T) {
	tests := []struct {
		replicas  int
		limit     core.Limit
		wantAllow int
	}{
		{1, core.PerMinute(10), 10},
		{3, core.PerMinute(10), 4}, // 10/3 rounded up
		{2, core.PerMinute(5), 3},  // docs/failure.md's examples: 5/2 → 3
		{2, core.PerMinute(3), 2},  // and 3/2 → 2
		{3, core.PerMinute(10).WithAlgorithm(core.SlidingWindowLog), 4},
		{20, core.PerMinute(10), 1}, // at least one
	}
	for _, tt := range tests {
		store := newFakeStore(t, modeFail)
		l := newLimiter(t, store, core.WithReplicas(tt.replicas))
		r := rule("a", tt.limit, "user:1")
		allowed := 0
		for range 15 {
			d, err := check(t, l, r)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Degraded() {
				t.Fatalf("replicas %d: decision %+v not degraded", tt.replicas, d)
			}
			if d.Allowed {
				allowed++
			}
			if got := d.Results[0].Limit.Rate; got != tt.wantAllow {
				t.Errorf("replicas %d: local limit rate %d, want %d", tt.replicas, got, tt.wantAllow)
			}
		}
		if allowed != tt.wantAllow {
			t.Errorf("replicas %d, %v: %d allowed locally, want %d", tt.replicas, tt.limit, allowed, tt.wantAllow)
		}
	}
}

func TestDeadlineAgainstHangingStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 30 * time.Millisecond
		store := newFakeStore(t, modeHang)
		l := newLimiter(t, store, core.WithTimeout(timeout), core.WithBreaker(core.BreakerConfig{Failures: 1000, Backoff: 0, MaxBackoff: 0}))
		t.Cleanup(store.unblock) // before Close, should the test stop early
		r := rule("a", core.PerMinute(10), "user:1")
		type answer struct {
			d    core.Decision
			err  error
			took time.Duration
		}
		for range 3 {
			// Check runs apart, so that a Check that misses its deadline
			// fails the test rather than hangs it
			done := make(chan answer, 1)
			go func() {
				start := time.Now()
				d, err := check(t, l, r)
				done <- answer{d, err, time.Since(start)}
			}()
			time.Sleep(timeout)
			synctest.Wait()
			var a answer
			select {
			case a = <-done:
			default:
				t.Fatalf("Check still waiting at its deadline of %v, against a store that never answers", timeout)
			}
			if a.took != timeout {
				t.Errorf("Check took %v against a store that never answers, want the deadline %v", a.took, timeout)
			}
			if a.err != nil || !a.d.Allowed || !a.d.Degraded() {
				t.Errorf("decision %+v, %v: want allowed locally", a.d, a.err)
			}
		}
		if got := store.inflight.Load(); got != 3 {
			t.Fatalf("%d store calls running after 3 deadlines, want the 3 abandoned ones", got)
		}
		// Close waits for the abandoned calls, which end when the client gives up
		closed := make(chan struct{})
		go func() { l.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned while store calls were still running")
		default:
		}
		store.unblock()
		<-closed
		if got := store.inflight.Load(); got != 0 {
			t.Errorf("%d store calls still running after Close, want 0", got)
		}
	})
}

func TestCallerContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFakeStore(t, modeStall)
		l := newLimiter(t, store, core.WithBreaker(core.BreakerConfig{Failures: 1, Backoff: 0, MaxBackoff: 0}))
		ctx, cancel := context.WithCancel(requestCtx())
		cancel()
		if _, err := l.Check(ctx, staticRequest{ctx}, []core.Rule{rule("a", core.PerMinute(10), "user:1")}); !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want one wrapping context.Canceled", err)
		}
		// the caller gives up within the store's deadline: Check returns then
		const giveUp = 5 * time.Millisecond
		ctx, cancel = context.WithCancel(requestCtx())
		time.AfterFunc(giveUp, cancel)
		start := time.Now()
		if _, err := l.Check(ctx, staticRequest{ctx}, []core.Rule{rule("a", core.PerMinute(10), "user:1")}); !errors.Is(err, context.Canceled) {
			t.Errorf("err %v, want one wrapping context.Canceled", err)
		}
		if took := time.Since(start); took != giveUp {
			t.Errorf("Check took %v, want %v, when the caller gave up", took, giveUp)
		}
		if got := l.BreakerState(); got != core.BreakerClosed {
			t.Errorf("breaker %v after callers gave up, want closed: giving up is no store failure", got)
		}
	})
}

func TestStorePanicIsAFailure(t *testing.T) {
	store := newFakeStore(t, modePanic)
	var seen atomic.Value
	l := newLimiter(t, store, core.OnError(func(err error) { seen.Store(err) }))
	d, err := check(t, l, rule("a", core.PerMinute(10), "user:1"))
	if err != nil || !d.Allowed || !d.Degraded() {
		t.Errorf("decision %+v, %v: want allowed locally", d, err)
	}
	if err, _ := seen.Load().(error); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("OnError saw %v, want the panic", err)
	}
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxBackoff = 40 * time.Millisecond // no wait for a probe is longer
		store := newFakeStore(t, modeFail)
		var (
			mu      sync.Mutex
			changes []string
			errs    atomic.Int64
		)
		l := newLimiter(t, store,
			core.WithBreaker(core.BreakerConfig{Failures: 3, Backoff: 10 * time.Millisecond, MaxBackoff: maxBackoff}),
			core.OnError(func(error) { errs.Add(1) }),
			core.OnBreakerChange(func(from, to core.BreakerState) {
				mu.Lock()
				changes = append(changes, from.String()+">"+to.String())
				mu.Unlock()
			}))
		r := rule("a", core.PerMinute(1000), "user:1")
		for i := range 3 {
			if got := l.BreakerState(); got != core.BreakerClosed {
				t.Fatalf("breaker %v after %d failures, want closed", got, i)
			}
			check(t, l, r)
		}
		if got := l.BreakerState(); got == core.BreakerClosed {
			t.Fatal("breaker closed after 3 consecutive failures, want open")
		}
		before := store.requests.Load()
		for range 100 {
			d, err := check(t, l, r)
			if err != nil || !d.Degraded() {
				t.Fatalf("decision %+v, %v while open: want local", d, err)
			}
		}
		if got := store.requests.Load() - before; got != 0 {
			t.Errorf("%d request calls reached the store while the breaker was open, want 0", got)
		}
		// probes fail for a while: two at least, within two waits
		time.Sleep(2 * maxBackoff)
		synctest.Wait()
		failedProbes := store.probes.Load()
		if failedProbes < 2 {
			t.Fatalf("%d probes within %v of waits of at most %v, want at least 2", failedProbes, 2*maxBackoff, maxBackoff)
		}
		if got := l.BreakerState(); got != core.BreakerOpen {
			t.Fatalf("breaker %v between failed probes, want open", got)
		}
		// then the store is back: the next probe, within a wait, closes the
		// breaker
		store.mode.Store(modeOK)
		time.Sleep(maxBackoff)
		synctest.Wait()
		if got := l.BreakerState(); got != core.BreakerClosed {
			t.Fatalf("breaker %v %v after the store came back, want closed", got, maxBackoff)
		}
		if got := store.probes.Load(); got != failedProbes+1 {
			t.Errorf("%d probes after the store came back, want 1", got-failedProbes)
		}
		d, err := check(t, l, r)
		if err != nil || d.Degraded() {
			t.Fatalf("decision %+v, %v after recovery: want one from the store", d, err)
		}
		if got := store.requests.Load() - before; got != 1 {
			t.Errorf("%d request calls after recovery, want 1", got)
		}
		if got, want := errs.Load(), 3+failedProbes; got != want {
			t.Errorf("OnError called %d times, want %d: the 3 failures and the %d failed probes", got, want, failedProbes)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []string{"closed>open"}
		for range failedProbes {
			want = append(want, "open>half-open", "half-open>open")
		}
		want = append(want, "open>half-open", "half-open>closed")
		if !slices.Equal(changes, want) {
			t.Errorf("breaker changes %v, want %v", changes, want)
		}
	})
}

func TestBreakerProbesOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			timeout    = 5 * time.Millisecond
			maxBackoff = 4 * time.Millisecond
			rounds     = 100 // of 16 requests, 3ms apart
		)
		// every call stalls until its deadline, so that two probes at once
		// would overlap in time whatever the order goroutines run in
		store := newFakeStore(t, modeStall)
		l := newLimiter(t, store, core.WithTimeout(timeout), core.WithBreaker(core.BreakerConfig{Failures: 1, Backoff: 2 * time.Millisecond, MaxBackoff: maxBackoff}))
		r := rule("a", core.PerMinute(1000), "user:1")
		check(t, l, r)
		synctest.Wait() // the request's own call has ended
		if got := l.BreakerState(); got == core.BreakerClosed {
			t.Fatalf("breaker %v after a failure, want open", got)
		}
		if got := store.inflight.Load(); got != 0 {
			t.Fatalf("%d store calls running before any probe, want 0", got)
		}
		store.maxInflight.Store(0)
		before, probes := store.requests.Load(), store.probes.Load()
		start := time.Now()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range rounds {
					check(t, l, r)
					time.Sleep(3 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		span := time.Since(start)
		if got := store.maxInflight.Load(); got != 1 {
			t.Errorf("%d store calls at once while open, want 1 (one probe at a time)", got)
		}
		// each probe comes at most maxBackoff after the last one's deadline
		if got, want := store.probes.Load()-probes, int64(span/(maxBackoff+timeout)); got < want {
			t.Errorf("%d probes in %v with waits of at most %v and a deadline of %v, want at least %d", got, span, maxBackoff, timeout, want)
		}
		if got := store.requests.Load() - before; got != 0 {
			t.Errorf("%d request calls reached the store while open, want 0", got)
		}
	})
}

func TestLoggerIsRateLimited(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	store := newFakeStore(t, modeFail)
	clock := testkit.NewClock(testkit.Start)
	l := newLimiter(t, store, core.WithLogger(logger), core.WithClock(clock.Now), core.WithBreaker(core.BreakerConfig{Failures: 1000}))
	const identity = "user:secret-identity"
	for range 200 {
		check(t, l, rule("a", core.PerMinute(10), identity))
		clock.Add(time.Millisecond) // 200 failures within 200ms
	}
	out := buf.String()
	if got := strings.Count(out, "store call failed"); got != 1 {
		t.Errorf("%d store-error lines for 200 failures within a second, want 1:\n%s", got, out)
	}
	if strings.Contains(out, "secret-identity") {
		t.Errorf("log holds an identity:\n%s", out)
	}
	clock.Add(800 * time.Millisecond) // one second after the first line
	check(t, l, rule("a", core.PerMinute(10), identity))
	if out := buf.String(); !strings.Contains(out, "suppressed=199") {
		t.Errorf("second line does not count the 199 suppressed failures:\n%s", out)
	}
}

func TestLoggerBreakerChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxBackoff = 2 * time.Millisecond
		var buf syncBuffer
		logger := slog.New(slog.NewTextHandler(&buf, nil))
		store := newFakeStore(t, modeFail)
		l := newLimiter(t, store, core.WithLogger(logger), core.WithBreaker(core.BreakerConfig{Failures: 1, Backoff: time.Millisecond, MaxBackoff: maxBackoff}))
		check(t, l, rule("a", core.PerMinute(10), "user:1"))
		store.mode.Store(modeOK)
		time.Sleep(maxBackoff) // the first probe closes the breaker
		synctest.Wait()
		if got := l.BreakerState(); got != core.BreakerClosed {
			t.Fatalf("breaker %v %v after the store came back, want closed", got, maxBackoff)
		}
		out := buf.String()
		for _, want := range []string{"level=WARN msg=\"ratekit: circuit breaker open", "level=WARN msg=\"ratekit: circuit breaker closed"} {
			if !strings.Contains(out, want) {
				t.Errorf("log lacks %q:\n%s", want, out)
			}
		}
	})
}

func TestSilentByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const maxBackoff = 2 * time.Millisecond
		var buf syncBuffer
		old := slog.Default()
		slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
		defer slog.SetDefault(old)
		store := newFakeStore(t, modeFail)
		l := newLimiter(t, store, core.WithBreaker(core.BreakerConfig{Failures: 1, Backoff: time.Millisecond, MaxBackoff: maxBackoff}))
		check(t, l, rule("a", core.PerMinute(10), "user:1"))
		store.mode.Store(modeOK)
		time.Sleep(maxBackoff) // the first probe closes the breaker
		synctest.Wait()
		if got := l.BreakerState(); got != core.BreakerClosed {
			t.Fatalf("breaker %v %v after the store came back, want closed", got, maxBackoff)
		}
		if buf.Len() != 0 {
			t.Errorf("a Limiter without WithLogger logged:\n%s", buf.String())
		}
	})
}

// TestCloseLeavesNoGoroutines runs in a bubble, which fails the test unless
// every goroutine started in it has exited by the end: the Limiter's prober
// and its abandoned store calls included.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			timeout    = 5 * time.Millisecond
			maxBackoff = 2 * time.Millisecond
		)
		store := newFakeStore(t, modeHang)
		l, err := core.NewLimiter(store, core.WithTimeout(timeout), core.WithBreaker(core.BreakerConfig{Failures: 2, Backoff: time.Millisecond, MaxBackoff: maxBackoff}))
		if err != nil {
			t.Fatal(err)
		}
		r := rule("a", core.PerMinute(10), "user:1")
		for range 3 {
			check(t, l, r)
		}
		// two probes start within two waits and a deadline
		time.Sleep(2*maxBackoff + timeout)
		synctest.Wait()
		if got := store.probes.Load(); got < 2 {
			t.Fatalf("%d probes, want at least 2", got)
		}
		store.unblock()
		// with no store call left to wait for, Close returns at once; should
		// it not, the bubble reports the goroutines it waits for
		closed := make(chan struct{})
		go func() { l.Close(); close(closed) }()
		synctest.Wait()
		select {
		case <-closed:
		default:
			t.Fatal("Close has not returned, with no store call left to wait for")
		}
		l.Close() // idempotent
		// a closed Limiter still decides
		if d, err := check(t, l, r); err != nil || len(d.Results) != 1 {
			t.Errorf("Check after Close: %+v, %v", d, err)
		}
	})
}

func TestCheckResultsInRuleOrder(t *testing.T) {
	l := newLimiter(t, newFakeStore(t, modeOK))
	limit := core.PerMinute(10)
	rules := []core.Rule{rule("a", limit, "user:1"), rule("b", limit, "user:2"), rule("c", limit.WithAlgorithm(core.FixedWindow), "user:1")}
	d, err := check(t, l, rules...)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range d.Results {
		names = append(names, r.Rule)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(names, want) {
		t.Errorf("results for rules %v, want %v", names, want)
	}
}

// TestCheckGroupsInterleaved checks that rules whose identities interleave
// are each decided by their own limit and key, however the store calls
// group them: every rule has a capacity of its own, which its result must
// carry, with what that rule alone has spent.
func TestCheckGroupsInterleaved(t *testing.T) {
	l := newLimiter(t, newFakeStore(t, modeOK))
	ids := []string{"user:1", "user:2", "user:1", "user:3", "user:2", "user:1"}
	var rules []core.Rule
	for i, id := range ids {
		rules = append(rules, rule(string(rune('a'+i)), core.PerMinute(100+i), id))
	}
	checkSpendsByRule(t, l, rules)
}

// intoStated is a memorystore.Store that states the traits it is given,
// and decides into the caller's results (AllowInto), as a batching
// redisstore.Store does.
type intoStated struct {
	*memorystore.Store
	traits core.Traits
}

func (s intoStated) Traits() core.Traits { return s.traits }

// TestCheckGroupsDirect checks, over stores called on the caller's
// goroutine (KeepsDeadlines), with and without AllowInto, that groups of
// one to nine rules of one identity, past the few checks a direct call
// takes from its pool, and groups that interleave, each carry their own
// rules' limits and counts.
func TestCheckGroupsDirect(t *testing.T) {
	keeps := core.Traits{KeepsDeadlines: true}
	stores := map[string]func(*memorystore.Store) core.Store{
		"AllowInto":      func(m *memorystore.Store) core.Store { return intoStated{m, keeps} },
		"AllowAllN only": func(m *memorystore.Store) core.Store { return statedStore{m, keeps} },
	}
	for name, wrap := range stores {
		t.Run(name, func(t *testing.T) {
			var one, mixed []core.Rule
			for i := range 9 {
				name := string(rune('a' + i))
				one = append(one, rule(name, core.PerMinute(100+i), "user:1"))
				id := "user:2" // six rules of user 2, every third one of user 3
				if i%3 == 2 {
					id = "user:3"
				}
				mixed = append(mixed, rule(name, core.PerMinute(200+i), id))
			}
			checkSpendsByRule(t, newLimiter(t, wrap(testkit.MustMemory())), one)
			checkSpendsByRule(t, newLimiter(t, wrap(testkit.MustMemory())), mixed)
		})
	}
}

// checkSpendsByRule checks, over two rounds of Checks of the first one to
// all of rules, that each result carries its own rule's name, limit and
// count; every rule's capacity must be at least twice its number of rules.
func checkSpendsByRule(t *testing.T, l *core.Limiter, rules []core.Rule) {
	t.Helper()
	for round := 1; round <= 2; round++ {
		for n := 1; n <= len(rules); n++ {
			// a Check of the first n rules, once per round each
			d, err := check(t, l, rules[:n]...)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Results) != n || !d.Allowed {
				t.Fatalf("%d rules: %d results, allowed %v: %+v", n, len(d.Results), d.Allowed, d.Results)
			}
			for i, r := range d.Results {
				// rule i is in every Check of at least i+1 rules: n-i of
				// them so far in this round, len(rules)-i in each earlier one
				spent := (round-1)*(len(rules)-i) + n - i
				want := rules[i].Limit.Capacity() - spent
				if r.Rule != rules[i].Name || r.Limit != rules[i].Limit || r.Remaining != want {
					t.Errorf("round %d, %d rules: result %d is %q of limit %v with %d left; want %q of limit %v with %d left",
						round, n, i, r.Rule, r.Limit, r.Remaining, rules[i].Name, rules[i].Limit, want)
				}
			}
		}
	}
}

func TestNewLimiterOptions(t *testing.T) {
	store := testkit.MustMemory()
	defer store.Close()
	bad := map[string]core.Option{
		"prefix with brace": core.WithPrefix("a{b"),
		"unknown policy":    core.WithFailurePolicy(9),
		"zero timeout":      core.WithTimeout(0),
		"negative timeout":  core.WithTimeout(-time.Second),
		"zero replicas":     core.WithReplicas(0),
		"negative failures": core.WithBreaker(core.BreakerConfig{Failures: -1, Backoff: 0, MaxBackoff: 0}),
		"negative backoff":  core.WithBreaker(core.BreakerConfig{Failures: 0, Backoff: -1, MaxBackoff: 0}),
		"negative cache":    core.WithDeniedCache(-1),
	}
	for name, opt := range bad {
		if _, err := core.NewLimiter(store, opt); err == nil {
			t.Errorf("%s: NewLimiter succeeded, want an error", name)
		}
	}
	if _, err := core.NewLimiter(nil); err == nil {
		t.Error("NewLimiter(nil) succeeded, want an error")
	}
	l, err := core.NewLimiter(store, core.WithPrefix("app:"), core.WithFailurePolicy(core.FailOpen), core.WithTimeout(time.Second),
		core.WithReplicas(4), core.WithBreaker(core.BreakerConfig{Failures: 0, Backoff: 0, MaxBackoff: 0}), core.WithDeniedCache(0), core.WithLogger(nil),
		core.WithFallbackMaxKeys(10), core.OnError(nil), core.OnBreakerChange(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got, _ := l.StorageKey("r", "ip:1"); got != "app:r:{ip:1}" {
		t.Errorf("StorageKey %q", got)
	}
}

func TestFailurePolicyString(t *testing.T) {
	for _, p := range []core.FailurePolicy{core.FailLocal, core.FailOpen, core.FailClosed} {
		got, err := core.ParseFailurePolicy(strings.ToUpper(p.String()))
		if err != nil || got != p {
			t.Errorf("ParseFailurePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := core.ParseFailurePolicy("maybe"); err == nil {
		t.Error("ParseFailurePolicy(maybe) succeeded")
	}
	if got := core.FailurePolicy(7).String(); got != "failure-policy(7)" {
		t.Errorf("String of an unknown policy: %q", got)
	}
	for s, want := range map[core.BreakerState]string{core.BreakerClosed: "closed", core.BreakerOpen: "open", core.BreakerHalfOpen: "half-open", 9: "breaker-state(9)"} {
		if got := s.String(); got != want {
			t.Errorf("BreakerState(%d).String() = %q, want %q", s, got, want)
		}
	}
}

// The tests of this file that wait for a deadline or for the breaker run
// in synctest bubbles, on a fake clock, and assert those waits exactly.
// Only the tests against real redis-server processes (failure_test.go)
// wait on the wall clock, with deadlineMargin and waitFor.

// deadlineMargin is how much later than its deadline a decision against a
// real Redis may return. The tests on a fake clock hold the deadline
// exactly; here the margin only has to tell a decision that kept its
// deadline, however late a loaded machine ran its goroutine, from one
// that waited on Redis instead: that one waits for the client's own
// timeouts, a second at least (recommended's read and dial timeouts;
// go-redis's defaults are longer). So the margin is as wide as that
// allows, and no test asserts how fast a loaded machine is.
const deadlineMargin = 700 * time.Millisecond

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// CheckInto keeps the results in the caller's array when it has room, and
// decides exactly as Check does either way.
func TestCheckInto(t *testing.T) {
	store, err := memorystore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	l := newLimiter(t, store)
	rules := []core.Rule{rule("a", core.PerMinute(10), "user:1"), rule("b", core.PerMinute(5), "user:2")}
	ctx := requestCtx()
	req := staticRequest{ctx}

	var buf [2]core.RuleResult
	buf[1].Rule = "stale" // what a reused buffer held must not show
	d, err := l.CheckInto(ctx, req, rules, buf[:1])
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Results) != 2 || &d.Results[0] != &buf[0] {
		t.Fatalf("results %+v not kept in the buffer", d.Results)
	}
	if d.Results[0].Rule != "a" || d.Results[1].Rule != "b" || d.Results[1].Remaining != 4 {
		t.Errorf("results %+v, want a then b with 4 left", d.Results)
	}

	small := make([]core.RuleResult, 0, 1)
	d, err = l.CheckInto(ctx, req, rules, small)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Results) != 2 || &d.Results[0] == &small[:1][0] {
		t.Fatalf("results %+v: want two, in an array of their own", d.Results)
	}
	if d.Results[1].Remaining != 3 {
		t.Errorf("second check left %d of b, want 3", d.Results[1].Remaining)
	}
	if got := testing.AllocsPerRun(100, func() {
		if _, err := l.CheckInto(ctx, req, rules, buf[:0]); err != nil {
			t.Fatal(err)
		}
	}); got > testing.AllocsPerRun(100, func() {
		if _, err := l.Check(ctx, req, rules); err != nil {
			t.Fatal(err)
		}
	})-1 {
		t.Errorf("CheckInto with room allocates %v, not one fewer than Check", got)
	}
}

// TestCheckIntoReusedBuffer: a buffer full of another decision's results
// changes nothing: CheckInto decides as Check does, rule by rule, when
// every group is decided, when a denial leaves later groups undecided (and
// their results out), and with a shadow rule among them.
func TestCheckIntoReusedBuffer(t *testing.T) {
	newStore := func() core.Store {
		s, err := memorystore.New()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	fresh, reused := newLimiter(t, newStore()), newLimiter(t, newStore())
	shadow := rule("s", core.PerMinute(1), "user:3")
	shadow.Shadow = true
	// three groups: a and b's identity, then the shadow rule's, then c's;
	// b runs out after 2 calls, and its denial leaves c undecided
	rules := []core.Rule{rule("a", core.PerMinute(10), "user:1"), rule("b", core.PerMinute(2), "user:1"),
		shadow, rule("c", core.PerMinute(10), "user:2")}
	ctx := requestCtx()
	req := staticRequest{ctx}
	stale := core.RuleResult{Rule: "stale", Shadow: true, Result: core.Result{Allowed: true, Degraded: true,
		Remaining: 99, RetryAfter: time.Hour, ResetAfter: time.Hour, Limit: core.PerHour(7)}}
	var buf [4]core.RuleResult
	for call := range 4 {
		for i := range buf {
			buf[i] = stale
		}
		want, err := fresh.Check(ctx, req, rules)
		if err != nil {
			t.Fatal(err)
		}
		got, err := reused.CheckInto(ctx, req, rules, buf[:0])
		if err != nil {
			t.Fatal(err)
		}
		if got.Allowed != want.Allowed || got.Limiting != want.Limiting || len(got.Results) != len(want.Results) {
			t.Fatalf("call %d: allowed %v, limiting %d, %d results; want %v, %d, %d",
				call, got.Allowed, got.Limiting, len(got.Results), want.Allowed, want.Limiting, len(want.Results))
		}
		for i, w := range want.Results {
			g := got.Results[i]
			if g.Rule != w.Rule || g.Shadow != w.Shadow || g.Allowed != w.Allowed || g.Degraded != w.Degraded ||
				g.Remaining != w.Remaining || g.Limit != w.Limit || (g.RetryAfter > 0) != (w.RetryAfter > 0) {
				t.Errorf("call %d, result %d: %+v, want %+v", call, i, g, w)
			}
		}
		if wantN := []int{4, 4, 2, 2}[call]; len(got.Results) != wantN {
			t.Errorf("call %d: %d results, want %d", call, len(got.Results), wantN)
		}
	}
}

// TestStorageKey: a Limiter's keys are prefix + rule + ":{" + identity +
// "}", an identity that could steer the Cluster slot hashed.
func TestStorageKey(t *testing.T) {
	store, err := memorystore.New()
	if err != nil {
		t.Fatal(err)
	}
	limiter, err := core.NewLimiter(store, core.WithPrefix("rl:"))
	if err != nil {
		t.Fatal(err)
	}
	defer limiter.Close()
	if k, _ := limiter.StorageKey("api", "ip:203.0.113.7"); k != "rl:api:{ip:203.0.113.7}" {
		t.Errorf("key %q", k)
	}
	// an identity that tries to steer the Cluster slot is hashed
	if k, _ := limiter.StorageKey("api", "user:{victim}"); !strings.HasPrefix(k, "rl:api:{#ac45644e77e") {
		t.Errorf("key %q", k)
	}
}
