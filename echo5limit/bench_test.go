package echo5limit_test

import (
	"testing"

	"github.com/ratekit/ratekit/echo5limit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func BenchmarkBare(b *testing.B) {
	adaptertest.BenchmarkHTTP(b, newEcho(), false)
}

func BenchmarkLimited(b *testing.B) {
	l, rules := adaptertest.BenchLimiter(b)
	adaptertest.BenchmarkHTTP(b, newEcho(echo5limit.MustNew(l, rules)), true)
}

func BenchmarkInFlight(b *testing.B) {
	l, rule, done := adaptertest.BenchInFlight(b)
	adaptertest.BenchmarkHTTP(b, newEcho(echo5limit.MustInFlight(l, rule)), false)
	done()
}
