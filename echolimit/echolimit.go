// Package echolimit rate-limits Echo (v4) handlers with a [core.Limiter].
//
// [New] returns an echo.MiddlewareFunc: use it globally (e.Use), on a group
// (e.Group(prefix, mw)) or on one route (e.POST("/login", h, mw)).
// Middlewares stack, each with its own rules, and the response describes the
// rules of all of them (see [adapter.Headers.SetHTTP]). A limited request is
// answered 429 with Retry-After and the next handler is not called.
//
// Per-route keys (keyfuncs.Route) read c.Path(), the matched pattern such
// as "/users/:id", never the raw path with its IDs. Echo routes before the
// middlewares added with e.Use run (not those added with e.Pre), so the
// pattern is there in a global middleware too. The store sees
// c.Request().Context(). Key and cost functions over the echo.Context are
// made with [Key] and [Cost].
//
// [InFlight] caps how many requests run at once instead (package
// inflight), with the same options but for its denied handler.
package echolimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
)

// Option configures a middleware. Options are sealed: only this package
// makes them.
type Option = adapter.Option[hooks]

// hooks are what this package's own options set, in Echo's types.
type hooks struct {
	skipper        func(echo.Context) bool
	denied         func(echo.Context, core.Decision) error
	inFlightDenied func(echo.Context, inflight.Result) error
	onError        func(echo.Context, int, error) error
}

// WithSkipper makes the middleware pass requests for which skipper reports
// true straight to the next handler, unlimited and without rate-limit
// headers: health checks, say. An echo middleware.Skipper fits. By default
// no request is skipped. To exempt requests from one rule only, set that
// rule's Skip.
func WithSkipper(skipper func(c echo.Context) bool) Option {
	return adapter.WithHook("WithSkipper", skipper == nil, func(h *hooks) { h.skipper = skipper })
}

// WithDeniedHandler replaces the default answer to a limited request (429
// with a problem+json body). When denied runs, the rate-limit headers and
// Retry-After are already set; denied writes the answer, or returns an
// error for Echo's HTTPErrorHandler, such as
// echo.NewHTTPError(http.StatusTooManyRequests).
func WithDeniedHandler(denied func(c echo.Context, d core.Decision) error) Option {
	return adapter.WithHook("WithDeniedHandler", denied == nil, func(h *hooks) { h.denied = denied })
}

// WithErrorHandler replaces the default answer when no decision could be
// made, with status the status the default answer would have: err wraps
// [core.ErrUnavailable] when the store is unavailable and the Limiter fails
// closed (Retry-After is already set; status is the fail-closed status, 503
// by default), [core.ErrNoIdentity] when a rule found no identity under
// [adapter.NoIdentity401] (401), the request's context's error
// (context.Canceled or context.DeadlineExceeded) when it ended before a
// decision (503), and is a misconfiguration otherwise (500). err's text is
// for logs: do not send it to clients.
func WithErrorHandler(onError func(c echo.Context, status int, err error) error) Option {
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

// WithCharged makes the named rules charge what each answer cost once it is
// done, as its handler reports it with [AddCost]: a request is admitted while
// its key is not in debt, and the answer's units are charged whatever is
// left, in the background once the next handler returns (or panics), so
// that the next requests wait out the debt. See [adapter.Config.Charged].
func WithCharged(rules ...string) Option { return adapter.WithCharged[hooks](rules...) }

// AddCost counts n more units of the answer to c, for the rules of
// [WithCharged]: call it as the answer is produced (each streamed token,
// say after a flush of c.Response()), so that an answer cut short is
// charged what was sent. Without such rules it does nothing. The units are
// counted in the context of c.Request(), which the middleware replaces; a
// handler that sets another request keeps them by deriving it from that
// context.
func AddCost(c echo.Context, n int) { adapter.MeterOf(c.Request().Context()).Add(n) }

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
// 429 with Retry-After. It returns an error for invalid rules or options.
func New(l *core.Limiter, rules []core.Rule, opts ...Option) (echo.MiddlewareFunc, error) {
	m, h, err := adapter.Build("echolimit.New", l, rules, opts)
	if err == nil && h.inFlightDenied != nil {
		err = fmt.Errorf("echolimit.New: %w: WithInFlightDeniedHandler is for InFlight", adapter.ErrOptionMismatch)
	}
	if err != nil {
		return nil, err
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if h.skipper != nil && h.skipper(c) {
				return next(c)
			}
			req := requests.Get().(*request)
			req.c = c
			out := m.Handle(req)
			req.c = nil
			requests.Put(req)
			if m.Charging() && out.Proceed() {
				// charged once the next handler returns, or panics
				meter := new(adapter.Meter)
				c.SetRequest(c.Request().WithContext(adapter.WithMeter(c.Request().Context(), meter)))
				defer m.Charge(c.Request().Context(), out, meter)
			}
			if m.Counting() {
				return h.counting(m, c, next, out)
			}
			out.Headers.SetHTTP(c.Response().Header())
			return h.answer(c, next, &out)
		}
	}, nil
}

// counting answers as answer does, for the rules that count only some
// answers: the answer's tally learns its status when it goes out (Echo's
// Before hook, which also sets the fields that go with it); then it
// reports the status: the one sent, else the one Echo's error handler
// will send for err, or 200, or 500 when the handler panicked before
// answering.
func (h *hooks) counting(m *adapter.Middleware, c echo.Context, next echo.HandlerFunc, out adapter.Outcome) (err error) {
	res := c.Response()
	t := m.Tally(out)
	preset := t.Preset()
	preset.SetHTTP(res.Header())
	send := func(status int) {
		if h, ok := t.Sent(status); ok {
			h.SetHTTP(res.Header())
		}
	}
	res.Before(func() { send(res.Status) })
	panicked := true
	defer func() {
		status := http.StatusInternalServerError
		if !panicked {
			status = statusOf(c, err)
			if err == nil && !res.Committed {
				send(status) // net/http sends 200 once the handler returns
			}
		}
		_ = t.Done(c.Request().Context(), status) // the Limiter reports the error
	}()
	err = h.answer(c, next, &out)
	panicked = false
	return err
}

// answer calls next, or answers out's denial or error.
func (h *hooks) answer(c echo.Context, next echo.HandlerFunc, out *adapter.Outcome) error {
	switch {
	case out.Proceed():
		return next(c)
	case out.Limited() && h.denied != nil:
		return h.denied(c, out.Decision)
	case !out.Limited() && h.onError != nil:
		return h.onError(c, out.Status, out.Err)
	}
	return c.Blob(out.Status, adapter.ProblemContentType, out.Body)
}

// statusOf returns the status of the answer to c, whose handler returned
// err: the status written, else the one Echo's error handler will write
// for err (500 for an error that names none), else 200.
func statusOf(c echo.Context, err error) int {
	if r := c.Response(); r.Committed {
		return r.Status
	}
	var he *echo.HTTPError
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &he):
		return he.Code
	}
	return http.StatusInternalServerError
}

// MustNew is [New] for rules and options fixed at start-up: it panics if
// they are invalid.
func MustNew(l *core.Limiter, rules []core.Rule, opts ...Option) echo.MiddlewareFunc {
	mw, err := New(l, rules, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

var errNotEcho = errors.New("echolimit: request not from an echolimit middleware")

// Context returns the echo.Context of a request that an echolimit
// middleware handles, and false for any other request.
func Context(r core.Request) (echo.Context, bool) {
	if req, ok := r.(*request); ok {
		return req.c, true
	}
	return nil, false
}

// Key returns a key function over the echo.Context, for identities that
// only Echo knows, such as a value an earlier middleware put with c.Set:
//
//	echolimit.Key(func(c echo.Context) (string, error) {
//		if id, _ := c.Get("tenant").(string); id != "" {
//			return "tenant:" + id, nil
//		}
//		return "", core.ErrNoIdentity
//	})
//
// Like every key function, fn returns an error wrapping [core.ErrNoIdentity]
// when it finds no identity. Outside an echolimit middleware the key
// function fails with an error that does not.
func Key(fn func(echo.Context) (string, error)) core.KeyFunc {
	return func(r core.Request) (string, error) {
		c, ok := Context(r)
		if !ok {
			return "", errNotEcho
		}
		return fn(c)
	}
}

// Cost returns a cost function over the echo.Context. Outside an echolimit
// middleware it returns 0, which the Limiter rejects as an invalid cost.
func Cost(fn func(echo.Context) int) func(core.Request) int {
	return func(r core.Request) int {
		c, ok := Context(r)
		if !ok {
			return 0
		}
		return fn(c)
	}
}

// request is the core.Request view of an echo.Context. Views are pooled:
// an interface does not fit in another interface without an allocation, and
// no key, cost or skip function keeps the Request it is given.
type request struct{ c echo.Context }

var requests = sync.Pool{New: func() any { return new(request) }}

func (r *request) Context() context.Context          { return r.c.Request().Context() }
func (r *request) Method() string                    { return r.c.Request().Method }
func (r *request) Path() string                      { return r.c.Request().URL.Path }
func (r *request) Route() string                     { return r.c.Path() }
func (r *request) Header(name string) string         { return r.c.Request().Header.Get(name) }
func (r *request) HeaderValues(name string) []string { return r.c.Request().Header.Values(name) }
func (r *request) Query(name string) string          { return r.c.QueryParam(name) }
func (r *request) RemoteAddr() string                { return r.c.Request().RemoteAddr }
