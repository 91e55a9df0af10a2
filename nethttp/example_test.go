package nethttp_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/redisstore"
)

// Wrap limits one handler.
func ExampleWrap() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := core.NewLimiter(store)
	if err != nil {
		log.Fatal(err)
	}
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	export, err := nethttp.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a large report")
	}), limiter, []core.Rule{{Name: "export", Limit: core.PerHour(1), Key: clientIP}},
		nethttp.WithHeaders(adapter.HeadersIETF))
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		w := httptest.NewRecorder()
		export.ServeHTTP(w, httptest.NewRequest("GET", "/export", nil))
		fmt.Printf("%d RateLimit-Policy=%s Retry-After=%q\n", w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit-Policy="export";q=1;w=3600 Retry-After=""
	// 429 RateLimit-Policy="export";q=1;w=3600 Retry-After="3600"
}

// A global limit of 100 requests a minute per client IP, and a stricter
// one on the login route, over Redis. The per-route middleware wraps the
// route's handler, inside the mux.
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
	perIP, err := nethttp.New(limiter, []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}})
	if err != nil {
		log.Fatal(err)
	}
	login, err := nethttp.New(limiter, []core.Rule{{Name: "login", Limit: core.PerMinute(2), Key: clientIP}})
	if err != nil {
		log.Fatal(err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	mux.Handle("POST /login", login(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "welcome")
	})))
	handler := perIP(mux)

	for range 3 {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest("POST", "/login", nil))
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
