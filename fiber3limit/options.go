package fiber3limit

import (
	"bufio"
	"github.com/gofiber/fiber/v3"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
)

// Option configures a middleware. Options are sealed: only this package
// makes them.
type Option = adapter.Option[hooks]

// hooks are what this package's own options set, in Fiber v3's types.
type hooks struct {
	next           func(fiber.Ctx) bool
	denied         func(fiber.Ctx, core.Decision) error
	inFlightDenied func(fiber.Ctx, inflight.Result) error
	onError        func(fiber.Ctx, int, error) error
}

// WithNext makes the middleware pass requests for which next reports true
// straight to the next handler, unlimited and without rate-limit headers:
// health checks, say. It is the Next field of Fiber's own middlewares. By
// default no request is skipped. To exempt requests from one rule only, set
// that rule's Skip.
func WithNext(next func(c fiber.Ctx) bool) Option {
	return adapter.WithHook("WithNext", next == nil, func(h *hooks) { h.next = next })
}

// WithDeniedHandler replaces the default answer to a limited request (429
// with a problem+json body). When denied runs, the rate-limit headers and
// Retry-After are already set; denied writes the answer, or returns an
// error for the app's ErrorHandler, such as fiber.ErrTooManyRequests.
func WithDeniedHandler(denied func(c fiber.Ctx, d core.Decision) error) Option {
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
func WithErrorHandler(onError func(c fiber.Ctx, status int, err error) error) Option {
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
// A body that a writer streams (c.SendStreamWriter) is written after the handlers
// return: made with [StreamWriter], the writer reports its units as it
// writes, and the charge waits until it returns.
func WithCharged(rules ...string) Option { return adapter.WithCharged[hooks](rules...) }

// AddCost counts n more units of the answer to c, for the rules of
// [WithCharged], while the handler runs. Without such rules it does
// nothing. The units are counted in c.Context(), which the middleware
// replaces; a handler that sets another keeps them by deriving it from
// that context.
func AddCost(c fiber.Ctx, n int) { adapter.MeterOf(c.Context()).Add(n) }

// StreamWriter returns sw as a writer of c's streamed body (c.SendStreamWriter)
// whose cost is charged to the rules of [WithCharged]: sw reports the units
// it sends with addCost (each token, after a flush) and, since fasthttp
// runs it once the handlers have returned, the middleware's charge waits
// until sw returns, the body sent or the client gone. The units reported
// with [AddCost] before count too. Call it in the handler; a writer it
// returns must be run, or the answer is never charged. Without such rules
// sw's units count for nothing.
func StreamWriter(c fiber.Ctx, sw func(w *bufio.Writer, addCost func(n int))) func(w *bufio.Writer) {
	meter := adapter.MeterOf(c.Context())
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
