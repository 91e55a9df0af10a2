package adaptertest_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	fiber3 "github.com/gofiber/fiber/v3"
	"github.com/labstack/echo/v4"
	echo5 "github.com/labstack/echo/v5"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echo5limit"
	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/fiber3limit"
	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/redisstore"
)

// replica is one app of the fleet: send serves one request and returns its
// status and X-RateLimit-Remaining.
type replica struct {
	name string
	send func(t *testing.T, method, path, client string) (int, string)
}

// fleetRules are the rules every replica applies, named alike: a global
// per-client limit, and a login limit on one route.
func fleetRules() (global, login []core.Rule) {
	global = []core.Rule{adaptertest.FixedRule("default", 10)}
	login = []core.Rule{adaptertest.FixedRule("login", 3)}
	return global, login
}

// newLimiter returns a Limiter with a Redis client of its own, as a replica
// in its own process would have. Its denied-key cache is off: the test
// steps Redis's clock by hand.
func newLimiter(t *testing.T, addr string) *core.Limiter {
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { c.Close() })
	// a generous deadline: under -race on a busy machine miniredis can
	// miss 50 ms, which would send requests to the local fallback
	store, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return adaptertest.NewLimiterOver(t, store, core.WithDeniedCache(0), core.WithTimeout(10*time.Second))
}

func httpReplica(name string, h http.Handler) replica {
	return replica{name, func(t *testing.T, method, path, client string) (int, string) {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set(adaptertest.ClientHeader, client)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Header().Get("X-RateLimit-Remaining")
	}}
}

// testReplica is the replica of a Fiber app, served by test: its app.Test.
func testReplica(name string, test func(*http.Request) (*http.Response, error)) replica {
	return replica{name, func(t *testing.T, method, path, client string) (int, string) {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set(adaptertest.ClientHeader, client)
		resp, err := test(r)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining")
	}}
}

func nethttpReplica(t *testing.T, addr string) replica {
	l := newLimiter(t, addr)
	global, login := fleetRules()
	mux := http.NewServeMux()
	mux.Handle("GET /", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	mux.Handle("POST /login", nethttp.MustNew(l, login)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	return httpReplica("net/http", nethttp.MustNew(l, global)(mux))
}

func ginReplica(t *testing.T, addr string) replica {
	l := newLimiter(t, addr)
	global, login := fleetRules()
	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.Use(ginlimit.MustNew(l, global))
	e.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	e.POST("/login", ginlimit.MustNew(l, login), func(*gin.Context) {})
	return httpReplica("gin", e)
}

func echoReplica(t *testing.T, addr string) replica {
	l := newLimiter(t, addr)
	global, login := fleetRules()
	e := echo.New()
	e.Use(echolimit.MustNew(l, global))
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.POST("/login", func(echo.Context) error { return nil }, echolimit.MustNew(l, login))
	return httpReplica("echo", e)
}

func fiberReplica(t *testing.T, addr string) replica {
	l := newLimiter(t, addr)
	global, login := fleetRules()
	app := fiber.New()
	app.Use(fiberlimit.MustNew(l, global))
	app.Get("/", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Post("/login", fiberlimit.MustNew(l, login), func(*fiber.Ctx) error { return nil })
	return testReplica("fiber", func(r *http.Request) (*http.Response, error) { return app.Test(r, -1) })
}

func echo5Replica(t *testing.T, addr string) replica {
	l := newLimiter(t, addr)
	global, login := fleetRules()
	e := echo5.New()
	e.Use(echo5limit.MustNew(l, global))
	e.GET("/", func(c *echo5.Context) error { return c.String(http.StatusOK, "ok") })
	e.POST("/login", func(*echo5.Context) error { return nil }, echo5limit.MustNew(l, login))
	return httpReplica("echo v5", e)
}

func fiber3Replica(t *testing.T, addr string) replica {
	l := newLimiter(t, addr)
	global, login := fleetRules()
	app := fiber3.New()
	app.Use(fiber3limit.MustNew(l, global))
	app.Get("/", func(c fiber3.Ctx) error { return c.SendString("ok") })
	app.Post("/login", fiber3limit.MustNew(l, login), func(fiber3.Ctx) error { return nil })
	return testReplica("fiber v3", func(r *http.Request) (*http.Response, error) {
		return app.Test(r, fiber3.TestConfig{}) // no timeout
	})
}

func fleet(t *testing.T) ([]replica, *miniredis.Miniredis) {
	mr := miniredis.RunT(t)
	mr.SetTime(adaptertest.T0)
	return []replica{
		nethttpReplica(t, mr.Addr()),
		ginReplica(t, mr.Addr()),
		echoReplica(t, mr.Addr()),
		fiberReplica(t, mr.Addr()),
		echo5Replica(t, mr.Addr()),
		fiber3Replica(t, mr.Addr()),
	}, mr
}

// Requests of one client, interleaved over six replicas of six
// frameworks (Echo and Fiber in two major versions each) sharing one
// Redis, spend one limit.
func TestFleetSharesOneLimit(t *testing.T) {
	apps, mr := fleet(t)
	for i := range 10 {
		app := apps[i%len(apps)]
		code, remaining := app.send(t, "GET", "/", "alice")
		if code != http.StatusOK || remaining != fmt.Sprint(9-i) {
			t.Errorf("request %d via %s: %d, remaining %q; want 200, remaining %d", i+1, app.name, code, remaining, 9-i)
		}
	}
	for _, app := range apps {
		if code, _ := app.send(t, "GET", "/", "alice"); code != http.StatusTooManyRequests {
			t.Errorf("11th request via %s: %d, want 429", app.name, code)
		}
	}
	if got, want := fmt.Sprint(mr.Keys()), "[ratekit:default:{header:X-Client:alice}]"; got != want {
		t.Errorf("Redis keys %s, want %s", got, want)
	}

	// the per-route login limit is shared too, under its own key
	for i, app := range apps {
		want := http.StatusOK
		if i >= 3 {
			want = http.StatusTooManyRequests
		}
		if code, _ := app.send(t, "POST", "/login", "bob"); code != want {
			t.Errorf("login %d via %s: %d, want %d", i+1, app.name, code, want)
		}
	}
	if !mr.Exists("ratekit:login:{header:X-Client:bob}") {
		t.Errorf("no shared login key among %v", mr.Keys())
	}

	// the next window: the server's clock and its keys' expiries move on
	// together (a fixed window's counter expires at its window's end)
	mr.SetTime(adaptertest.T0.Add(30 * time.Second))
	mr.FastForward(30 * time.Second)
	for _, app := range apps {
		if code, _ := app.send(t, "GET", "/", "alice"); code != http.StatusOK {
			t.Errorf("next window via %s: %d, want 200", app.name, code)
		}
	}
}

// The same, with the six replicas serving at once.
func TestFleetConcurrent(t *testing.T) {
	apps, _ := fleet(t)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for _, app := range apps {
		wg.Go(func() {
			for range 8 {
				switch code, _ := app.send(t, "GET", "/", "carol"); code {
				case http.StatusOK:
					allowed.Add(1)
				case http.StatusTooManyRequests:
				default:
					t.Errorf("%s: status %d", app.name, code)
				}
			}
		})
	}
	wg.Wait()
	if got, want := allowed.Load(), int64(10); got != want {
		t.Errorf("%d requests allowed across the fleet, want %d", got, want)
	}
}
