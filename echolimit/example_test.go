package echolimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/labstack/echo/v4"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/redisstore"
)

// A global limit of 100 requests a minute per client IP that skips health
// checks, and a stricter one on a group of login routes, over Redis.
func Example() {
	mr, err := miniredis.Run() // stands in for Redis
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // a still clock: the output is exact
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
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
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}

	// the global limit skips health checks, as an echo middleware.Skipper would
	healthz := func(c echo.Context) bool { return c.Path() == "/healthz" }
	// MustNew suits rules fixed at start-up; the login limit applies to
	// the routes of its group alone
	e := echo.New()
	e.Use(echolimit.MustNew(limiter, []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}},
		echolimit.WithSkipper(healthz)))
	auth := e.Group("/auth", echolimit.MustNew(limiter, []core.Rule{{Name: "login", Limit: core.PerMinute(2), Key: clientIP}}))
	auth.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "welcome") })
	e.GET("/healthz", func(c echo.Context) error { return c.NoContent(http.StatusOK) })

	for range 3 {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("POST", "/auth/login", nil))
		fmt.Printf("%d X-RateLimit-Remaining=%s Retry-After=%q\n", w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"))
		fmt.Println("    RateLimit:", w.Header().Get("RateLimit"))
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	fmt.Printf("%d RateLimit=%q\n", w.Code, w.Header().Get("RateLimit"))
	// Output:
	// 200 X-RateLimit-Remaining=1 Retry-After=""
	//     RateLimit: "default";r=99;t=1, "login";r=1;t=30
	// 200 X-RateLimit-Remaining=0 Retry-After=""
	//     RateLimit: "default";r=98;t=2, "login";r=0;t=60
	// 429 X-RateLimit-Remaining=0 Retry-After="30"
	//     RateLimit: "default";r=97;t=2, "login";r=0;t=60
	// 200 RateLimit=""
}
