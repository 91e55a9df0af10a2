package fiber3limit_test

import (
	"net/http"
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"

	"github.com/ratekit/ratekit/fiber3limit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// benchmark serves GET / through app's fasthttp handler for
// adaptertest.BenchClients clients in turn, each with one reused
// fasthttp.RequestCtx, as Fiber's own benchmarks do; it fails unless every
// request is allowed and, when limited, carries the rate-limit headers.
func benchmark(b *testing.B, app *fiber.App, limited bool) {
	h := app.Handler()
	clients := make([]*fasthttp.RequestCtx, adaptertest.BenchClients)
	for i := range clients {
		clients[i] = fromNet(adaptertest.NewRequest(http.MethodGet, "/", adaptertest.BenchClient(i)))
	}
	b.ReportAllocs()
	for n := 0; b.Loop(); n++ {
		ctx := clients[n%len(clients)]
		ctx.Response.Reset()
		h(ctx)
		if ctx.Response.StatusCode() != http.StatusOK || limited && ctx.Response.Header.Peek("X-RateLimit-Limit") == nil {
			b.Fatalf("status %d, headers %s: the benchmark must measure allowed, limited requests",
				ctx.Response.StatusCode(), ctx.Response.Header.Header())
		}
	}
}

func BenchmarkBare(b *testing.B) {
	benchmark(b, newApp(), false)
}

func BenchmarkLimited(b *testing.B) {
	l, rules := adaptertest.BenchLimiter(b)
	benchmark(b, newApp(fiber3limit.MustNew(l, rules)), true)
}

func BenchmarkInFlight(b *testing.B) {
	l, rule, done := adaptertest.BenchInFlight(b)
	benchmark(b, newApp(fiber3limit.MustInFlight(l, rule)), false)
	done()
}
