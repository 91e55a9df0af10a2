package examples_test

import (
	"fmt"
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/keyfuncs"
)

// A cap on requests in flight, across every replica.
func Example_inflight() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	exportHandler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "report") })
	// snippet:inflight
	limiter, err := inflight.New(rdb) // any go-redis client that runs scripts
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	exports := inflight.MustMiddleware(limiter, inflight.Rule{Name: "exports", Limit: 2, Key: clientIP})
	mux.Handle("GET /export", exports(exportHandler))
	// snippet:end
}
