package caddyratekit_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/ratekit/ratekit/caddyratekit"
	"github.com/ratekit/ratekit/internal/redistest"
)

// BenchmarkServeHTTP is the handler's cost per request, as Caddy calls
// it, with a real redis-server deciding: every request allowed, from 64
// goroutines (RunParallel with SetParallelism), one client IP (a hot
// key) or many.
func BenchmarkServeHTTP(b *testing.B) {
	srv := redistest.StartServer(b)
	url := "redis://" + srv.Addr()
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusOK)
		return nil
	})
	b.Run("no-handler", func(b *testing.B) { // the loop's own cost
		b.ReportAllocs()
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				w := httptest.NewRecorder()
				r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, nil)
				if err := next.ServeHTTP(w, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	for _, c := range []struct {
		name  string
		rules string
	}{
		{"one-rule", `{"name":"default","limit":1000000,"period":3600000000000}`},
		{"two-rules", `{"name":"default","limit":1000000,"period":3600000000000},{"name":"hourly","limit":1000000,"period":3600000000000,"algorithm":"fixed"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := fromJSON(b, handlerJSON(url, c.rules, ""))
			provision(b, h)
			caddyratekit.SetLimiterLogger(h, slog.New(slog.DiscardHandler))
			b.ReportAllocs()
			b.SetParallelism(32) // 64 goroutines on 2 CPUs
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest(http.MethodGet, "/", nil)
					w := httptest.NewRecorder()
					r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), w, nil)
					if err := h.ServeHTTP(w, r, next); err != nil || w.Code != http.StatusOK {
						b.Fatalf("%d %v", w.Code, err)
					}
				}
			})
		})
	}
}
