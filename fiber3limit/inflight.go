package fiber3limit

import (
	"fmt"

	"github.com/gofiber/fiber/v3"

	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
)

// WithInFlightDeniedHandler replaces the default answer of [InFlight] to a
// request beyond its cap (429 with a problem+json body). When denied runs,
// Retry-After is already set; denied writes the answer, or returns an error
// for the app's ErrorHandler. It is InFlight's only: [New] rejects it, as
// InFlight rejects [WithDeniedHandler].
func WithInFlightDeniedHandler(denied func(c fiber.Ctx, res inflight.Result) error) Option {
	return adapter.WithHook("WithInFlightDeniedHandler", denied == nil, func(h *hooks) { h.inFlightDenied = denied })
}

// InFlight returns middleware that lets at most rule.Limit requests of one
// identity run at once, across every replica that shares l's Redis. A
// request beyond the cap is answered 429 with Retry-After
// ([inflight.DefaultRetryAfter]) and a problem+json body; one that gets a
// slot holds it until c.Next() returns, or panics. The slot's storage key
// is a string of its own, never one of fasthttp's buffers, so the Limiter
// may renew it after the request's buffers are reused.
//
// [WithNext], [WithErrorHandler], [WithFailClosedStatus] and
// [WithNoIdentity] apply as they do to [New]; [WithHeaders] and
// [WithIETFDraft] change nothing, since a concurrency limit sends no
// rate-limit fields. It returns an error for a nil Limiter, an invalid rule
// or option, and for [WithDeniedHandler] (use [WithInFlightDeniedHandler]).
func InFlight(l *inflight.Limiter, rule inflight.Rule, opts ...Option) (fiber.Handler, error) {
	g, h, err := inflight.BuildGuard("fiber3limit.InFlight", l, rule, opts)
	if err == nil && h.denied != nil {
		err = fmt.Errorf("fiber3limit.InFlight: %w: WithDeniedHandler is for New (use WithInFlightDeniedHandler)", adapter.ErrOptionMismatch)
	}
	if err != nil {
		return nil, err
	}
	return func(c fiber.Ctx) error {
		if h.next != nil && h.next(c) {
			return c.Next()
		}
		v := views.Get().(*view) // a pooled view, as decide explains
		v.c = c
		out := g.Enter((*request)(v))
		out.Set((*responseHeader)(v))
		v.c = nil
		views.Put(v)
		defer out.Lease.Release(c.Context()) // a failure goes to the Limiter's OnError
		switch {
		case out.Proceed():
			return c.Next()
		case out.Limited() && h.inFlightDenied != nil:
			return h.inFlightDenied(c, out.Result)
		case !out.Limited() && h.onError != nil:
			return h.onError(c, out.Status, out.Err)
		}
		c.Status(out.Status).Set(fiber.HeaderContentType, adapter.ProblemContentType)
		return c.Send(out.Body) // shared and never modified, as Send requires
	}, nil
}

// MustInFlight is [InFlight] for a rule and options fixed at start-up: it
// panics if they are invalid.
func MustInFlight(l *inflight.Limiter, rule inflight.Rule, opts ...Option) fiber.Handler {
	mw, err := InFlight(l, rule, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}
