// Package nethttp rate-limits net/http handlers with a [core.Limiter].
//
// [New] returns ordinary func(http.Handler) http.Handler middleware, so it
// serves the standard library's http.ServeMux, chi (r.Use, r.With), and
// gorilla/mux (r.Use) alike; [Wrap] limits one handler. Install one
// middleware globally and others per route: they stack, each with its own
// rules, and the response describes the rules of all of them (see
// [adapter.Headers.SetHTTP]). Each decides on its own: a request that an
// inner middleware denies has spent the outer one's quota.
//
// # Routes
//
// Per-route keys (keyfuncs.Route) read [core.Request.Route], which is
// r.Pattern by default: the pattern http.ServeMux matched, such as
// "POST /users/{id}", never the raw path with its IDs. The mux sets it only
// once it has routed the request, so a middleware that needs it must wrap
// the route's handler (mux.Handle(pattern, mw(h))), not the whole mux.
// Routers that keep their pattern elsewhere report it through [WithRoute],
// from a middleware that runs once the route is matched:
//
//	nethttp.WithRoute(func(r *http.Request) string { // chi: in r.With or r.Group
//		return chi.RouteContext(r.Context()).RoutePattern()
//	})
//	nethttp.WithRoute(func(r *http.Request) string { // gorilla/mux
//		t, _ := mux.CurrentRoute(r).GetPathTemplate()
//		return t
//	})
//
// A rule whose name says which route it guards ("login") needs no pattern
// at all, and is the same rule for every router of a mixed fleet, whose
// pattern syntaxes differ.
package nethttp

import (
	"net/http"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
)

// Option configures a middleware. Options are sealed: only this package
// makes them.
type Option = adapter.Option[hooks]

// hooks are what this package's own options set, in net/http's types.
type hooks struct {
	skip    func(*http.Request) bool
	route   func(*http.Request) string
	denied  func(http.ResponseWriter, *http.Request, core.Decision)
	onError func(http.ResponseWriter, *http.Request, int, error)
}

// WithSkip makes the middleware pass requests for which skip reports true
// straight to the next handler, unlimited and without rate-limit headers:
// health checks, say. By default no request is skipped. To exempt requests
// from one rule only, set that rule's Skip.
func WithSkip(skip func(*http.Request) bool) Option {
	return adapter.WithHook("WithSkip", skip == nil, func(h *hooks) { h.skip = skip })
}

// WithRoute makes route report the matched route pattern of a request, for
// routers that do not set r.Pattern; by default the pattern is r.Pattern.
func WithRoute(route func(r *http.Request) string) Option {
	return adapter.WithHook("WithRoute", route == nil, func(h *hooks) { h.route = route })
}

// WithDeniedHandler replaces the default answer to a limited request (429
// with a problem+json body). When denied runs, the rate-limit headers and
// Retry-After are already set on w; denied writes the status and body.
func WithDeniedHandler(denied func(w http.ResponseWriter, r *http.Request, d core.Decision)) Option {
	return adapter.WithHook("WithDeniedHandler", denied == nil, func(h *hooks) { h.denied = denied })
}

// WithErrorHandler replaces the default answer when no decision could be
// made, with status the status the default answer would have: err wraps
// [core.ErrUnavailable] when the store is unavailable and the Limiter fails
// closed (Retry-After is already set on w; status is the fail-closed
// status, 503 by default), [core.ErrNoIdentity] when a rule found no
// identity under [adapter.NoIdentity401] (401), the request's context's
// error (context.Canceled or context.DeadlineExceeded) when it ended before
// a decision (503), and is a misconfiguration otherwise (500). Its text is
// for logs: do not send it to clients.
func WithErrorHandler(onError func(w http.ResponseWriter, r *http.Request, status int, err error)) Option {
	return adapter.WithHook("WithErrorHandler", onError == nil, func(h *hooks) { h.onError = onError })
}

// WithRuleSet makes the middleware read its rules from set at each request,
// so that [core.RuleSet.Replace] changes them at once; New's rules must
// then be nil. See [adapter.WithRuleSet].
func WithRuleSet(set *core.RuleSet) Option { return adapter.WithRuleSet[hooks](set) }

// WithCountOnly makes the named rule count only the answers whose status
// count picks, such as the 401s of a login handler: the unit is reserved
// before the handler runs and given back when its answer does not count.
// See [adapter.WithCountOnly].
func WithCountOnly(rule string, count func(status int) bool) Option {
	return adapter.WithCountOnly[hooks](rule, count)
}

// WithHeaders selects the rate-limit header fields: see [adapter.WithHeaders].
func WithHeaders(style adapter.HeaderStyle) Option { return adapter.WithHeaders[hooks](style) }

// WithIETFDraft selects the syntax of the IETF fields: see [adapter.WithIETFDraft].
func WithIETFDraft(draft adapter.IETFDraft) Option { return adapter.WithIETFDraft[hooks](draft) }

// WithFailClosedStatus sets the status of a fail-closed answer: see
// [adapter.WithFailClosedStatus].
func WithFailClosedStatus(status int) Option { return adapter.WithFailClosedStatus[hooks](status) }

// WithNoIdentity says what to do when a rule finds no identity: see
// [adapter.WithNoIdentity].
func WithNoIdentity(policy adapter.NoIdentityPolicy) Option {
	return adapter.WithNoIdentity[hooks](policy)
}

// New returns middleware that checks each request against rules with l,
// sets the rate-limit headers, and either calls the next handler or answers
// 429 with Retry-After. The request's context reaches the store. It returns
// an error for invalid rules or options.
func New(l *core.Limiter, rules []core.Rule, opts ...Option) (func(http.Handler) http.Handler, error) {
	return build("nethttp.New", l, rules, opts)
}

// build is New for constructor fn, which its errors name.
func build(fn string, l *core.Limiter, rules []core.Rule, opts []Option) (func(http.Handler) http.Handler, error) {
	m, h, err := adapter.Build(fn, l, rules, opts)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h.skip != nil && h.skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			req := adapter.HTTPRequest(r)
			if h.route != nil {
				req = adapter.HTTPRequestWithRoute(r, h.route(r))
			}
			out := m.Handle(req)
			if m.Counting() {
				h.counting(m, next, w, r, out)
				return
			}
			out.Headers.SetHTTP(w.Header())
			if m.Charging() && out.Proceed() {
				// charged once the handler returns, or panics
				meter := new(adapter.Meter)
				r = r.WithContext(adapter.WithMeter(r.Context(), meter))
				defer m.Charge(r.Context(), out, meter)
			}
			h.answer(next, w, r, &out)
		})
	}, nil
}

// answer calls next, or answers out's denial or error.
func (h *hooks) answer(next http.Handler, w http.ResponseWriter, r *http.Request, out *adapter.Outcome) {
	switch {
	case out.Proceed():
		next.ServeHTTP(w, r)
	case out.Limited() && h.denied != nil:
		h.denied(w, r, out.Decision)
	case !out.Limited() && h.onError != nil:
		h.onError(w, r, out.Status, out.Err)
	default:
		w.Header().Set("Content-Type", adapter.ProblemContentType)
		w.WriteHeader(out.Status)
		_, _ = w.Write(out.Body) // an error means the client is gone
	}
}

// counting answers as answer does, through a writer that tells the
// answer's tally when its status goes out (and sets the fields that go
// with it), for the rules that count only some answers; then it reports
// the status: the one sent, else 200 (net/http's answer to a handler that
// wrote nothing), or 500 when the handler panicked before answering.
func (h *hooks) counting(m *adapter.Middleware, next http.Handler, w http.ResponseWriter, r *http.Request, out adapter.Outcome) {
	rec := &statusRecorder{ResponseWriter: w, tally: m.Tally(out)}
	preset := rec.tally.Preset()
	preset.SetHTTP(w.Header())
	panicked := true
	defer func() {
		status := http.StatusOK
		if panicked {
			status = http.StatusInternalServerError
		} else {
			rec.send(status) // net/http sends 200 once the handler returns
		}
		_ = rec.tally.Done(r.Context(), status) // the Limiter reports the error
	}()
	h.answer(next, rec, r, &out)
	panicked = false
}

// statusRecorder tells an answer's tally when its status goes out, for
// rules that count only some answers.
type statusRecorder struct {
	http.ResponseWriter
	tally adapter.Tally
}

// send tells the tally that status goes out now, and sets the fields that
// go with it.
func (w *statusRecorder) send(status int) {
	if h, ok := w.tally.Sent(status); ok {
		h.SetHTTP(w.Header())
	}
}

func (w *statusRecorder) WriteHeader(status int) {
	w.send(status)
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	w.send(http.StatusOK) // as net/http does when nothing was sent
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered, as the wrapped writer does.
func (w *statusRecorder) Flush() {
	w.send(http.StatusOK)
	_ = http.NewResponseController(w.ResponseWriter).Flush() // a writer that cannot flush has nothing to send early
}

// Unwrap returns the wrapped writer, for [http.ResponseController].
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// WithCharged makes the named rules charge what each answer cost once it is
// done, as its handler reports it with [AddCost]: a request is admitted while
// its key is not in debt, and the answer's units are charged whatever is
// left, in the background once the handler returns (or panics), so that
// the next requests wait out the debt ([adapter.Config.Charged]).
func WithCharged(rules ...string) Option { return adapter.WithCharged[hooks](rules...) }

// AddCost counts n more units of the answer to r, for the rules of
// [WithCharged]: call it as the answer is produced (each streamed token),
// so that an answer cut short is charged what was sent. Without such
// rules it does nothing.
func AddCost(r *http.Request, n int) { adapter.MeterOf(r.Context()).Add(n) }

// MustNew is [New] for rules and options fixed at start-up: it panics if
// they are invalid.
func MustNew(l *core.Limiter, rules []core.Rule, opts ...Option) func(http.Handler) http.Handler {
	mw, err := New(l, rules, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

// Wrap returns h limited by rules: New(l, rules, opts...)(h), for limiting
// one handler, such as a login endpoint:
//
//	login, err := nethttp.Wrap(http.HandlerFunc(handleLogin), limiter, loginRules)
//	mux.Handle("POST /login", login)
func Wrap(h http.Handler, l *core.Limiter, rules []core.Rule, opts ...Option) (http.Handler, error) {
	mw, err := build("nethttp.Wrap", l, rules, opts)
	if err != nil {
		return nil, err
	}
	return mw(h), nil
}
