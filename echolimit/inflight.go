package echolimit

import (
	"fmt"

	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
)

// WithInFlightDeniedHandler replaces the default answer of [InFlight] to a
// request beyond its cap (429 with a problem+json body). When denied runs,
// Retry-After is already set; denied writes the answer, or returns an error
// for Echo's HTTPErrorHandler. It is InFlight's only: [New] rejects it, as
// InFlight rejects [WithDeniedHandler].
func WithInFlightDeniedHandler(denied func(c echo.Context, res inflight.Result) error) Option {
	return adapter.WithHook("WithInFlightDeniedHandler", denied == nil, func(h *hooks) { h.inFlightDenied = denied })
}

// InFlight returns middleware that lets at most rule.Limit requests of one
// identity run at once, across every replica that shares l's Redis. A
// request beyond the cap is answered 429 with Retry-After
// ([inflight.DefaultRetryAfter]) and a problem+json body; one that gets a
// slot holds it until the next handler returns, or panics.
//
// [WithSkipper], [WithErrorHandler], [WithFailClosedStatus] and
// [WithNoIdentity] apply as they do to [New]; [WithHeaders] and
// [WithIETFDraft] change nothing, since a concurrency limit sends no
// rate-limit fields. It returns an error for a nil Limiter, an invalid rule
// or option, and for [WithDeniedHandler] (use [WithInFlightDeniedHandler]).
func InFlight(l *inflight.Limiter, rule inflight.Rule, opts ...Option) (echo.MiddlewareFunc, error) {
	g, h, err := inflight.BuildGuard("echolimit.InFlight", l, rule, opts)
	if err == nil && h.denied != nil {
		err = fmt.Errorf("echolimit.InFlight: %w: WithDeniedHandler is for New (use WithInFlightDeniedHandler)", adapter.ErrOptionMismatch)
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
			out := g.Enter(req)
			req.c = nil
			requests.Put(req)
			defer out.Lease.Release(c.Request().Context()) // a failure goes to the Limiter's OnError
			out.SetHTTP(c.Response().Header())
			switch {
			case out.Proceed():
				return next(c)
			case out.Limited() && h.inFlightDenied != nil:
				return h.inFlightDenied(c, out.Result)
			case !out.Limited() && h.onError != nil:
				return h.onError(c, out.Status, out.Err)
			}
			return c.Blob(out.Status, adapter.ProblemContentType, out.Body)
		}
	}, nil
}

// MustInFlight is [InFlight] for a rule and options fixed at start-up: it
// panics if they are invalid.
func MustInFlight(l *inflight.Limiter, rule inflight.Rule, opts ...Option) echo.MiddlewareFunc {
	mw, err := InFlight(l, rule, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}
