package ginlimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func benchmark(b *testing.B, e *gin.Engine, limited bool) {
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
	benchmark(b, app(ginlimit.MustNew(l, rules)), true)
}
