package nethttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/netfault"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/redisstore"
)

// TestCountOnlyThroughLatencySpike: a login that counts only its 401s
// (3 a minute), behind the middleware, over a redis-server whose replies
// come 70 ms late for a while (the deadline is 50 ms): two right
// passwords, a wrong one and two right ones more are each answered by the
// handler, the fallback deciding. Once the spike is over, Redis holds the
// wrong password's unit only (none when its call never went out, having
// waited in the store's queue past its deadline), with either kind of
// client: wrong passwords get 401 up to the limit and the next 429, and
// right passwords get 204 in between.
func TestCountOnlyThroughLatencySpike(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, kind := range []struct {
		name string
		opts func(*redis.Options)
	}{
		{"recommended-client", func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries = true, -1 }},
		{"default-client", func(*redis.Options) {}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, append(netfault.IgnoreLinks(), goleak.IgnoreCurrent())...)
			proxy := netfault.Start(t, srv.Addr())
			defer proxy.Stop()
			o := &redis.Options{Addr: proxy.Addr()}
			kind.opts(o)
			client := redis.NewClient(o)
			defer client.Close()
			store, err := redisstore.New(client)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			var breaker atomic.Int32 // the Limiter's breaker state
			var unsent atomic.Int32  // decisions whose store call was never sent
			limiter, err := core.NewLimiter(store, core.OnBreakerChange(func(_, to core.BreakerState) { breaker.Store(int32(to)) }),
				core.OnError(func(err error) {
					if errors.Is(err, core.ErrNotSent) && !strings.Contains(err.Error(), "refund") {
						unsent.Add(1)
					}
				}))
			if err != nil {
				t.Fatal(err)
			}
			defer limiter.Close()
			direct := redis.NewClient(&redis.Options{Addr: srv.Addr()})
			defer direct.Close()
			dstore, err := redisstore.New(direct)
			if err != nil {
				t.Fatal(err)
			}
			defer dstore.Close()
			peeker, err := core.NewLimiter(dstore, core.WithTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer peeker.Close()

			user := fmt.Sprintf("user:bob-%s-%d", kind.name, time.Now().UnixNano())
			login := core.Rule{Name: "login", Limit: core.PerMinute(3), Key: func(core.Request) (string, error) { return user, nil }}
			mw := nethttp.MustNew(limiter, []core.Rule{login},
				nethttp.WithCountOnly("login", func(status int) bool { return status == http.StatusUnauthorized }))
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Password") == "right" {
					w.WriteHeader(http.StatusNoContent)
					return
				}
				w.WriteHeader(http.StatusUnauthorized)
			}))
			attempt := func(right bool) int {
				req := httptest.NewRequest(http.MethodPost, "/login", nil)
				if right {
					req.Header.Set("X-Password", "right")
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec.Code
			}
			want := func(phase string, right bool, status int) {
				t.Helper()
				if got := attempt(right); got != status {
					t.Errorf("%s: right password %v: status %d, want %d", phase, right, got, status)
				}
			}

			// the login's script loaded, and warm connections: go-redis sends
			// a new connection's HELLO with its first command, and its late
			// reply would fail a decision before the command went out
			want("before the spike", true, http.StatusNoContent)
			redistest.WarmConns(t, client, 16)

			late := netfault.Latency(70*time.Millisecond, 0)
			proxy.Inject(t, late)
			wrongSent := true
			for _, right := range []bool{true, true, false, true, true} {
				if right {
					want("during the spike", true, http.StatusNoContent)
					continue
				}
				before := unsent.Load()
				want("during the spike", false, http.StatusUnauthorized)
				wrongSent = unsent.Load() == before
			}
			proxy.Lift(t, late)
			// a call that waited in the store's queue for a pipeline past its
			// deadline (both slots held by calls the spike made late) never went out:
			// Redis holds nothing of the wrong password if its call was that one
			wantLeft := 2
			if !wrongSent {
				wantLeft = 3
			}
			t.Logf("during the spike, %d calls never sent, the wrong password's among them: %v", unsent.Load(), !wrongSent)

			left := -1
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				res, err := peeker.Peek(context.Background(), login, user)
				if err != nil {
					t.Fatal(err)
				}
				if left = res.Remaining; left == wantLeft {
					break
				}
			}
			if left != wantLeft {
				t.Errorf("after the spike Redis holds %d of 3 units left, want %d: the wrong password's unit if its call went out, none of the right ones'", left, wantLeft)
			}
			for end := time.Now().Add(10 * time.Second); core.BreakerState(breaker.Load()) != core.BreakerClosed; time.Sleep(time.Millisecond) {
				if time.Now().After(end) {
					t.Fatal("the breaker did not close within 10s of the spike's end")
				}
			}
			want("after the spike", true, http.StatusNoContent)
			want("after the spike", false, http.StatusUnauthorized)
			want("after the spike", true, http.StatusNoContent)
			want("after the spike", false, http.StatusUnauthorized)
			if !wrongSent {
				want("after the spike, the 3rd failure Redis counts", false, http.StatusUnauthorized)
			}
			want("after the spike, one failure past the limit", false, http.StatusTooManyRequests)
		})
	}
}
