package echo5limit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/labstack/echo/v5"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echo5limit"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/redisstore"
)

// Two replicas of one Echo v5 app, each with a Limiter of its own over one
// Redis, share its limits: a global limit of 100 requests a minute per
// client IP that skips health checks, and a stricter one on a group of
// login routes.
func Example() {
	mr := miniredis.NewMiniRedis() // stands in for Redis
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // a still clock: the output is exact
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	global := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}
	login := []core.Rule{{Name: "login", Limit: core.PerMinute(2), Key: clientIP}}
	// the global limit skips health checks, as an echo middleware.Skipper would
	healthz := func(c *echo.Context) bool { return c.Path() == "/healthz" }

	var closers []func() error
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	replica := func() *echo.Echo { // as it starts in each process
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		store, err := redisstore.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		// miniredis shares this process's CPU: a deadline of a second keeps a
		// busy machine from sending the example to the local fallback
		limiter, err := core.NewLimiter(store, core.WithTimeout(time.Second))
		if err != nil {
			log.Fatal(err)
		}
		closers = append(closers, limiter.Close, rdb.Close)
		e := echo.New()
		e.Use(echo5limit.MustNew(limiter, global, echo5limit.WithSkipper(healthz)))
		auth := e.Group("/auth", echo5limit.MustNew(limiter, login)) // on the group's routes alone
		auth.POST("/login", func(c *echo.Context) error { return c.String(http.StatusOK, "welcome") })
		e.GET("/healthz", func(c *echo.Context) error { return c.NoContent(http.StatusOK) })
		return e
	}
	replicas := []*echo.Echo{replica(), replica()}

	for i, r := range []struct{ method, path string }{
		{"POST", "/auth/login"}, {"POST", "/auth/login"}, {"POST", "/auth/login"}, {"GET", "/healthz"},
	} {
		w := httptest.NewRecorder()
		replicas[i%2].ServeHTTP(w, httptest.NewRequest(r.method, r.path, nil))
		fmt.Printf("replica %d: %s %d Retry-After=%q RateLimit=%q\n", i%2+1, r.path, w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"))
	}
	// Output:
	// replica 1: /auth/login 200 Retry-After="" RateLimit="\"default\";r=99;t=1, \"login\";r=1;t=30"
	// replica 2: /auth/login 200 Retry-After="" RateLimit="\"default\";r=98;t=2, \"login\";r=0;t=60"
	// replica 1: /auth/login 429 Retry-After="30" RateLimit="\"default\";r=97;t=2, \"login\";r=0;t=60"
	// replica 2: /healthz 200 Retry-After="" RateLimit=""
}
