package ginlimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/redisstore"
)

// Key limits by what only Gin knows: here, the tenant that an earlier
// middleware found.
func ExampleKey() {
	tenant := ginlimit.Key(func(c *gin.Context) (string, error) {
		if id := c.GetString("tenant"); id != "" {
			return "tenant:" + id, nil
		}
		return "", core.ErrNoIdentity
	})
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := core.NewLimiter(store)
	if err != nil {
		log.Fatal(err)
	}
	perTenant := ginlimit.MustNew(limiter, []core.Rule{{Name: "tenant", Limit: core.PerHour(1000), Key: tenant}})

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(func(c *gin.Context) { c.Set("tenant", "acme") }, perTenant)
	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "hello") })

	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("X-RateLimit-Remaining"))
	// Output:
	// 200 "tenant";q=1000;w=3600 999
}

// A global limit of 100 requests a minute per client IP, and a stricter
// one on the login route, over Redis.
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

	// MustNew suits rules fixed at start-up; a middleware given to one
	// route limits that route alone
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(ginlimit.MustNew(limiter, []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}))
	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "hello") })
	r.POST("/login",
		ginlimit.MustNew(limiter, []core.Rule{{Name: "login", Limit: core.PerMinute(2), Key: clientIP}}),
		func(c *gin.Context) { c.String(http.StatusOK, "welcome") })

	for range 3 {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("POST", "/login", nil))
		fmt.Printf("%d X-RateLimit-Remaining=%s Retry-After=%q\n", w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"))
		fmt.Println("    RateLimit:", w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 X-RateLimit-Remaining=1 Retry-After=""
	//     RateLimit: "default";r=99;t=1, "login";r=1;t=30
	// 200 X-RateLimit-Remaining=0 Retry-After=""
	//     RateLimit: "default";r=98;t=2, "login";r=0;t=60
	// 429 X-RateLimit-Remaining=0 Retry-After="30"
	//     RateLimit: "default";r=97;t=2, "login";r=0;t=60
}
