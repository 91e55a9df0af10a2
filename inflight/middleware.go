package inflight

import (
	"net/http"

	"github.com/ratekit/ratekit/core/adapter"
)

// MiddlewareOption configures a [Middleware]. Options are sealed: only this
// package makes them.
type MiddlewareOption = adapter.Option[httpHooks]

// httpHooks are what the middleware's own options set, in net/http's types.
type httpHooks struct {
	skip    func(*http.Request) bool
	denied  func(http.ResponseWriter, *http.Request, Result)
	onError func(http.ResponseWriter, *http.Request, int, error)
}

// WithSkip makes the middleware pass requests for which skip reports true
// straight to the next handler, without taking a slot. By default no
// request is skipped.
func WithSkip(skip func(*http.Request) bool) MiddlewareOption {
	return adapter.WithHook("WithSkip", skip == nil, func(h *httpHooks) { h.skip = skip })
}

// WithDeniedHandler replaces the default answer to a request beyond the cap
// (429 with a problem+json body). When denied runs, Retry-After is already
// set on w; denied writes the status and body.
func WithDeniedHandler(denied func(w http.ResponseWriter, r *http.Request, res Result)) MiddlewareOption {
	return adapter.WithHook("WithDeniedHandler", denied == nil, func(h *httpHooks) { h.denied = denied })
}

// WithErrorHandler replaces the default answer when no decision could be
// made, with status the status the default answer would have: err wraps
// core.ErrUnavailable when Redis is unavailable and the Limiter fails
// closed (Retry-After is already set on w; status is the fail-closed
// status), core.ErrNoIdentity under [adapter.NoIdentity401] (401), the
// request's context's error when it ended before a decision (503), and is
// a misconfiguration or a refusal of Redis otherwise (500). Its text is for
// logs: do not send it to clients.
func WithErrorHandler(onError func(w http.ResponseWriter, r *http.Request, status int, err error)) MiddlewareOption {
	return adapter.WithHook("WithErrorHandler", onError == nil, func(h *httpHooks) { h.onError = onError })
}

// WithFailClosedStatus sets the status of the answer when Redis is
// unavailable and the Limiter fails closed; 503 by default.
func WithFailClosedStatus(status int) MiddlewareOption {
	return adapter.WithFailClosedStatus[httpHooks](status)
}

// WithNoIdentity says what to do when the rule's key function finds no
// identity: let the request through without a slot
// ([adapter.NoIdentityNext], the default) or answer 401
// ([adapter.NoIdentity401]).
func WithNoIdentity(policy adapter.NoIdentityPolicy) MiddlewareOption {
	return adapter.WithNoIdentity[httpHooks](policy)
}

// Middleware returns net/http middleware that lets at most rule.Limit
// requests of one identity run at once, across every replica sharing l's
// Redis. A request beyond the cap gets 429 Too Many Requests with
// Retry-After (see [DefaultRetryAfter]) and a problem+json body; one that
// gets a slot holds it until the next handler returns, or panics. It
// serves http.ServeMux, chi and gorilla/mux alike. It returns an error for
// an invalid rule or option.
func Middleware(l *Limiter, rule Rule, opts ...MiddlewareOption) (func(http.Handler) http.Handler, error) {
	g, h, err := BuildGuard("inflight.Middleware", l, rule, opts)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if h.skip != nil && h.skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			out := g.Enter(adapter.HTTPRequest(r))
			defer out.Lease.Release(r.Context()) // a failure goes to OnError; the lease then runs out
			out.SetHTTP(w.Header())
			switch {
			case out.Proceed():
				next.ServeHTTP(w, r)
			case out.Limited() && h.denied != nil:
				h.denied(w, r, out.Result)
			case !out.Limited() && h.onError != nil:
				h.onError(w, r, out.Status, out.Err)
			default:
				w.Header().Set("Content-Type", adapter.ProblemContentType)
				w.WriteHeader(out.Status)
				_, _ = w.Write(out.Body) // an error means the client is gone
			}
		})
	}, nil
}

// MustMiddleware is [Middleware] for a rule and options fixed at start-up:
// it panics if they are invalid.
func MustMiddleware(l *Limiter, rule Rule, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	mw, err := Middleware(l, rule, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}
