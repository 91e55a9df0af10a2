// Package echo5limit rate-limits Echo v5 handlers
// (github.com/labstack/echo/v5) with a [core.Limiter]. For Echo v4, use
// package echolimit.
//
// [New] returns an echo.MiddlewareFunc, whose handlers take the
// *echo.Context of v5: use it globally (e.Use), on a group
// (e.Group(prefix, mw)) or on one route (e.POST("/login", h, mw)).
// Middlewares stack, each with its own rules, and the response describes the
// rules of all of them (see [adapter.Headers.SetHTTP]). A limited request is
// answered 429 with Retry-After and the next handler is not called.
//
// Key functions get the socket peer (the request's RemoteAddr) as the
// remote address, never c.RealIP(), which follows Echo's IPExtractor:
// which forwarding headers to believe, and from which proxies, is for
// keyfuncs.IP to decide (keyfuncs.TrustedProxies), the same way in every
// framework.
//
// Per-route keys (keyfuncs.Route) read c.Path(), the matched pattern such
// as "/users/:id", never the raw path with its IDs. Echo routes before the
// middlewares added with e.Use run (not those added with e.Pre), so the
// pattern is there in a global middleware too. The store sees
// c.Request().Context(). Key and cost functions over the *echo.Context are
// made with [Key] and [Cost].
//
// [InFlight] caps how many requests run at once instead (package
// inflight), with the same options but for its denied handler.
package echo5limit

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
)

// New returns middleware that checks each request against rules with l,
// sets the rate-limit headers, and either calls the next handler or answers
// 429 with Retry-After. It returns an error for invalid rules or options.
func New(l *core.Limiter, rules []core.Rule, opts ...Option) (echo.MiddlewareFunc, error) {
	m, h, err := adapter.Build("echo5limit.New", l, rules, opts)
	if err == nil && h.inFlightDenied != nil {
		err = fmt.Errorf("echo5limit.New: %w: WithInFlightDeniedHandler is for InFlight", adapter.ErrOptionMismatch)
	}
	if err != nil {
		return nil, err
	}
	mw := &middleware{m: m, hooks: h}
	return mw.wrap, nil
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

// middleware is one middleware made by New.
type middleware struct {
	m *adapter.Middleware
	hooks
}

// wrap is the echo.MiddlewareFunc of mw. Echo v5 applies it when it builds
// a chain (at e.Use, and when a route is added), never per request as
// Echo v4 does: its closure costs no allocation per request.
func (mw *middleware) wrap(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if mw.skipper != nil && mw.skipper(c) {
			return next(c)
		}
		// a *echo.Context is one pointer: the view costs no allocation
		out := mw.m.Handle(request{c})
		if mw.m.Charging() && out.Proceed() {
			// charged once the next handler returns, or panics
			meter := new(adapter.Meter)
			c.SetRequest(c.Request().WithContext(adapter.WithMeter(c.Request().Context(), meter)))
			defer mw.m.Charge(c.Request().Context(), out, meter)
		}
		if mw.m.Counting() {
			return mw.counting(c, next, out)
		}
		out.Headers.SetHTTP(c.Response().Header())
		return mw.answer(c, next, &out)
	}
}

// answer calls next, or answers out's denial or error.
func (mw *middleware) answer(c *echo.Context, next echo.HandlerFunc, out *adapter.Outcome) error {
	switch {
	case out.Proceed():
		return next(c)
	case out.Limited() && mw.denied != nil:
		return mw.denied(c, out.Decision)
	case !out.Limited() && mw.onError != nil:
		return mw.onError(c, out.Status, out.Err)
	}
	return c.Blob(out.Status, adapter.ProblemContentType, out.Body)
}

// counting answers as answer does, for the rules that count only some
// answers: the answer's tally learns its status when it goes out (Echo's
// Before hook, which also sets the fields that go with it); then it
// reports the status: the one sent, else the one Echo's error handler
// will send for err, or 200, or 500 when the handler panicked before
// answering.
func (mw *middleware) counting(c *echo.Context, next echo.HandlerFunc, out adapter.Outcome) (err error) {
	header := c.Response().Header()
	t := mw.m.Tally(out)
	preset := t.Preset()
	preset.SetHTTP(header)
	send := func(status int) {
		if h, ok := t.Sent(status); ok {
			h.SetHTTP(header)
		}
	}
	res, _ := echo.UnwrapResponse(c.Response())
	if res != nil {
		res.Before(func() { send(res.Status) })
	} else {
		// a writer that hides Echo's: its status cannot be seen going out,
		// so the fields are those of an answer that counts
		out.Headers.SetHTTP(header)
		send = func(int) {}
	}
	panicked := true
	defer func() {
		status := http.StatusInternalServerError
		if !panicked {
			status = statusOf(c, err)
			if err == nil && (res == nil || !res.Committed) {
				send(status) // net/http sends 200 once the handler returns
			}
		}
		_ = t.Done(c.Request().Context(), status) // the Limiter reports the error
	}()
	err = mw.answer(c, next, &out)
	panicked = false
	return err
}

// statusOf returns the status of the answer to c, whose handler returned
// err: the status written, else the one Echo's error handler will write
// for err (an [echo.HTTPStatusCoder]'s, 500 for another error), else 200.
func statusOf(c *echo.Context, err error) int {
	if r, _ := echo.UnwrapResponse(c.Response()); r != nil && r.Committed {
		return r.Status
	}
	var sc echo.HTTPStatusCoder
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &sc):
		return sc.StatusCode()
	}
	return http.StatusInternalServerError
}

var errNotEcho = errors.New("echo5limit: request not from an echo5limit middleware")

// Context returns the *echo.Context of a request that an echo5limit
// middleware handles, and false for any other request.
func Context(r core.Request) (*echo.Context, bool) {
	req, ok := r.(request)
	return req.c, ok
}

// Key returns a key function over the *echo.Context, for identities that
// only Echo knows, such as a value an earlier middleware put with c.Set:
//
//	echo5limit.Key(func(c *echo.Context) (string, error) {
//		if id, _ := c.Get("tenant").(string); id != "" {
//			return "tenant:" + id, nil
//		}
//		return "", core.ErrNoIdentity
//	})
//
// Like every key function, fn returns an error wrapping [core.ErrNoIdentity]
// when it finds no identity. Outside an echo5limit middleware the key
// function fails with an error that does not.
func Key(fn func(*echo.Context) (string, error)) core.KeyFunc {
	return func(r core.Request) (string, error) {
		if c, ok := Context(r); ok {
			return fn(c)
		}
		return "", errNotEcho
	}
}

// Cost returns a cost function over the *echo.Context. Outside an
// echo5limit middleware it returns 0, which the Limiter rejects as an
// invalid cost.
func Cost(fn func(*echo.Context) int) func(core.Request) int {
	return func(r core.Request) int {
		if c, ok := Context(r); ok {
			return fn(c)
		}
		return 0
	}
}

// request is the core.Request view of an *echo.Context.
type request struct{ c *echo.Context }

func (r request) Context() context.Context          { return r.c.Request().Context() }
func (r request) Method() string                    { return r.c.Request().Method }
func (r request) Path() string                      { return r.c.Request().URL.Path }
func (r request) Route() string                     { return r.c.Path() }
func (r request) Header(name string) string         { return r.c.Request().Header.Get(name) }
func (r request) HeaderValues(name string) []string { return r.c.Request().Header.Values(name) }
func (r request) Query(name string) string          { return r.c.QueryParam(name) }
func (r request) RemoteAddr() string                { return r.c.Request().RemoteAddr }
