package echolimit_test

import (
	"testing"

	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func BenchmarkBare(b *testing.B) {
	adaptertest.BenchmarkHTTP(b, app(), false)
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
