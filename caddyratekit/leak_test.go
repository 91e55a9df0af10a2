package caddyratekit_test

import (
	"fmt"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/caddyratekit"
	"github.com/ratekit/ratekit/internal/redistest"
)

// Repeated provisioning and cleanup, as config reloads do, of handlers
// that share a Redis (two of one configuration, one of another) leave no
// goroutine and no connection behind, Redis up or down.
func TestProvisionCleanupLeaksNothing(t *testing.T) {
	srv := redistest.StartServer(t)
	stats := srv.Client(t)
	url := "redis://" + srv.Addr()
	ignore := goleak.IgnoreCurrent()
	for round := range 10 {
		var hs []*caddyratekit.Handler
		for i, more := range []string{``, ``, `"prefix":"other:"`} {
			h := fromJSON(t, handlerJSON(url, `{"name":"r","limit":100,"period":60000000000}`, more))
			if err := tryProvisionNoCleanup(h); err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
			if a := get(t, h, "/", fmt.Sprintf("198.51.100.%d", i+1)); a.status != http.StatusOK || a.placeholder(caddyratekit.PlaceholderDegraded) != "false" {
				t.Fatalf("round %d: %d, degraded %s", round, a.status, a.placeholder(caddyratekit.PlaceholderDegraded))
			}
		}
		for _, h := range hs {
			if err := h.Cleanup(); err != nil {
				t.Fatal(err)
			}
		}
		if connected := connectedAfterClose(t, stats); connected != 0 {
			t.Fatalf("round %d: %d connections open once every handler is cleaned up", round, connected)
		}
	}
	goleak.VerifyNone(t, ignore)

	// Redis gone: the breaker opens and its prober runs until Cleanup
	srv.Kill(t)
	for range 3 {
		h := fromJSON(t, handlerJSON(url, `{"name":"r","limit":100,"period":60000000000}`, `"timeout":"20ms"`))
		if err := tryProvisionNoCleanup(h); err != nil {
			t.Fatal(err)
		}
		for range 20 {
			if a := get(t, h, "/", "198.51.100.1"); a.status != http.StatusOK || a.placeholder(caddyratekit.PlaceholderDegraded) != "true" {
				t.Fatalf("Redis killed: %d, degraded %s; want 200 from the local fallback", a.status, a.placeholder(caddyratekit.PlaceholderDegraded))
			}
		}
		if err := h.Cleanup(); err != nil {
			t.Fatal(err)
		}
	}
	goleak.VerifyNone(t, ignore)
}
