// Package fiber3limit rate-limits Fiber v3 handlers
// (github.com/gofiber/fiber/v3) with a [core.Limiter]. For Fiber v2, use
// package fiberlimit.
//
// [New] returns a fiber.Handler, func(fiber.Ctx) error: use it globally
// (app.Use), on a group (app.Group(prefix, mw)) or on one route
// (app.Post("/login", mw, h)). Middlewares stack, each with its own rules,
// and the response describes the rules of all of them (see
// [adapter.Headers.Set]). A limited request is answered 429 with
// Retry-After and the next handler is not called.
//
// The request is read through fasthttp directly, never converted to
// net/http. Strings read through the [core.Request] view are fasthttp's own
// buffers, valid only while the middleware runs (unless the app is
// Immutable): the stock key functions build fresh identities, and
// identities from [Key] are copied, so nothing of a request outlives its
// handler.
//
// Key functions get the socket peer as the remote address, never c.IP(),
// which follows the app's ProxyHeader and TrustProxy settings: which
// forwarding headers to believe, and from which proxies, is for
// keyfuncs.IP to decide (keyfuncs.TrustedProxies), the same way in every
// framework.
//
// Per-route keys (keyfuncs.Route) read c.Route().Path, the pattern of the
// route being served, such as "/users/:id", never the raw path with its
// IDs. In Fiber a middleware is a route of its own: one added with app.Use
// or on a group sees its own prefix as the pattern, so a key that needs the
// final route's pattern belongs to a middleware added on that route.
//
// The store sees c.Context(), the context.Context that Fiber v3 keeps for
// the request: context.Background() unless a handler before the middleware
// set one with c.SetContext, as Fiber's timeout middleware does. Key and
// cost functions over the fiber.Ctx are made with [Key] and [Cost].
//
// [InFlight] caps how many requests run at once instead (package
// inflight), with the same options but for its denied handler.
package fiber3limit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v3"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
)

// New returns middleware that checks each request against rules with l,
// sets the rate-limit headers, and either calls c.Next() or answers 429
// with Retry-After. It returns an error for invalid rules or options.
func New(l *core.Limiter, rules []core.Rule, opts ...Option) (fiber.Handler, error) {
	m, h, err := adapter.Build("fiber3limit.New", l, rules, opts)
	if err == nil && h.inFlightDenied != nil {
		err = fmt.Errorf("fiber3limit.New: %w: WithInFlightDeniedHandler is for InFlight", adapter.ErrOptionMismatch)
	}
	if err != nil {
		return nil, err
	}
	mw := &middleware{m: m, hooks: h}
	return mw.serve, nil
}

// MustNew is [New] for rules and options fixed at start-up: it panics if
// they are invalid.
func MustNew(l *core.Limiter, rules []core.Rule, opts ...Option) fiber.Handler {
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

// serve is the fiber.Handler of mw.
func (mw *middleware) serve(c fiber.Ctx) error {
	if mw.next != nil && mw.next(c) {
		return c.Next()
	}
	counting := mw.m.Counting()
	out := mw.decide(c, !counting)
	if mw.m.Charging() && out.Proceed() {
		// charged once the next handlers return, or panic
		meter := new(adapter.Meter)
		c.SetContext(adapter.WithMeter(c.Context(), meter))
		defer mw.m.Charge(c.Context(), out, meter)
	}
	if counting {
		return mw.counting(c, out)
	}
	return mw.answer(c, &out)
}

// answer calls the next handler, or answers out's denial or error.
func (mw *middleware) answer(c fiber.Ctx, out *adapter.Outcome) error {
	switch {
	case out.Proceed():
		return c.Next()
	case out.Limited() && mw.denied != nil:
		return mw.denied(c, out.Decision)
	case !out.Limited() && mw.onError != nil:
		return mw.onError(c, out.Status, out.Err)
	}
	c.Status(out.Status).Set(fiber.HeaderContentType, adapter.ProblemContentType)
	return c.Send(out.Body) // shared and never modified, as Send requires
}

// counting answers as answer does, for the rules that count only some
// answers, then sets the fields of the answer's status and reports it
// (Fiber sends the answer once the handlers return): the status of a
// returned *fiber.Error (500 for another error, as Fiber's error handler
// answers), else the response's; when a handler panicked, the status it
// had set (it answered that), or 500 if it set none.
func (mw *middleware) counting(c fiber.Ctx, out adapter.Outcome) (err error) {
	ctx := c.Context()
	t := mw.m.Tally(out)
	preset := t.Preset()
	mw.setHeaders(c, &preset)
	panicked := true
	defer func() {
		status := http.StatusInternalServerError
		var fe *fiber.Error
		switch s := c.Response().StatusCode(); {
		case panicked:
			if s != http.StatusOK { // Fiber's default: nothing was set
				status = s
			}
		case err == nil:
			status = s
		case errors.As(err, &fe):
			status = fe.Code
		}
		if h, ok := t.Sent(status); ok {
			mw.setHeaders(c, &h)
		}
		_ = t.Done(ctx, status) // the Limiter reports the error
	}()
	err = mw.answer(c, &out)
	panicked = false
	return err
}

// setHeaders sets h on c's response, through a pooled view.
func (mw *middleware) setHeaders(c fiber.Ctx, h *adapter.Headers) {
	if h.Len() == 0 {
		return
	}
	v := views.Get().(*view)
	v.c = c
	h.Set((*responseHeader)(v))
	v.c = nil
	views.Put(v)
}

// decide checks c against the rules and, if set, sets the rate-limit
// headers on its response. It reads and writes c through a pooled view: a fiber.Ctx is an
// interface, which does not fit in another interface without an
// allocation, and no key, cost or skip function keeps the Request it is
// given.
func (mw *middleware) decide(c fiber.Ctx, set bool) adapter.Outcome {
	v := views.Get().(*view)
	v.c = c
	out := mw.m.Handle((*request)(v))
	if set {
		out.Headers.Set((*responseHeader)(v))
	}
	v.c = nil
	views.Put(v)
	return out
}

var errNotFiber = errors.New("fiber3limit: request not from a fiber3limit middleware")

// Context returns the fiber.Ctx of a request that a fiber3limit middleware
// handles, and false for any other request.
func Context(r core.Request) (fiber.Ctx, bool) {
	if req, ok := r.(*request); ok {
		return req.c, true
	}
	return nil, false
}

// Key returns a key function over the fiber.Ctx, for identities that only
// Fiber knows, such as a value an earlier handler put with c.Locals:
//
//	fiber3limit.Key(func(c fiber.Ctx) (string, error) {
//		if id, _ := c.Locals("tenant").(string); id != "" {
//			return "tenant:" + id, nil
//		}
//		return "", core.ErrNoIdentity
//	})
//
// The identity fn returns is copied, so it may be a string that fasthttp
// will reuse, such as c.Get("X-Tenant-Id"). Like every key function, fn
// returns an error wrapping [core.ErrNoIdentity] when it finds no identity.
// Outside a fiber3limit middleware the key function fails with an error
// that does not.
func Key(fn func(fiber.Ctx) (string, error)) core.KeyFunc {
	return func(r core.Request) (string, error) {
		c, ok := Context(r)
		if !ok {
			return "", errNotFiber
		}
		id, err := fn(c)
		return strings.Clone(id), err
	}
}

// Cost returns a cost function over the fiber.Ctx. Outside a fiber3limit
// middleware it returns 0, which the Limiter rejects as an invalid cost.
func Cost(fn func(fiber.Ctx) int) func(core.Request) int {
	return func(r core.Request) int {
		if c, ok := Context(r); ok {
			return fn(c)
		}
		return 0
	}
}

// view holds the fiber.Ctx of a request being decided. Views are pooled
// (see middleware.decide); a *request reads the request through one, and a
// *responseHeader writes the response header.
type view struct{ c fiber.Ctx }

var views = sync.Pool{New: func() any { return new(view) }}

// responseHeader is the adapter.ResponseHeader view of a fiber.Ctx.
type responseHeader view

func (h *responseHeader) Get(name string) string { return h.c.GetRespHeader(name) }
func (h *responseHeader) Set(name, value string) { h.c.Set(name, value) }

// request is the core.Request view of a fiber.Ctx.
type request view

func (r *request) Context() context.Context  { return r.c.Context() }
func (r *request) Method() string            { return r.c.Method() }
func (r *request) Path() string              { return r.c.Path() }
func (r *request) Route() string             { return r.c.Route().Path }
func (r *request) Header(name string) string { return r.c.Get(name) }
func (r *request) Query(name string) string  { return r.c.Query(name) }

// RemoteAddr returns the socket peer's address, never c.IP(): see the
// package documentation.
func (r *request) RemoteAddr() string { return r.c.RequestCtx().RemoteIP().String() }

// HeaderValues returns copies: fasthttp's PeekAll returns its own buffers.
func (r *request) HeaderValues(name string) []string {
	vals := r.c.Request().Header.PeekAll(name)
	if len(vals) == 0 {
		return nil
	}
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}
