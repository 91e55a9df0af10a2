package echolimit_test

import (
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func BenchmarkBare(b *testing.B) {
	adaptertest.BenchmarkHTTP(b, app(), false)
}

// BenchmarkNoop is the bare handler behind a middleware that does nothing:
// Echo v4 builds the chain of e.Use's middleware for each request, so any
// middleware costs its returned handler's allocation. BenchmarkLimited's
// allocations beyond this are ratekit's own.
func BenchmarkNoop(b *testing.B) {
	noop := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { return next(c) }
	}
	adaptertest.BenchmarkHTTP(b, app(noop), false)
}

func BenchmarkLimited(b *testing.B) {
	l, rules := adaptertest.BenchLimiter(b)
	adaptertest.BenchmarkHTTP(b, app(echolimit.MustNew(l, rules)), true)
}

func BenchmarkInFlight(b *testing.B) {
	l, rule, done := adaptertest.BenchInFlight(b)
	adaptertest.BenchmarkHTTP(b, app(echolimit.MustInFlight(l, rule)), false)
	done()
}
