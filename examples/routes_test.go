package examples_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
)

// TestRouteRules drives the routers of docs/adapters.md's snippets, one per
// framework, on a store whose clock stands still: the login route counts
// only failed logins (3), the search route has a limit of its own (10), and
// neither spends the other's.
func TestRouteRules(t *testing.T) {
	clientIP, err := keyfuncs.IP()
	if err != nil {
		t.Fatal(err)
	}
	build := map[string]func(*core.Limiter, []core.Rule, core.KeyFunc) http.Handler{
		"gin":   routesGin,
		"echo":  routesEcho,
		"echo5": routesEcho5,
		"fiber": func(l *core.Limiter, r []core.Rule, k core.KeyFunc) http.Handler {
			return fiber2Handler(routesFiber(l, r, k))
		},
		"fiber3": func(l *core.Limiter, r []core.Rule, k core.KeyFunc) http.Handler {
			return fiber3Handler(routesFiber3(l, r, k))
		},
	}
	for name, b := range build {
		t.Run(name, func(t *testing.T) {
			clock := testkit.NewClock(testkit.Start)
			store := testkit.MustMemory(memorystore.WithClock(clock.Now))
			t.Cleanup(func() { store.Close() })
			l, err := core.NewLimiter(store, core.WithClock(clock.Now))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			h := b(l, []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}, clientIP)
			serve := func(method, target string) int {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
				return w.Code
			}
			for i, step := range []struct {
				method, target string
				want           int
			}{
				// right passwords do not count; three wrong ones do
				{"POST", "/login?password=right", http.StatusNoContent},
				{"POST", "/login?password=right", http.StatusNoContent},
				{"POST", "/login?password=wrong", http.StatusUnauthorized},
				{"POST", "/login?password=wrong", http.StatusUnauthorized},
				{"POST", "/login?password=wrong", http.StatusUnauthorized},
				{"POST", "/login?password=wrong", http.StatusTooManyRequests},
				{"POST", "/login?password=right", http.StatusTooManyRequests},
			} {
				if got := serve(step.method, step.target); got != step.want {
					t.Fatalf("step %d, %s %s: %d, want %d", i, step.method, step.target, got, step.want)
				}
			}
			for i := range 10 {
				if got := serve("GET", "/search"); got != http.StatusOK {
					t.Fatalf("search %d of 10: %d, want 200", i+1, got)
				}
			}
			if got := serve("GET", "/search"); got != http.StatusTooManyRequests {
				t.Fatalf("search 11: %d, want 429", got)
			}
			clock.Add(time.Second) // 10 per 10 s: one comes due a second later
			if got := serve("GET", "/search"); got != http.StatusOK {
				t.Fatalf("search a second later: %d, want 200", got)
			}
		})
	}
}

// fiber2Handler serves a Fiber v2 app's answers to net/http requests.
func fiber2Handler(app *fiber.App) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := app.Test(r, -1)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})
}
