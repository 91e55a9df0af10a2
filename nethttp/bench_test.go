package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/nethttp"
)

func benchmark(b *testing.B, h http.Handler, limited bool) {
	reqs := make([]*http.Request, adaptertest.BenchClients)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/", nil)
		reqs[i].Header.Set(adaptertest.ClientHeader, adaptertest.BenchClient(i))
	}
	w := adaptertest.NewResponseWriter()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Reset()
		h.ServeHTTP(w, reqs[i%len(reqs)])
		if w.Code != http.StatusOK || limited && w.Header()[core.HeaderLimit] == nil {
			b.Fatalf("status %d, headers %v: the benchmark must measure allowed, limited requests", w.Code, w.Header())
		}
		i++
	}
}

func BenchmarkBare(b *testing.B) {
	benchmark(b, ok, false)
}

func BenchmarkLimited(b *testing.B) {
	l, rules := adaptertest.BenchLimiter(b)
	benchmark(b, nethttp.MustNew(l, rules)(ok), true)
}
