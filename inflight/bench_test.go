package inflight_test

import (
	"net/http"
	"testing"

	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })

func BenchmarkBare(b *testing.B) {
	adaptertest.BenchmarkHTTP(b, okHandler, false)
}

func BenchmarkMiddleware(b *testing.B) {
	l, rule, done := adaptertest.BenchInFlight(b)
	adaptertest.BenchmarkHTTP(b, inflight.MustMiddleware(l, rule)(okHandler), false)
	done()
}
