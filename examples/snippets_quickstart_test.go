package examples_test

// The README's quick start: its import block, its setup and its net/http
// server, which together are a program as pasted (TestQuickStartBuilds
// builds it, and each framework's section with the imports it names). The
// import block is this file's, so this file holds only what it imports.

// snippet:imports
import (
	"fmt"
	"log"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/redisstore"
)

// snippet:end

// net/http, with the quick start's setup.
func Example_netHTTP() {
	// snippet:setup
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // the Limiter's deadline frees the connection: see core.WithTimeout
		MaxRetries:            -1,   // no retry within a deadline of milliseconds
		DialerRetries:         1,    // a stopped Redis fails a call at once, not after five dials
	})
	store, err := redisstore.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := core.NewLimiter(store)
	if err != nil {
		log.Fatal(err)
	}
	clientIP, err := keyfuncs.IP() // the socket peer; behind a proxy, see docs/keys-and-proxies.md
	if err != nil {
		log.Fatal(err)
	}
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}
	// snippet:end

	// snippet:nethttp
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	log.Fatal(http.ListenAndServe(":8080", nethttp.MustNew(limiter, rules)(mux)))
	// snippet:end
}
