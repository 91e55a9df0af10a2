package nethttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/redisstore"
)

// TestLeasingThroughMiddleware: with a leasestore.Store under the Limiter,
// requests through the middleware on one hot key are leased: 1,000
// requests under a limit of 64,000 per minute cost a real redis-server at
// most 1,000/8 script calls, as its INFO commandstats counts them.
func TestLeasingThroughMiddleware(t *testing.T) {
	srv := redistest.StartServer(t)
	client := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	shared, err := redisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	leasing, err := leasestore.New(shared)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leasing.Close() })
	// a deadline no loaded machine misses: every decision must come from
	// Redis or a lease, never from the failure policy
	limiter, err := core.NewLimiter(leasing, core.WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { limiter.Close() })
	clientIP, err := keyfuncs.IP()
	if err != nil {
		t.Fatal(err)
	}
	mw, err := nethttp.New(limiter, []core.Rule{{Name: "hot", Limit: core.PerMinute(64_000), Key: clientIP}})
	if err != nil {
		t.Fatal(err)
	}
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))

	ctx := context.Background()
	srv.ResetStats(t, ctx)
	for i := range 1000 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusNoContent || rec.Header().Get("X-RateLimit-Limit") != "64000" {
			t.Fatalf("request %d: %d %v", i, rec.Code, rec.Header())
		}
	}
	st := srv.CommandStats(t, ctx)
	scripts := st["evalsha"] + st["eval"]
	if scripts == 0 || scripts > 1000/8 {
		t.Fatalf("%d script calls for 1,000 requests on one key, want 1 to %d", scripts, 1000/8)
	}
	t.Logf("%d script calls for 1,000 requests", scripts)
}
