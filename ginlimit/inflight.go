package ginlimit

import (
	"fmt"

	"github.com/gin-gonic/gin"

	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
)

// WithInFlightDeniedHandler replaces the default answer of [InFlight] to a
// request beyond its cap (429 with a problem+json body). When denied runs,
// Retry-After is already set; denied writes the status and body, and the
// middleware aborts the chain after it. It is InFlight's only: [New]
// rejects it, as InFlight rejects [WithDeniedHandler].
func WithInFlightDeniedHandler(denied func(c *gin.Context, res inflight.Result)) Option {
	return adapter.WithHook("WithInFlightDeniedHandler", denied == nil, func(h *hooks) { h.inFlightDenied = denied })
}

// InFlight returns middleware that lets at most rule.Limit requests of one
// identity run at once, across every replica that shares l's Redis. A
// request beyond the cap is aborted with 429, Retry-After
// ([inflight.DefaultRetryAfter]) and a problem+json body; one that gets a
// slot holds it until the handlers after the middleware return, or panic.
//
// [WithSkip], [WithErrorHandler], [WithFailClosedStatus] and
// [WithNoIdentity] apply as they do to [New]; [WithHeaders] and
// [WithIETFDraft] change nothing, since a concurrency limit sends no
// rate-limit fields. It returns an error for a nil Limiter, an invalid rule
// or option, and for [WithDeniedHandler] (use [WithInFlightDeniedHandler]).
func InFlight(l *inflight.Limiter, rule inflight.Rule, opts ...Option) (gin.HandlerFunc, error) {
	g, h, err := inflight.BuildGuard("ginlimit.InFlight", l, rule, opts)
	if err == nil && h.denied != nil {
		err = fmt.Errorf("ginlimit.InFlight: %w: WithDeniedHandler is for New (use WithInFlightDeniedHandler)", adapter.ErrOptionMismatch)
	}
	if err != nil {
		return nil, err
	}
	return func(c *gin.Context) {
		if h.skip != nil && h.skip(c) {
			c.Next()
			return
		}
		out := g.Enter(request{c})
		defer out.Lease.Release(c.Request.Context()) // a failure goes to the Limiter's OnError
		out.SetHTTP(c.Writer.Header())
		switch {
		case out.Proceed():
			c.Next()
			return
		case out.Limited() && h.inFlightDenied != nil:
			h.inFlightDenied(c, out.Result)
		case !out.Limited() && h.onError != nil:
			h.onError(c, out.Status, out.Err)
		default:
			c.Data(out.Status, adapter.ProblemContentType, out.Body)
		}
		c.Abort()
	}, nil
}

// MustInFlight is [InFlight] for a rule and options fixed at start-up: it
// panics if they are invalid.
func MustInFlight(l *inflight.Limiter, rule inflight.Rule, opts ...Option) gin.HandlerFunc {
	mw, err := InFlight(l, rule, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}
