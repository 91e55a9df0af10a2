package fiberlimit_test

import (
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// benchmark serves requests through the app's fasthttp handler, with one
// reused fasthttp.RequestCtx per client, as Fiber's own benchmarks do.
func benchmark(b *testing.B, app *fiber.App, limited bool) {
	h := app.Handler()
	ctxs := make([]*fasthttp.RequestCtx, adaptertest.BenchClients)
	for i := range ctxs {
		ctxs[i] = new(fasthttp.RequestCtx)
		ctxs[i].Request.Header.SetMethod("GET")
		ctxs[i].Request.SetRequestURI("/")
		ctxs[i].Request.Header.Set(adaptertest.ClientHeader, adaptertest.BenchClient(i))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := ctxs[i%len(ctxs)]
		c.Response.Reset()
		h(c)
		if c.Response.StatusCode() != fiber.StatusOK || limited && len(c.Response.Header.Peek("X-RateLimit-Limit")) == 0 {
			b.Fatalf("status %d, headers %s: the benchmark must measure allowed, limited requests", c.Response.StatusCode(), c.Response.Header.Header())
		}
		i++
	}
}

func BenchmarkBare(b *testing.B) {
	benchmark(b, newApp(), false)
}

func BenchmarkLimited(b *testing.B) {
	l, rules := adaptertest.BenchLimiter(b)
	benchmark(b, newApp(fiberlimit.MustNew(l, rules)), true)
}

func BenchmarkInFlight(b *testing.B) {
	l, rule, done := adaptertest.BenchInFlight(b)
	benchmark(b, newApp(fiberlimit.MustInFlight(l, rule)), false)
	done()
}
