package echolimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func benchmark(b *testing.B, e *echo.Echo, limited bool) {
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
		e.ServeHTTP(w, reqs[i%len(reqs)])
		if w.Code != http.StatusOK || limited && w.Header()[core.HeaderLimit] == nil {
			b.Fatalf("status %d, headers %v: the benchmark must measure allowed, limited requests", w.Code, w.Header())
		}
		i++
	}
}

func BenchmarkBare(b *testing.B) {
	benchmark(b, app(), false)
}

func BenchmarkLimited(b *testing.B) {
	l, rules := adaptertest.BenchLimiter(b)
	benchmark(b, app(echolimit.MustNew(l, rules)), true)
}
