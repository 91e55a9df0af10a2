package adaptertest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
)

// Harness is what the suite needs of one adapter: how to build an app of
// its framework around its middleware. Each adapter's tests write one, in
// their framework's own terms, and pass it to [Run].
type Harness struct {
	// Name is the adapter's constructor as its errors name it, such as
	// "ginlimit.New".
	Name string
	// New makes a middleware with the adapter's New (its MustNew when
	// s.Must) from l, rules and the options s describes, and returns an
	// app that serves GET / and GET /healthz behind it, each answering 200
	// "ok". The context of a request the app serves (r.Context()) must
	// reach the middleware as the framework's request context. GET /
	// answers the status a request asks for in [AnswerStatusHeader] or
	// [AnswerErrorHeader] (see [AnswerStatus]), and then reports the cost
	// a request asks for in [AnswerCostHeader] with the adapter's AddCost;
	// or, when the request asks in [AnswerStreamHeader], streams its answer
	// with [StreamAnswer] in the framework's way.
	// New returns the adapter's error.
	New func(tb testing.TB, l *core.Limiter, rules []core.Rule, s Setup) (App, error)
	// Routes returns an app with three middlewares of l, made with the
	// adapter's MustNew: one of global over every route; one of users on
	// the route of GET /users/<id> alone; one of login on POST /login
	// alone. Every route answers 200 "ok"; GET / is under global alone.
	Routes func(tb testing.TB, l *core.Limiter, global, users, login []core.Rule) App
	// Pattern is the route pattern that the adapter reports to key
	// functions ([core.Request.Route]) for GET /users/<id>, such as
	// "/users/:id".
	Pattern string
}

// Setup describes the options of one middleware in terms that every
// adapter shares; a harness turns each field into its adapter's option.
type Setup struct {
	// Config holds the shared options, which the harness sets with the
	// adapter's WithHeaders, WithIETFDraft, WithFailClosedStatus and
	// WithNoIdentity ([Shared] makes them), WithRuleSet and WithCountOnly
	// ([Quota]) and WithCharged ([Charged]); zero fields are the defaults.
	adapter.Config
	// Skip, when not empty, is the path of the requests that the
	// adapter's skip hook (WithSkip, WithSkipper, WithNext) skips.
	Skip string
	// Denied, when not nil, is what the adapter's denied handler
	// (WithDeniedHandler) answers, given the decision and the Retry-After
	// field that the response holds when the handler runs.
	Denied func(d core.Decision, retryAfter string) Answer
	// Error, when not nil, is what the adapter's error handler
	// (WithErrorHandler) answers, given the status the default answer
	// would have, the error and the Retry-After field that the response
	// holds when the handler runs.
	Error func(status int, err error, retryAfter string) Answer
	// Must makes the harness build the middleware with MustNew rather
	// than New.
	Must bool
}

// Answer is what a custom handler writes: a status and a plain-text body.
type Answer struct {
	Status int
	Body   string
}

// Shared returns c as options of an adapter, made with the constructors
// of its four shared options, in this order.
func Shared[O any](c adapter.Config,
	headers func(adapter.HeaderStyle) O, draft func(adapter.IETFDraft) O,
	failClosed func(int) O, noIdentity func(adapter.NoIdentityPolicy) O,
) []O {
	return []O{headers(c.Headers), draft(c.Draft), failClosed(c.FailClosedStatus), noIdentity(c.NoIdentity)}
}

// Quota returns c's rule set and count-only rules as options of an
// adapter, made with its WithRuleSet and WithCountOnly.
func Quota[O any](c adapter.Config, ruleSet func(*core.RuleSet) O, countOnly func(string, func(int) bool) O) []O {
	var opts []O
	if c.Rules != nil {
		opts = append(opts, ruleSet(c.Rules))
	}
	for name, count := range c.CountOnly {
		opts = append(opts, countOnly(name, count))
	}
	return opts
}

// configWith returns a Config with a rule set and count-only rules.
func configWith(set *core.RuleSet, countOnly map[string]func(int) bool) adapter.Config {
	return adapter.Config{Rules: set, CountOnly: countOnly}
}

// App serves one request through an adapter's framework.
type App func(r *http.Request) Response

// Response is what an App answered.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// HTTPApp returns the App of a net/http handler, such as a ServeMux, a
// *gin.Engine or an *echo.Echo. A handler's [ErrPanic] ends its answer with
// what it wrote, as net/http's server does (which also cuts the
// connection).
func HTTPApp(h http.Handler) App {
	return func(r *http.Request) Response {
		w := httptest.NewRecorder()
		func() {
			defer func() {
				if p := recover(); p != nil && p != ErrPanic {
					panic(p)
				}
			}()
			h.ServeHTTP(w, r)
		}()
		resp := w.Result()
		body, _ := io.ReadAll(resp.Body) // a recorder's body cannot fail
		return Response{resp.StatusCode, resp.Header, string(body)}
	}
}

// NewRequest returns a request for target, from client (in ClientHeader)
// unless client is empty.
func NewRequest(method, target, client string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	if client != "" {
		r.Header.Set(ClientHeader, client)
	}
	return r
}

// Get serves GET target from client with app.
func (app App) Get(target, client string) Response {
	return app(NewRequest(http.MethodGet, target, client))
}

// BenchmarkHTTP measures h serving GET / for BenchClients clients in turn,
// and fails unless every request is allowed and, when limited, carries
// rate-limit headers: the benchmark measures what it claims.
func BenchmarkHTTP(b *testing.B, h http.Handler, limited bool) {
	reqs := make([]*http.Request, BenchClients)
	for i := range reqs {
		reqs[i] = NewRequest(http.MethodGet, "/", BenchClient(i))
	}
	w := NewResponseWriter()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Reset()
		h.ServeHTTP(w, reqs[i%len(reqs)])
		if w.Code != http.StatusOK || limited && w.Header()[adapter.HeaderLimit] == nil {
			b.Fatalf("status %d, headers %v: the benchmark must measure allowed, limited requests", w.Code, w.Header())
		}
		i++
	}
}
