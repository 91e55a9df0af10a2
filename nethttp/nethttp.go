// Package nethttp rate-limits net/http handlers with a [core.Limiter].
//
// [New] returns ordinary func(http.Handler) http.Handler middleware, so it
// serves the standard library's http.ServeMux, chi (r.Use, r.With), and
// gorilla/mux (r.Use) alike; [Wrap] limits one handler. Install one
// middleware globally and others per route: they stack, each with its own
// rules, and the response describes the rules of all of them (see
// [core.Headers.SetHTTP]). Each decides on its own: a request that an inner
// middleware denies has spent the outer one's quota.
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
	"errors"
	"net/http"

	"github.com/ratekit/ratekit/core"
)

// Option configures a middleware. Options are sealed: only this package
// makes them.
type Option func(*config) error

type config struct {
	core    core.MiddlewareConfig
	skip    func(*http.Request) bool
	route   func(*http.Request) string
	denied  func(http.ResponseWriter, *http.Request, core.Decision)
	onError func(http.ResponseWriter, *http.Request, error)
}

var errNilFunc = errors.New("nethttp: nil function in option")

// WithSkip makes the middleware pass requests for which skip reports true
// straight to the next handler, unlimited and without rate-limit headers:
// health checks, say. By default no request is skipped. To exempt requests
// from one rule only, set that rule's Skip.
func WithSkip(skip func(*http.Request) bool) Option {
	return func(c *config) error {
		if skip == nil {
			return errNilFunc
		}
		c.skip = skip
		return nil
	}
}

// WithRoute makes route report the matched route pattern of a request, for
// routers that do not set r.Pattern; by default the pattern is r.Pattern.
func WithRoute(route func(r *http.Request) string) Option {
	return func(c *config) error {
		if route == nil {
			return errNilFunc
		}
		c.route = route
		return nil
	}
}

// WithHeaders selects the rate-limit header fields that responses carry;
// [core.HeadersBoth] by default. See [core.NewHeaders] for their values.
func WithHeaders(style core.HeaderStyle) Option {
	return func(c *config) error { c.core.Headers = style; return nil }
}

// WithIETFDraft selects the syntax of the IETF RateLimit-Policy and
// RateLimit fields; [core.DefaultIETFDraft] by default.
func WithIETFDraft(draft core.IETFDraft) Option {
	return func(c *config) error { c.core.Draft = draft; return nil }
}

// WithDeniedHandler replaces the default answer to a limited request (429
// with a problem+json body). When denied runs, the rate-limit headers and
// Retry-After are already set on w; denied writes the status and body.
func WithDeniedHandler(denied func(w http.ResponseWriter, r *http.Request, d core.Decision)) Option {
	return func(c *config) error {
		if denied == nil {
			return errNilFunc
		}
		c.denied = denied
		return nil
	}
}

// WithErrorHandler replaces the default answer when no decision could be
// made: err wraps [core.ErrUnavailable] when the store is unavailable and
// the Limiter fails closed (Retry-After is already set on w; the default
// answer is the fail-closed status), [core.ErrNoIdentity] when a rule found
// no identity under [core.NoIdentity401] (default 401), and is a
// misconfiguration otherwise (default 500). Its text is for logs: do not
// send it to clients.
func WithErrorHandler(onError func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(c *config) error {
		if onError == nil {
			return errNilFunc
		}
		c.onError = onError
		return nil
	}
}

// WithFailClosedStatus sets the status of the answer when the store is
// unavailable and the Limiter fails closed; 503 by default.
func WithFailClosedStatus(status int) Option {
	return func(c *config) error { c.core.FailClosedStatus = status; return nil }
}

// WithNoIdentity says what to do when a rule's key function finds no
// identity: skip that rule ([core.NoIdentityNext], the default) or answer
// 401 ([core.NoIdentity401]).
func WithNoIdentity(policy core.NoIdentityPolicy) Option {
	return func(c *config) error { c.core.NoIdentity = policy; return nil }
}

// New returns middleware that checks each request against rules with l,
// sets the rate-limit headers, and either calls the next handler or answers
// 429 with Retry-After. The request's context reaches the store. It returns
// an error for invalid rules or options.
func New(l *core.Limiter, rules []core.Rule, opts ...Option) (func(http.Handler) http.Handler, error) {
	var c config
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("nethttp: nil option")
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	m, err := core.NewMiddleware(l, rules, c.core)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.skip != nil && c.skip(r) {
				next.ServeHTTP(w, r)
				return
			}
			req := core.HTTPRequest(r)
			if c.route != nil {
				req = core.HTTPRequestWithRoute(r, c.route(r))
			}
			out := m.Handle(req)
			out.Headers.SetHTTP(w.Header())
			switch {
			case out.Proceed():
				next.ServeHTTP(w, r)
			case out.Limited() && c.denied != nil:
				c.denied(w, r, out.Decision)
			case !out.Limited() && c.onError != nil:
				c.onError(w, r, out.Err)
			default:
				w.Header().Set("Content-Type", core.ProblemContentType)
				w.WriteHeader(out.Status)
				_, _ = w.Write(out.Body) // an error means the client is gone
			}
		})
	}, nil
}

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
	mw, err := New(l, rules, opts...)
	if err != nil {
		return nil, err
	}
	return mw(h), nil
}
