// Package ginlimit rate-limits Gin handlers with a [core.Limiter].
//
// [New] returns a gin.HandlerFunc: use it globally (r.Use), on a group
// (g.Use) or on one route (r.POST("/login", mw, handler)). Middlewares
// stack, each with its own rules, and the response describes the rules of
// all of them (see [adapter.Headers.SetHTTP]). A limited request is aborted
// with 429 and Retry-After; an allowed one goes on with c.Next().
//
// Per-route keys (keyfuncs.Route) read c.FullPath(), the matched pattern
// such as "/users/:id", never the raw path with its IDs. Gin routes before
// any middleware runs, so the pattern is there even in a global middleware.
// The store sees c.Request.Context(). Key and cost functions over the
// *gin.Context are made with [Key] and [Cost].
//
// [InFlight] caps how many requests run at once instead (package
// inflight), with the same options but for its denied handler.
package ginlimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
)

// Option configures a middleware. Options are sealed: only this package
// makes them.
type Option = adapter.Option[hooks]

// hooks are what this package's own options set, in Gin's types.
type hooks struct {
	skip           func(*gin.Context) bool
	denied         func(*gin.Context, core.Decision)
	inFlightDenied func(*gin.Context, inflight.Result)
	onError        func(*gin.Context, int, error)
}

// WithSkip makes the middleware pass requests for which skip reports true
// straight to the next handler, unlimited and without rate-limit headers:
// health checks, say. By default no request is skipped. To exempt requests
// from one rule only, set that rule's Skip.
func WithSkip(skip func(*gin.Context) bool) Option {
	return adapter.WithHook("WithSkip", skip == nil, func(h *hooks) { h.skip = skip })
}

// WithDeniedHandler replaces the default answer to a limited request (429
// with a problem+json body). When denied runs, the rate-limit headers and
// Retry-After are already set; denied writes the status and body, and the
// middleware aborts the chain after it.
func WithDeniedHandler(denied func(c *gin.Context, d core.Decision)) Option {
	return adapter.WithHook("WithDeniedHandler", denied == nil, func(h *hooks) { h.denied = denied })
}

// WithErrorHandler replaces the default answer when no decision could be
// made, with status the status the default answer would have: err wraps
// [core.ErrUnavailable] when the store is unavailable and the Limiter fails
// closed (Retry-After is already set; status is the fail-closed status, 503
// by default), [core.ErrNoIdentity] when a rule found no identity under
// [adapter.NoIdentity401] (401), the request's context's error
// (context.Canceled or context.DeadlineExceeded) when it ended before a
// decision (503), and is a misconfiguration otherwise (500). The middleware
// aborts the chain after onError. err's text is for logs: do not send it
// to clients.
func WithErrorHandler(onError func(c *gin.Context, status int, err error)) Option {
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
// left, in the background once the handlers after the middleware return (or
// panic), so that the next requests wait out the debt. See
// [adapter.Config.Charged].
func WithCharged(rules ...string) Option { return adapter.WithCharged[hooks](rules...) }

// AddCost counts n more units of the answer to c, for the rules of
// [WithCharged]: call it as the answer is produced (each streamed token,
// say after c.SSEvent or a flush), so that an answer cut short is charged
// what was sent. Without such rules it does nothing. The units are counted
// in c.Request's context, which the middleware replaces; a handler that
// swaps c.Request keeps them by deriving its request from that context.
func AddCost(c *gin.Context, n int) { adapter.MeterOf(c.Request.Context()).Add(n) }

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
// sets the rate-limit headers, and either calls c.Next() or aborts with 429
// and Retry-After. It returns an error for invalid rules or options.
func New(l *core.Limiter, rules []core.Rule, opts ...Option) (gin.HandlerFunc, error) {
	m, h, err := adapter.Build("ginlimit.New", l, rules, opts)
	if err == nil && h.inFlightDenied != nil {
		err = fmt.Errorf("ginlimit.New: %w: WithInFlightDeniedHandler is for InFlight", adapter.ErrOptionMismatch)
	}
	if err != nil {
		return nil, err
	}
	return func(c *gin.Context) {
		if h.skip != nil && h.skip(c) {
			c.Next()
			return
		}
		out := m.Handle(request{c})
		if m.Charging() && out.Proceed() {
			// charged once the handlers return, or panic
			meter := new(adapter.Meter)
			c.Request = c.Request.WithContext(adapter.WithMeter(c.Request.Context(), meter))
			defer m.Charge(c.Request.Context(), out, meter)
		}
		if m.Counting() {
			h.counting(m, c, out)
			return
		}
		out.Headers.SetHTTP(c.Writer.Header())
		h.answer(c, &out)
	}, nil
}

// counting answers as answer does, for the rules that count only some
// answers, through a writer that tells the answer's tally when its status
// goes out (and sets the fields that go with it); then it reports the
// status: the one sent, else the one Gin sends once the handlers return,
// or 500 when a handler panicked before answering.
func (h *hooks) counting(m *adapter.Middleware, c *gin.Context, out adapter.Outcome) {
	w := &tallyWriter{ResponseWriter: c.Writer, tally: m.Tally(out)}
	preset := w.tally.Preset()
	preset.SetHTTP(c.Writer.Header())
	c.Writer = w
	panicked := true
	defer func() {
		c.Writer = w.ResponseWriter
		status := http.StatusInternalServerError
		if !panicked {
			status = c.Writer.Status()
			w.send(status) // Gin sends it once the handlers return
		}
		_ = w.tally.Done(c.Request.Context(), status) // the Limiter reports the error
	}()
	h.answer(c, &out)
	panicked = false
}

// tallyWriter tells an answer's tally when its status goes out, for rules
// that count only some answers: Gin's writer only records the status of
// WriteHeader, and sends it with the first write.
type tallyWriter struct {
	gin.ResponseWriter
	tally adapter.Tally
}

// send tells the tally that status goes out now, and sets the fields that
// go with it.
func (w *tallyWriter) send(status int) {
	if h, ok := w.tally.Sent(status); ok {
		h.SetHTTP(w.Header())
	}
}

func (w *tallyWriter) WriteHeaderNow() {
	w.send(w.Status())
	w.ResponseWriter.WriteHeaderNow()
}

func (w *tallyWriter) Write(b []byte) (int, error) {
	w.send(w.Status())
	return w.ResponseWriter.Write(b)
}

func (w *tallyWriter) WriteString(s string) (int, error) {
	w.send(w.Status())
	return w.ResponseWriter.WriteString(s)
}

func (w *tallyWriter) Flush() {
	w.send(w.Status())
	w.ResponseWriter.Flush()
}

// answer calls the next handler, or answers out's denial or error.
func (h *hooks) answer(c *gin.Context, out *adapter.Outcome) {
	switch {
	case out.Proceed():
		c.Next()
		return
	case out.Limited() && h.denied != nil:
		h.denied(c, out.Decision)
	case !out.Limited() && h.onError != nil:
		h.onError(c, out.Status, out.Err)
	default:
		c.Data(out.Status, adapter.ProblemContentType, out.Body)
	}
	c.Abort()
}

// MustNew is [New] for rules and options fixed at start-up: it panics if
// they are invalid.
func MustNew(l *core.Limiter, rules []core.Rule, opts ...Option) gin.HandlerFunc {
	mw, err := New(l, rules, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

var errNotGin = errors.New("ginlimit: request not from a ginlimit middleware")

// Context returns the *gin.Context of a request that a ginlimit middleware
// handles, and false for any other request.
func Context(r core.Request) (*gin.Context, bool) {
	req, ok := r.(request)
	return req.c, ok
}

// Key returns a key function over the *gin.Context, for identities that
// only Gin knows, such as a value an earlier middleware put with c.Set:
//
//	ginlimit.Key(func(c *gin.Context) (string, error) {
//		if id := c.GetString("tenant"); id != "" {
//			return "tenant:" + id, nil
//		}
//		return "", core.ErrNoIdentity
//	})
//
// Like every key function, fn returns an error wrapping [core.ErrNoIdentity]
// when it finds no identity. Outside a ginlimit middleware the key function
// fails with an error that does not.
func Key(fn func(*gin.Context) (string, error)) core.KeyFunc {
	return func(r core.Request) (string, error) {
		c, ok := Context(r)
		if !ok {
			return "", errNotGin
		}
		return fn(c)
	}
}

// Cost returns a cost function over the *gin.Context. Outside a ginlimit
// middleware it returns 0, which the Limiter rejects as an invalid cost.
func Cost(fn func(*gin.Context) int) func(core.Request) int {
	return func(r core.Request) int {
		c, ok := Context(r)
		if !ok {
			return 0
		}
		return fn(c)
	}
}

// request is the core.Request view of a *gin.Context; one pointer, so
// making one allocates nothing.
type request struct{ c *gin.Context }

func (r request) Context() context.Context          { return r.c.Request.Context() }
func (r request) Method() string                    { return r.c.Request.Method }
func (r request) Path() string                      { return r.c.Request.URL.Path }
func (r request) Route() string                     { return r.c.FullPath() }
func (r request) Header(name string) string         { return r.c.Request.Header.Get(name) }
func (r request) HeaderValues(name string) []string { return r.c.Request.Header.Values(name) }
func (r request) Query(name string) string          { return r.c.Query(name) }
func (r request) RemoteAddr() string                { return r.c.Request.RemoteAddr }
