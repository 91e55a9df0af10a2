package adaptertest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/redistest"
)

// InFlightHarness is what [RunInFlight] needs of one adapter's concurrency
// middleware (package inflight): how to build an app of its framework
// around it.
type InFlightHarness struct {
	// Name is the constructor as its errors name it, such as
	// "ginlimit.InFlight".
	Name string
	// New makes the adapter's concurrency middleware (its Must form when
	// s.Must) of l and rule, with the options s describes, and returns an
	// app that serves GET / and GET /healthz behind it. Each calls
	// s.Handler, when not nil, with the request's ClientHeader value, then
	// answers 200 "ok". A handler that panics may make the app panic
	// (the suite recovers it) or answer 500 (a recovery middleware of the
	// framework, outside the one under test). New returns the adapter's
	// error.
	New func(tb testing.TB, l *inflight.Limiter, rule inflight.Rule, s InFlightSetup) (App, error)
	// RPC says that the app answers in gRPC's terms, which it translates:
	// codes.ResourceExhausted to 429, Unavailable to 503, Unauthenticated
	// to 401, Internal to 500, an answer of a custom handler to its own
	// status and body, and a RetryInfo to Retry-After in whole seconds.
	// The suite then leaves out what only HTTP has: the problem+json body,
	// the fail-closed status option, and the Retry-After that a custom
	// handler finds set.
	RPC bool
}

// InFlightSetup describes the options of one concurrency middleware in
// terms that every adapter shares.
type InFlightSetup struct {
	// Config holds the shared options that apply: FailClosedStatus and
	// NoIdentity (WithFailClosedStatus, WithNoIdentity).
	adapter.Config
	// Skip, when not empty, is the path of the requests that the adapter's
	// skip hook skips.
	Skip string
	// Handler, when not nil, runs in the app's handler of each request,
	// given the request's ClientHeader value.
	Handler func(client string)
	// Denied, when not nil, is what the adapter's in-flight denied handler
	// answers, given the result and the Retry-After field that the
	// response holds when the handler runs.
	Denied func(res inflight.Result, retryAfter string) Answer
	// Error, when not nil, is what the adapter's error handler answers.
	Error func(err error, retryAfter string) Answer
	// Must makes the harness build the middleware with its Must form.
	Must bool
}

// NewInFlightLimiter returns an inflight.Limiter over a fresh miniredis,
// whose clock stands still (no lease ever runs out), and the miniredis.
// Both end with the test.
func NewInFlightLimiter(tb testing.TB, opts ...inflight.Option) (*inflight.Limiter, *miniredis.Miniredis) {
	tb.Helper()
	mr := miniredis.RunT(tb)
	mr.SetTime(T0)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialerRetries: 1})
	tb.Cleanup(func() { rdb.Close() })
	// miniredis shares the test's CPU: a second keeps a loaded machine
	// from sending requests to the failure policy
	l, err := inflight.New(rdb, append([]inflight.Option{inflight.WithTimeout(time.Second)}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l, mr
}

// InFlightRule returns a concurrency rule of limit keyed by ClientKey.
func InFlightRule(name string, limit int) inflight.Rule {
	return inflight.Rule{Name: name, Limit: limit, Key: ClientKey()}
}

// RunInFlight proves the concurrency middleware that h builds against the
// behaviour every adapter's shares, one subtest each: the cap under
// concurrent requests, counted by the handlers themselves, and the answer
// beyond it; the slot given back when the handler returns and when it
// panics; skipping; the denied and error handlers; failing closed;
// requests without an identity; and the constructors' errors.
func RunInFlight(t *testing.T, h InFlightHarness) {
	tests := []struct {
		name string
		test func(*testing.T, InFlightHarness)
	}{
		{"Cap", testInFlightCap},
		{"ReleaseOnPanic", testInFlightPanic},
		{"Skip", testInFlightSkip},
		{"DeniedHandler", testInFlightDenied},
		{"FailClosed", testInFlightFailClosed},
		{"NoIdentity", testInFlightNoIdentity},
		{"NewInvalid", testInFlightInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.test(t, h) })
	}
}

// buildInFlight returns the app that h makes, failing the test on an error.
func buildInFlight(t *testing.T, h InFlightHarness, l *inflight.Limiter, rule inflight.Rule, s InFlightSetup) App {
	t.Helper()
	app, err := h.New(t, l, rule, s)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// holders returns the holders of client's slots under rule in mr.
func holders(t *testing.T, l *inflight.Limiter, mr *miniredis.Miniredis, rule inflight.Rule, client string) []string {
	t.Helper()
	m, err := mr.ZMembers(slotKey(t, l, rule, client))
	if errors.Is(err, miniredis.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// slotKey returns the storage key of client's slots under rule.
func slotKey(t *testing.T, l *inflight.Limiter, rule inflight.Rule, client string) string {
	t.Helper()
	id, err := rule.Key(adapter.HTTPRequest(NewRequest(http.MethodGet, "/", client)))
	if err == nil {
		id, err = l.Key(rule.Name, id)
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// hold takes one of client's slots under rule, released when the test
// ends.
func hold(t *testing.T, l *inflight.Limiter, rule inflight.Rule, client string) {
	t.Helper()
	le, res, err := l.Acquire(context.Background(), slotKey(t, l, rule, client), rule.Limit)
	if err != nil || !res.Allowed {
		t.Fatalf("Acquire: %+v, %v", res, err)
	}
	t.Cleanup(func() { le.Release(context.Background()) })
}

// checkDenied reports unless r is the default answer beyond the cap.
func checkDenied(t *testing.T, h InFlightHarness, r Response) {
	t.Helper()
	if h.RPC {
		if r.Status != http.StatusTooManyRequests {
			t.Errorf("status %d, want %d", r.Status, http.StatusTooManyRequests)
		}
	} else {
		checkProblem(t, r, http.StatusTooManyRequests)
	}
	checkFields(t, r.Header, map[string]string{"Retry-After": "1"})
}

// gate is a handler that holds the requests of client "a" until opened,
// and counts how many run at once.
type gate struct {
	started chan struct{}
	open    chan struct{}

	mu        sync.Mutex
	now, most int
}

func newGate() *gate { return &gate{started: make(chan struct{}, 64), open: make(chan struct{})} }

func (g *gate) handle(client string) {
	if client != "a" {
		return
	}
	g.mu.Lock()
	g.now++
	g.most = max(g.most, g.now)
	g.mu.Unlock()
	g.started <- struct{}{}
	select {
	case <-g.open:
	case <-time.After(10 * time.Second): // bounds a broken test, decides nothing
	}
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
}

// running returns how many requests the gate holds now, and the most it
// held at once.
func (g *gate) running() (now, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.now, g.most
}

// wait receives from c, failing the test if nothing comes: a cap that lets
// too few requests through would otherwise hang the test.
func wait[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// Six concurrent requests of one client under a cap of two: two run, held
// by their handler, and four are denied at once; another client is not
// held back; once the handlers return, the slots are free again.
func testInFlightCap(t *testing.T, h InFlightHarness) {
	l, mr := NewInFlightLimiter(t)
	rule := InFlightRule("uploads", 2)
	g := newGate()
	app := buildInFlight(t, h, l, rule, InFlightSetup{Handler: g.handle})
	answers := make(chan Response, 6)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() { answers <- app.Get("/", "a") })
	}
	for range 2 {
		wait(t, g.started, "request admitted")
	}
	for range 4 {
		checkDenied(t, h, wait(t, answers, "denial"))
	}
	if now, _ := g.running(); now != 2 {
		t.Errorf("%d requests running, want 2", now)
	}
	if got := len(holders(t, l, mr, rule, "a")); got != 2 {
		t.Errorf("%d slots held, want 2", got)
	}
	if r := app.Get("/", "b"); r.Status != http.StatusOK || r.Body != "ok" {
		t.Errorf("another client: %d %q, want 200 \"ok\"", r.Status, r.Body)
	}
	close(g.open)
	wg.Wait()
	for range 2 {
		if r := <-answers; r.Status != http.StatusOK || r.Body != "ok" {
			t.Errorf("admitted request: %d %q, want 200 \"ok\"", r.Status, r.Body)
		}
	}
	if _, most := g.running(); most != 2 {
		t.Errorf("at most %d requests ran at once, want 2", most)
	}
	if m := holders(t, l, mr, rule, "a"); len(m) != 0 {
		t.Errorf("slots held once every handler returned: %q", m)
	}
	if r := app.Get("/", "a"); r.Status != http.StatusOK {
		t.Errorf("request after the others ended: status %d, want 200", r.Status)
	}
}

// errPanic is what the handlers of testInFlightPanic panic with.
var errPanic = errors.New("adaptertest: handler panics")

// A handler that panics gives its slot back: under a cap of one, every
// request reaches it.
func testInFlightPanic(t *testing.T, h InFlightHarness) {
	l, mr := NewInFlightLimiter(t)
	rule := InFlightRule("p", 1)
	var mu sync.Mutex
	calls := 0
	app := buildInFlight(t, h, l, rule, InFlightSetup{Handler: func(string) {
		mu.Lock()
		calls++
		mu.Unlock()
		panic(errPanic)
	}})
	for i := range 3 {
		func() {
			defer func() {
				if p := recover(); p != nil && p != errPanic {
					panic(p)
				}
			}()
			if r := app.Get("/", "a"); r.Status != http.StatusInternalServerError {
				t.Errorf("request %d: status %d, want the recovered panic's 500", i+1, r.Status)
			}
		}()
	}
	if calls != 3 {
		t.Errorf("the handler ran %d times, want 3: a panic kept its slot", calls)
	}
	if m := holders(t, l, mr, rule, "a"); len(m) != 0 {
		t.Errorf("slots held after the panics: %q", m)
	}
}

func testInFlightSkip(t *testing.T, h InFlightHarness) {
	l, _ := NewInFlightLimiter(t)
	rule := InFlightRule("s", 1)
	hold(t, l, rule, "a")
	app := buildInFlight(t, h, l, rule, InFlightSetup{Skip: "/healthz"})
	if r := app.Get("/healthz", "a"); r.Status != http.StatusOK || r.Body != "ok" {
		t.Errorf("skipped request: %d %q, want 200 \"ok\"", r.Status, r.Body)
	}
	checkDenied(t, h, app.Get("/", "a"))
}

func testInFlightDenied(t *testing.T, h InFlightHarness) {
	l, _ := NewInFlightLimiter(t)
	rule := InFlightRule("d", 1)
	hold(t, l, rule, "a")
	var got inflight.Result
	var retry string
	app := buildInFlight(t, h, l, rule, InFlightSetup{Denied: func(res inflight.Result, retryAfter string) Answer {
		got, retry = res, retryAfter
		return Answer{http.StatusTeapot, "busy"}
	}})
	if r := app.Get("/", "a"); r.Status != http.StatusTeapot || r.Body != "busy" {
		t.Errorf("denied: %d %q, want the handler's 418 \"busy\"", r.Status, r.Body)
	}
	if got.Allowed || got.Limit != 1 || got.InFlight != 1 || got.RetryAfter != inflight.DefaultRetryAfter {
		t.Errorf("the denied handler got %+v", got)
	}
	if !h.RPC && retry != "1" {
		t.Errorf("Retry-After when the denied handler ran: %q, want \"1\"", retry)
	}
}

// Redis down, the Limiter failing closed: the fail-closed answer with
// Retry-After, or the error handler's.
func testInFlightFailClosed(t *testing.T, h InFlightHarness) {
	var gotErr error
	tests := []struct {
		name   string
		s      InFlightSetup
		status int
		rpc    bool
	}{
		{"default", InFlightSetup{}, http.StatusServiceUnavailable, true},
		{"status", InFlightSetup{Config: adapter.Config{FailClosedStatus: http.StatusTooManyRequests}}, http.StatusTooManyRequests, false},
		{"error handler", InFlightSetup{Error: func(err error, _ string) Answer {
			gotErr = err
			return Answer{http.StatusTeapot, "later"}
		}}, http.StatusTeapot, true},
	}
	for _, tt := range tests {
		if h.RPC && !tt.rpc {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			l, mr := NewInFlightLimiter(t, inflight.WithFailurePolicy(core.FailClosed), inflight.WithTimeout(50*time.Millisecond))
			app := buildInFlight(t, h, l, InFlightRule("f", 1), tt.s)
			mr.Close()
			r := app.Get("/", "a")
			switch {
			case tt.s.Error != nil:
				if r.Status != tt.status || !errors.Is(gotErr, core.ErrUnavailable) {
					t.Errorf("%d, handler given %v: want %d and ErrUnavailable", r.Status, gotErr, tt.status)
				}
			case h.RPC:
				if r.Status != tt.status {
					t.Errorf("status %d, want %d", r.Status, tt.status)
				}
			default:
				checkProblem(t, r, tt.status)
			}
			if tt.s.Error == nil {
				checkFields(t, r.Header, map[string]string{"Retry-After": "1"})
			}
		})
	}
}

func testInFlightNoIdentity(t *testing.T, h InFlightHarness) {
	l, _ := NewInFlightLimiter(t)
	rule := InFlightRule("n", 1)
	if r := buildInFlight(t, h, l, rule, InFlightSetup{}).Get("/", ""); r.Status != http.StatusOK || r.Body != "ok" {
		t.Errorf("no identity, default policy: %d %q, want 200 \"ok\"", r.Status, r.Body)
	}
	r := buildInFlight(t, h, l, rule, InFlightSetup{Config: adapter.Config{NoIdentity: adapter.NoIdentity401}}).Get("/", "")
	if h.RPC {
		if r.Status != http.StatusUnauthorized {
			t.Errorf("no identity, NoIdentity401: status %d, want 401", r.Status)
		}
	} else {
		checkProblem(t, r, http.StatusUnauthorized)
	}
}

func testInFlightInvalid(t *testing.T, h InFlightHarness) {
	l, _ := NewInFlightLimiter(t)
	tests := []struct {
		name string
		l    *inflight.Limiter
		rule inflight.Rule
	}{
		{"nil limiter", nil, InFlightRule("r", 1)},
		{"no name", l, InFlightRule("", 1)},
		{"no key", l, inflight.Rule{Name: "r", Limit: 1}},
		{"zero limit", l, InFlightRule("r", 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := h.New(t, tt.l, tt.rule, InFlightSetup{}); err == nil || !strings.HasPrefix(err.Error(), h.Name+": ") {
				t.Errorf("%v, want an error that names %s", err, h.Name)
			}
			defer func() {
				if recover() == nil {
					t.Error("the Must form did not panic")
				}
			}()
			h.New(t, tt.l, tt.rule, InFlightSetup{Must: true})
		})
	}
}

// InFlightRejectsOptions checks that the concurrency middleware made by
// constructor fn (newFn, or mustNew) rejects each of opts, named as
// [RejectsOptions] names them, with an error that starts with fn and
// names the option, and that its Must form panics.
func InFlightRejectsOptions[O, M any](t *testing.T, fn string,
	newFn func(*inflight.Limiter, inflight.Rule, ...O) (M, error),
	mustNew func(*inflight.Limiter, inflight.Rule, ...O) M,
	opts map[string]O,
) {
	l, _ := NewInFlightLimiter(t)
	for name, opt := range opts {
		t.Run(name, func(t *testing.T) {
			_, err := newFn(l, InFlightRule("r", 1), opt)
			checkRejected(t, fn, name, err)
			defer func() {
				if recover() == nil {
					t.Error("the Must form did not panic")
				}
			}()
			mustNew(l, InFlightRule("r", 1), opt)
		})
	}
}

// BenchInFlight returns an inflight.Limiter over a redis-server of its own,
// failing closed, so that a request Redis did not decide fails the
// benchmark (503) instead of being capped locally; a rule keyed by
// ClientKey whose cap no benchmark reaches; and done, which the benchmark
// calls after its loop: it fails unless the rule was consulted for each of
// the b.N requests and every slot was given back.
func BenchInFlight(b *testing.B) (l *inflight.Limiter, rule inflight.Rule, done func()) {
	b.Helper()
	redistest.Require(b)
	// as recommended: a client that keeps the deadline itself needs no
	// goroutine per call
	rdb := redistest.StartServer(b).Client(b, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	l, err := inflight.New(rdb, inflight.WithFailurePolicy(core.FailClosed), inflight.WithTimeout(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	var consulted atomic.Int64
	key := ClientKey()
	rule = inflight.Rule{Name: "bench", Limit: 1 << 20, Key: func(r core.Request) (string, error) {
		consulted.Add(1)
		return key(r)
	}}
	return l, rule, func() {
		b.Helper()
		if got := consulted.Load(); got != int64(b.N) {
			b.Fatalf("the rule was consulted %d times in %d requests", got, b.N)
		}
		if n, err := rdb.DBSize(context.Background()).Result(); err != nil || n != 0 {
			b.Fatalf("%d keys left in Redis (%v): slots were not given back", n, err)
		}
	}
}

// MakeInFlight returns the concurrency middleware of l and rule with opts,
// made by newFn, or by mustNew when s.Must: what every harness's New does
// first.
func MakeInFlight[O, M any](s InFlightSetup,
	newFn func(*inflight.Limiter, inflight.Rule, ...O) (M, error),
	mustNew func(*inflight.Limiter, inflight.Rule, ...O) M,
	l *inflight.Limiter, rule inflight.Rule, opts []O,
) (M, error) {
	if s.Must {
		return mustNew(l, rule, opts...), nil
	}
	return newFn(l, rule, opts...)
}
