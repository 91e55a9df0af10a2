package inflight_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/keyfuncs"
)

// byHeader limits by the X-Client header, and finds no identity without it.
func byHeader(r core.Request) (string, error) {
	if v := r.Header("X-Client"); v != "" {
		return "client:" + v, nil
	}
	return "", core.ErrNoIdentity
}

// blocking is a handler whose requests run until the test lets them go.
type blocking struct {
	started chan struct{}
	release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case b.started <- struct{}{}:
	default: // admitted past the cap: the test fails on its own
	}
	select {
	case <-b.release:
	case <-time.After(10 * time.Second): // bounds a broken cap's test
	}
	io.WriteString(w, "done")
}

func serve(h http.Handler, client string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/", nil)
	if client != "" {
		r.Header.Set("X-Client", client)
	}
	h.ServeHTTP(w, r)
	return w
}

// Requests beyond the cap get 429 with Retry-After and a problem body while
// the others run; a slot is free again once its handler returns.
func TestMiddlewareCap(t *testing.T) {
	l, mr := newLimiter(t)
	b := newBlocking()
	h := inflight.MustMiddleware(l, inflight.Rule{Name: "uploads", Limit: 2, Key: byHeader})(b)
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Go(func() { codes <- serve(h, "a").Code })
	}
	<-b.started
	<-b.started
	w := serve(h, "a")
	if got, want := w.Code, http.StatusTooManyRequests; got != want {
		t.Fatalf("third request: %d, want %d", got, want)
	}
	if got, want := w.Header().Get("Retry-After"), "1"; got != want {
		t.Errorf("Retry-After %q, want %q", got, want)
	}
	checkProblem(t, w, http.StatusTooManyRequests)
	if got := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), "b").Code; got != http.StatusOK {
		t.Errorf("other client: %d", got)
	}
	close(b.release)
	wg.Wait()
	for range 2 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("running request: %d", c)
		}
	}
	if m := mustMembers(t, mr, "ratekit:uploads:{client:a}"); len(m) != 0 {
		t.Fatalf("holders once every handler returned: %q", m)
	}
}

func checkProblem(t *testing.T, w *httptest.ResponseRecorder, status int) {
	t.Helper()
	if got, want := w.Header().Get("Content-Type"), adapter.ProblemContentType; got != want {
		t.Errorf("Content-Type %q, want %q", got, want)
	}
	var p struct {
		Type   string
		Status int
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Status != status || p.Type != "about:blank" {
		t.Errorf("body %s: %+v, %v", w.Body, p, err)
	}
}

// A handler that panics gives its slot back.
func TestMiddlewareReleasesOnPanic(t *testing.T) {
	l, mr := newLimiter(t)
	h := inflight.MustMiddleware(l, inflight.Rule{Name: "p", Limit: 1, Key: byHeader})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	for range 2 {
		func() {
			defer func() {
				if p := recover(); p != http.ErrAbortHandler {
					t.Fatalf("recovered %v", p)
				}
			}()
			serve(h, "a")
		}()
	}
	if m := mustMembers(t, mr, "ratekit:p:{client:a}"); len(m) != 0 {
		t.Fatalf("holders after panics: %q", m)
	}
}

func TestMiddlewareAnswers(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	rule := inflight.Rule{Name: "r", Limit: 1, Key: byHeader}
	tests := []struct {
		name       string
		policy     core.FailurePolicy
		down       bool
		client     string
		opts       []inflight.MiddlewareOption
		want       int
		retryAfter string
	}{
		{"allowed", core.FailLocal, false, "a", nil, http.StatusOK, ""},
		{"no identity: next", core.FailLocal, false, "", nil, http.StatusOK, ""},
		{"no identity: 401", core.FailLocal, false, "", []inflight.MiddlewareOption{inflight.WithNoIdentity(adapter.NoIdentity401)}, http.StatusUnauthorized, ""},
		{"skipped", core.FailClosed, true, "a", []inflight.MiddlewareOption{inflight.WithSkip(func(*http.Request) bool { return true })}, http.StatusOK, ""},
		{"fail closed", core.FailClosed, true, "a", nil, http.StatusServiceUnavailable, "1"},
		{"fail closed, status", core.FailClosed, true, "a", []inflight.MiddlewareOption{inflight.WithFailClosedStatus(http.StatusTooManyRequests)}, http.StatusTooManyRequests, "1"},
		{"fail closed, handler", core.FailClosed, true, "a", []inflight.MiddlewareOption{inflight.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, _ int, err error) {
			if errors.Is(err, core.ErrUnavailable) {
				w.WriteHeader(http.StatusTeapot)
			}
		})}, http.StatusTeapot, "1"},
		{"fail open", core.FailOpen, true, "a", nil, http.StatusOK, ""},
		{"fail local", core.FailLocal, true, "a", nil, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, mr := newLimiter(t, inflight.WithFailurePolicy(tt.policy), inflight.WithTimeout(20*time.Millisecond))
			if tt.down {
				mr.Close()
			}
			w := serve(inflight.MustMiddleware(l, rule, tt.opts...)(ok), tt.client)
			if w.Code != tt.want || w.Header().Get("Retry-After") != tt.retryAfter {
				t.Fatalf("%d Retry-After %q, want %d %q", w.Code, w.Header().Get("Retry-After"), tt.want, tt.retryAfter)
			}
		})
	}
}

// A request whose context ended before its slot was decided gets 503 and
// the context's error, under every failure policy, and its handler never
// runs: the client is gone or out of time, and nothing failed.
func TestMiddlewareRequestEnded(t *testing.T) {
	rule := inflight.Rule{Name: "r", Limit: 1, Key: byHeader}
	for _, policy := range []core.FailurePolicy{core.FailLocal, core.FailOpen, core.FailClosed} {
		l, _ := newLimiter(t, inflight.WithFailurePolicy(policy))
		var told error
		ran := false
		h := inflight.MustMiddleware(l, rule, inflight.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, status int, err error) {
			told = err
			w.WriteHeader(status)
		}))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
		r.Header.Set("X-Client", "a")
		h.ServeHTTP(w, r)
		if w.Code != http.StatusServiceUnavailable || !errors.Is(told, context.Canceled) || errors.Is(told, core.ErrUnavailable) || ran {
			t.Errorf("%v: status %d, error %v, handler ran %v; want 503 and the context's error alone", policy, w.Code, told, ran)
		}
		w = httptest.NewRecorder()
		inflight.MustMiddleware(l, rule)(http.NotFoundHandler()).ServeHTTP(w, r)
		checkProblem(t, w, http.StatusServiceUnavailable)
	}
}

// A custom denied handler gets the result; an outer, longer Retry-After
// stays.
func TestMiddlewareDeniedHandler(t *testing.T) {
	l, _ := newLimiter(t)
	key := "ratekit:d:{client:a}"
	held, _ := acquire(t, l, key, 1)
	defer held.Release(context.Background())
	var got inflight.Result
	h := inflight.MustMiddleware(l, inflight.Rule{Name: "d", Limit: 1, Key: byHeader}, inflight.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, res inflight.Result) {
		got = res
		w.WriteHeader(http.StatusTeapot)
	}))(http.NotFoundHandler())
	w := httptest.NewRecorder()
	w.Header().Set("Retry-After", "30")
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Client", "a")
	h.ServeHTTP(w, r)
	if w.Code != http.StatusTeapot || got.Allowed || got.InFlight != 1 || got.Limit != 1 {
		t.Fatalf("%d, result %+v", w.Code, got)
	}
	if v := w.Header().Get("Retry-After"); v != "30" {
		t.Errorf("Retry-After %q, want the outer 30", v)
	}
}

func TestMiddlewareErrors(t *testing.T) {
	l, _ := newLimiter(t)
	ip, err := keyfuncs.IP()
	if err != nil {
		t.Fatal(err)
	}
	good := inflight.Rule{Name: "r", Limit: 1, Key: ip}
	tests := []struct {
		name string
		l    *inflight.Limiter
		rule inflight.Rule
		opts []inflight.MiddlewareOption
	}{
		{"nil limiter", nil, good, nil},
		{"no name", l, inflight.Rule{Limit: 1, Key: ip}, nil},
		{"no key", l, inflight.Rule{Name: "r", Limit: 1}, nil},
		{"zero limit", l, inflight.Rule{Name: "r", Key: ip}, nil},
		{"nil option", l, good, []inflight.MiddlewareOption{nil}},
		{"nil skip", l, good, []inflight.MiddlewareOption{inflight.WithSkip(nil)}},
		{"bad status", l, good, []inflight.MiddlewareOption{inflight.WithFailClosedStatus(200)}},
		{"bad no-identity policy", l, good, []inflight.MiddlewareOption{inflight.WithNoIdentity(7)}},
	}
	for _, tt := range tests {
		if _, err := inflight.Middleware(tt.l, tt.rule, tt.opts...); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}
