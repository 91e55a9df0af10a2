package ginlimit_test

import (
	"testing"

	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func BenchmarkBare(b *testing.B) {
	adaptertest.BenchmarkHTTP(b, engine(), false)
}

func BenchmarkLimited(b *testing.B) {
	l, rules := adaptertest.BenchLimiter(b)
	adaptertest.BenchmarkHTTP(b, engine(ginlimit.MustNew(l, rules)), true)
}

func BenchmarkInFlight(b *testing.B) {
	l, rule, done := adaptertest.BenchInFlight(b)
	adaptertest.BenchmarkHTTP(b, engine(ginlimit.MustInFlight(l, rule)), false)
	done()
}
