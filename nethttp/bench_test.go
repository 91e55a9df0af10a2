package nethttp_test

import (
	"testing"

	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/nethttp"
)

func BenchmarkBare(b *testing.B) {
	adaptertest.BenchmarkHTTP(b, ok, false)
}

func BenchmarkLimited(b *testing.B) {
	l, rules := adaptertest.BenchLimiter(b)
	adaptertest.BenchmarkHTTP(b, nethttp.MustNew(l, rules)(ok), true)
}
