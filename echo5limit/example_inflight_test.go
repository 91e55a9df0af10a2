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

	"github.com/ratekit/ratekit/echo5limit"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/keyfuncs"
)

// At most one export per client in flight, across every replica that
// shares the Redis: a second one while the first runs gets 429.
func ExampleInFlight() {
	mr, err := miniredis.Run() // stands in for Redis
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	// miniredis shares this process's CPU: a deadline of a second (not the
	// default 50ms) keeps a busy machine from sending it to the failure policy
	limiter, err := inflight.New(rdb, inflight.WithTimeout(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}

	started, finish := make(chan struct{}), make(chan struct{})
	r := echo.New()
	r.GET("/export", func(c *echo.Context) error {
		started <- struct{}{}
		<-finish // a long export
		return c.String(http.StatusOK, "report")
	}, echo5limit.MustInFlight(limiter, inflight.Rule{Name: "exports", Limit: 1, Key: clientIP}))

	first := make(chan int)
	go func() {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/export", nil))
		first <- w.Code
	}()
	<-started
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/export", nil))
	fmt.Printf("second: %d Retry-After=%s\n", w.Code, w.Header().Get("Retry-After"))
	close(finish)
	fmt.Println("first:", <-first)
	// Output:
	// second: 429 Retry-After=1
	// first: 200
}
