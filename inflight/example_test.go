package inflight_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/keyfuncs"
)

// At most 2 exports per client in flight, across every replica; a third
// while two run gets 429.
func ExampleMiddleware() {
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
	exports := inflight.MustMiddleware(limiter, inflight.Rule{Name: "exports", Limit: 2, Key: clientIP})

	started, finish := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("GET /export", exports(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-finish // a long export
		io.WriteString(w, "report")
	})))

	done := make(chan int)
	for range 2 {
		go func() {
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, httptest.NewRequest("GET", "/export", nil))
			done <- w.Code
		}()
		<-started
	}
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/export", nil))
	fmt.Printf("third: %d Retry-After=%s\n", w.Code, w.Header().Get("Retry-After"))
	close(finish)
	fmt.Println("first two:", <-done, <-done)
	// Output:
	// third: 429 Retry-After=1
	// first two: 200 200
}
