// Package fiberlimit rate-limits Fiber (v2) handlers with a [core.Limiter].
//
// [New] returns a fiber.Handler: use it globally (app.Use), on a group
// (app.Group(prefix, mw)) or on one route (app.Post("/login", mw, h)).
// Middlewares stack, each with its own rules, and the response describes the
// rules of all of them (see [adapter.Headers.Set]). A limited request is
// answered 429 with Retry-After and the next handler is not called.
//
// The request is read through fasthttp directly, never converted to
// net/http. Strings read through the [core.Request] view are fasthttp's own
// buffers, valid only while the middleware runs: the stock key functions
// build fresh identities, and identities from [Key] are copied, so nothing
// of a request outlives its handler.
//
// Per-route keys (keyfuncs.Route) read c.Route().Path, the pattern of the
// route being served, such as "/users/:id", never the raw path with its
// IDs. In Fiber a middleware is a route of its own: one added with app.Use
// or on a group sees its own prefix as the pattern, so a key that needs the
// final route's pattern belongs to a middleware added on that route. The
// store sees c.UserContext().
//
// [InFlight] caps how many requests run at once instead (package
// inflight), with the same options but for its denied handler.
package fiberlimit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
)

// Option configures a middleware. Options are sealed: only this package
// makes them.
type Option = adapter.Option[hooks]

// hooks are what this package's own options set, in Fiber's types.
type hooks struct {
	next           func(*fiber.Ctx) bool
	denied         func(*fiber.Ctx, core.Decision) error
	inFlightDenied func(*fiber.Ctx, inflight.Result) error
	onError        func(*fiber.Ctx, int, error) error
}

// WithNext makes the middleware pass requests for which next reports true
// straight to the next handler, unlimited and without rate-limit headers:
// health checks, say. It is the Next field of Fiber's own middlewares. By
// default no request is skipped. To exempt requests from one rule only, set
// that rule's Skip.
func WithNext(next func(c *fiber.Ctx) bool) Option {
	return adapter.WithHook("WithNext", next == nil, func(h *hooks) { h.next = next })
}

// WithDeniedHandler replaces the default answer to a limited request (429
// with a problem+json body). When denied runs, the rate-limit headers and
// Retry-After are already set; denied writes the answer, or returns an
// error for the app's ErrorHandler, such as fiber.ErrTooManyRequests.
func WithDeniedHandler(denied func(c *fiber.Ctx, d core.Decision) error) Option {
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
func WithErrorHandler(onError func(c *fiber.Ctx, status int, err error) error) Option {
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
// left, in the background once the next handlers return (or panic), so
// that the next requests wait out the debt. See [adapter.Config.Charged].
//
// A body that a writer streams (c.Context().SetBodyStreamWriter) is written after the handlers
// return: made with [StreamWriter], the writer reports its units as it
// writes, and the charge waits until it returns.
func WithCharged(rules ...string) Option { return adapter.WithCharged[hooks](rules...) }

// AddCost counts n more units of the answer to c, for the rules of
// [WithCharged], while the handler runs. Without such rules it does
// nothing. The units are counted in c.UserContext(), which the middleware
// replaces; a handler that sets another keeps them by deriving it from
// that context.
func AddCost(c *fiber.Ctx, n int) { adapter.MeterOf(c.UserContext()).Add(n) }

// StreamWriter returns sw as a writer of c's streamed body (c.Context().SetBodyStreamWriter)
// whose cost is charged to the rules of [WithCharged]: sw reports the units
// it sends with addCost (each token, after a flush) and, since fasthttp
// runs it once the handlers have returned, the middleware's charge waits
// until sw returns, the body sent or the client gone. The units reported
// with [AddCost] before count too. Call it in the handler; a writer it
// returns must be run, or the answer is never charged. Without such rules
// sw's units count for nothing.
func StreamWriter(c *fiber.Ctx, sw func(w *bufio.Writer, addCost func(n int))) func(w *bufio.Writer) {
	meter := adapter.MeterOf(c.UserContext())
	release := meter.Hold()
	return func(w *bufio.Writer) {
		defer release()
		sw(w, meter.Add)
	}
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
// sets the rate-limit headers, and either calls c.Next() or answers 429
// with Retry-After. It returns an error for invalid rules or options.
func New(l *core.Limiter, rules []core.Rule, opts ...Option) (fiber.Handler, error) {
	m, h, err := adapter.Build("fiberlimit.New", l, rules, opts)
	if err == nil && h.inFlightDenied != nil {
		err = fmt.Errorf("fiberlimit.New: %w: WithInFlightDeniedHandler is for InFlight", adapter.ErrOptionMismatch)
	}
	if err != nil {
		return nil, err
	}
	return func(c *fiber.Ctx) error {
		if h.next != nil && h.next(c) {
			return c.Next()
		}
		out := m.Handle(request{c})
		if m.Charging() && out.Proceed() {
			// charged once the next handlers return, or panic
			meter := new(adapter.Meter)
			c.SetUserContext(adapter.WithMeter(c.UserContext(), meter))
			defer m.Charge(c.UserContext(), out, meter)
		}
		if m.Counting() {
			return h.counting(m, c, out)
		}
		out.Headers.Set(responseHeader{c})
		return h.answer(c, &out)
	}, nil
}

// answer calls the next handler, or answers out's denial or error.
func (h *hooks) answer(c *fiber.Ctx, out *adapter.Outcome) error {
	switch {
	case out.Proceed():
		return c.Next()
	case out.Limited() && h.denied != nil:
		return h.denied(c, out.Decision)
	case !out.Limited() && h.onError != nil:
		return h.onError(c, out.Status, out.Err)
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
func (h *hooks) counting(m *adapter.Middleware, c *fiber.Ctx, out adapter.Outcome) (err error) {
	ctx := c.UserContext()
	t := m.Tally(out)
	preset := t.Preset()
	preset.Set(responseHeader{c})
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
		if fields, ok := t.Sent(status); ok {
			fields.Set(responseHeader{c})
		}
		_ = t.Done(ctx, status) // the Limiter reports the error
	}()
	err = h.answer(c, &out)
	panicked = false
	return err
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

var errNotFiber = errors.New("fiberlimit: request not from a fiberlimit middleware")

// Context returns the *fiber.Ctx of a request that a fiberlimit middleware
// handles, and false for any other request.
func Context(r core.Request) (*fiber.Ctx, bool) {
	req, ok := r.(request)
	return req.c, ok
}

// Key returns a key function over the *fiber.Ctx, for identities that only
// Fiber knows, such as a value an earlier handler put with c.Locals:
//
//	fiberlimit.Key(func(c *fiber.Ctx) (string, error) {
//		if id, _ := c.Locals("tenant").(string); id != "" {
//			return "tenant:" + id, nil
//		}
//		return "", core.ErrNoIdentity
//	})
//
// The identity fn returns is copied, so it may be a string that fasthttp
// will reuse, such as c.Get("X-Tenant-Id"). Like every key function, fn
// returns an error wrapping [core.ErrNoIdentity] when it finds no identity.
// Outside a fiberlimit middleware the key function fails with an error that
// does not.
func Key(fn func(*fiber.Ctx) (string, error)) core.KeyFunc {
	return func(r core.Request) (string, error) {
		c, ok := Context(r)
		if !ok {
			return "", errNotFiber
		}
		id, err := fn(c)
		return strings.Clone(id), err
	}
}

// Cost returns a cost function over the *fiber.Ctx. Outside a fiberlimit
// middleware it returns 0, which the Limiter rejects as an invalid cost.
func Cost(fn func(*fiber.Ctx) int) func(core.Request) int {
	return func(r core.Request) int {
		c, ok := Context(r)
		if !ok {
			return 0
		}
		return fn(c)
	}
}

// responseHeader is the adapter.ResponseHeader view of a *fiber.Ctx.
type responseHeader struct{ c *fiber.Ctx }

func (h responseHeader) Get(name string) string { return h.c.GetRespHeader(name) }
func (h responseHeader) Set(name, value string) { h.c.Set(name, value) }

// request is the core.Request view of a *fiber.Ctx; one pointer, so making
// one allocates nothing.
type request struct{ c *fiber.Ctx }

func (r request) Context() context.Context  { return r.c.UserContext() }
func (r request) Method() string            { return r.c.Method() }
func (r request) Path() string              { return r.c.Path() }
func (r request) Route() string             { return r.c.Route().Path }
func (r request) Header(name string) string { return r.c.Get(name) }
func (r request) Query(name string) string  { return r.c.Query(name) }

// RemoteAddr returns the socket peer's address: never c.IP(), which reads
// Fiber's ProxyHeader from anyone when it is configured; keyfuncs.IP reads
// forwarding headers only from trusted proxies. A peer on a Unix socket has
// no address (fasthttp would report 0.0.0.0, one identity for every
// client): RemoteAddr is then "", which keyfuncs.IP finds no identity in,
// as under net/http.
func (r request) RemoteAddr() string {
	if a, ok := r.c.Context().RemoteAddr().(*net.TCPAddr); ok {
		return a.String()
	}
	return ""
}

func (r request) HeaderValues(name string) []string {
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
