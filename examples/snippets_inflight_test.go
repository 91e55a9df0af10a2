package examples_test

// Snippets of docs/concurrency.md, checked like those of snippets_test.go.

import (
	"fmt"
	"log"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"

	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/grpclimit"
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

// The concurrency limit in a framework's middleware and in gRPC
// interceptors: the same limiter, one rule each.
func Example_inflightAdapters() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	limiter, err := inflight.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	r := gin.New()
	upload := func(c *gin.Context) { c.String(http.StatusOK, "stored") }
	// snippet:inflight-adapters
	// at most 4 uploads per client at once, in Gin
	uploads := inflight.Rule{Name: "uploads", Limit: 4, Key: clientIP}
	r.POST("/upload", ginlimit.MustInFlight(limiter, uploads), upload)

	// at most 100 calls at once on a gRPC server; a stream holds its slot while open
	calls := inflight.Rule{Name: "calls", Limit: 100, Key: keyfuncs.Static("server")}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.MustInFlightUnaryServerInterceptor(limiter, calls)),
		grpc.ChainStreamInterceptor(grpclimit.MustInFlightStreamServerInterceptor(limiter, calls)),
	)
	// snippet:end
	_ = srv
}
