package examples_test

// Snippets of README.md (its quick start's setup and net/http are in
// snippets_quickstart_test.go), docs/keys-and-proxies.md, docs/cluster.md,
// docs/failure.md, docs/metrics.md and docs/extending.md. Each block between
// "// snippet:<name>" and "// snippet:end" appears verbatim on one page
// (readme_test.go checks it); the functions that serve until killed are
// compiled, not run.

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/promlimit"
	"github.com/ratekit/ratekit/redisstore"
)

// Gin.
func Example_gin() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	store, err := redisstore.New(rdb)
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
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}

	// snippet:gin
	r := gin.Default()
	r.Use(ginlimit.MustNew(limiter, rules))
	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })
	log.Fatal(r.Run(":8080"))
	// snippet:end
}

// Echo.
func Example_echo() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	store, err := redisstore.New(rdb)
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
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}

	// snippet:echo
	e := echo.New()
	e.Use(echolimit.MustNew(limiter, rules))
	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "hello\n") })
	log.Fatal(e.Start(":8080"))
	// snippet:end
}

// Fiber.
func Example_fiber() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	store, err := redisstore.New(rdb)
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
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}

	// snippet:fiber
	app := fiber.New()
	app.Use(fiberlimit.MustNew(limiter, rules))
	app.Get("/", func(c *fiber.Ctx) error { return c.SendString("hello\n") })
	log.Fatal(app.Listen(":8080"))
	// snippet:end
}

// A limit is shared by every middleware that names its rule alike over one
// Redis, whatever the framework: here four replicas, one per framework,
// share 3 requests a minute per API key. Each replica has a Limiter of its
// own, as separate processes would.
func Example_sharedLimit() {
	mr := miniredis.NewMiniRedis() // stands in for Redis
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // a still clock: the output is exact

	var closers []func() error
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	newLimiter := func() *core.Limiter { // a replica's own client and Limiter
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		store, err := redisstore.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		l, err := core.NewLimiter(store)
		if err != nil {
			log.Fatal(err)
		}
		closers = append(closers, l.Close, rdb.Close)
		return l
	}
	apiKey, err := keyfuncs.APIKey() // X-API-Key, hashed
	if err != nil {
		log.Fatal(err)
	}
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(3), Key: apiKey}}
	hello := func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") }

	gin.SetMode(gin.ReleaseMode)
	g := gin.New()
	g.Use(ginlimit.MustNew(newLimiter(), rules))
	g.GET("/", gin.WrapF(hello))
	e := echo.New()
	e.Use(echolimit.MustNew(newLimiter(), rules))
	e.GET("/", echo.WrapHandler(http.HandlerFunc(hello)))
	f := fiber.New()
	f.Use(fiberlimit.MustNew(newLimiter(), rules))
	f.Get("/", func(c *fiber.Ctx) error { return c.SendString("hello\n") })

	replicas := []struct {
		name  string
		serve func(*http.Request) *http.Response
	}{
		{"net/http", recorded(nethttp.MustNew(newLimiter(), rules)(http.HandlerFunc(hello)))},
		{"gin", recorded(g)},
		{"echo", recorded(e)},
		{"fiber", func(r *http.Request) *http.Response {
			resp, err := f.Test(r, -1)
			if err != nil {
				log.Fatal(err)
			}
			return resp
		}},
	}
	for _, rep := range replicas {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", "key-1")
		resp := rep.serve(r)
		resp.Body.Close()
		fmt.Printf("%-8s %d  RateLimit: %s\n", rep.name, resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	// Output:
	// net/http 200  RateLimit: "default";r=2;t=20
	// gin      200  RateLimit: "default";r=1;t=40
	// echo     200  RateLimit: "default";r=0;t=60
	// fiber    429  RateLimit: "default";r=0;t=60
}

// recorded serves requests with h into a recorder.
func recorded(h http.Handler) func(*http.Request) *http.Response {
	return func(r *http.Request) *http.Response {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Result()
	}
}

// Behind a load balancer, trust it, and only it, to name the client.
func Example_trustedProxies() {
	// snippet:proxies
	trusted, err := keyfuncs.ParsePrefixes("10.0.0.0/8") // the load balancers' addresses
	if err != nil {
		log.Fatal(err)
	}
	clientIP, err := keyfuncs.IP(keyfuncs.TrustedProxies(trusted...))
	if err != nil {
		log.Fatal(err)
	}
	// snippet:end

	for _, c := range []struct{ peer, xff string }{
		{"10.0.0.5:40000", "198.51.100.23, 203.0.113.7"}, // through the load balancer
		{"198.51.100.23:40000", "203.0.113.7"},           // straight from a client
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		r.Header.Set("X-Forwarded-For", c.xff)
		id, err := clientIP(adapter.HTTPRequest(r))
		fmt.Println(id, err)
	}
	// Output:
	// ip:203.0.113.7 <nil>
	// ip:198.51.100.23 <nil>
}

// Redis Cluster and Sentinel: any go-redis client that runs scripts.
func Example_clusterAndSentinel() {
	// snippet:cluster
	cluster := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"},
		ContextTimeoutEnabled: true, // the Limiter's deadline frees the connection
		MaxRetries:            -1,   // no retry within the deadline: the breaker decides when to try again
		DialerRetries:         1,    // a dead node fails a call at once, not after five dials
	})
	onCluster, err := redisstore.New(cluster)
	if err != nil {
		log.Fatal(err)
	}
	// snippet:end

	// snippet:sentinel
	failover := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            "mymaster",
		SentinelAddrs:         []string{"10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"},
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
	})
	onSentinel, err := redisstore.New(failover)
	if err != nil {
		log.Fatal(err)
	}
	// snippet:end
	defer cluster.Close()
	defer failover.Close()
	// the snippets build the fast client: the store keeps the Limiter's
	// deadline itself (no goroutine per call), and a call is not retried
	fmt.Println(onCluster.Traits().KeepsDeadlines, onSentinel.Traits().KeepsDeadlines)
	fmt.Println(cluster.Options().MaxRetries, cluster.Options().DialerRetries, failover.Options().DialerRetries)
	// Output:
	// true true
	// -1 1 1
}

// The failure policy and the deadline of every store call.
func Example_failureModes() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1})
	store, err := redisstore.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	// snippet:failure
	limiter, err := core.NewLimiter(store,
		core.WithFailurePolicy(core.FailLocal), // the default; or FailOpen, FailClosed
		core.WithReplicas(4),                   // while local, each of 4 replicas counts 1/4 of each limit
		core.WithTimeout(50*time.Millisecond),  // the default deadline of a store call
	)
	// snippet:end
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
}

// Prometheus metrics and debug logs.
func Example_metrics() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	store, err := redisstore.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	// snippet:metrics
	collector := promlimit.MustNew()
	prometheus.MustRegister(collector)
	limiter, err := core.NewLimiter(store, core.WithObserver(collector))
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("GET /metrics", promhttp.Handler()) // on an address of its own, or outside the limits
	// snippet:end
	defer limiter.Close()

	// snippet:debuglog
	debug := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	limiter, err = core.NewLimiter(store, core.WithLogger(debug))
	// logs: level=DEBUG msg="ratekit: decision" rule=default identity=ip:5f0c3a1d9be2 verdict=allowed ...
	// snippet:end
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
}

// A new, lower limit tried in shadow mode beside the enforced one: it is
// counted, and denies nothing.
func Example_shadow() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	limiter, err := core.NewLimiter(store)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	// snippet:shadow
	rules := []core.Rule{
		{Name: "default", Limit: core.PerMinute(100), Key: clientIP},
		{Name: "default-trial", Limit: core.PerMinute(2), Key: clientIP, Shadow: true}, // counted, never denies
	}
	// snippet:end
	req := adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil))
	for range 3 {
		d, err := limiter.Check(context.Background(), req, rules)
		if err != nil {
			log.Fatal(err)
		}
		// a shadow rule that would have denied reports Allowed false
		shadowDenied := slices.ContainsFunc(d.Results, func(r core.RuleResult) bool { return r.Shadow && !r.Allowed })
		fmt.Printf("allowed=%v shadow-denied=%v\n", d.Allowed, shadowDenied)
	}
	// Output:
	// allowed=true shadow-denied=false
	// allowed=true shadow-denied=false
	// allowed=true shadow-denied=true
}

// A store used directly, without rules or middleware.
func Example_storeDirect() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	ctx := context.Background()
	// snippet:direct
	store, err := redisstore.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	// a Limiter's key schema: prefix + rule + ":{" + identity + "}"
	key := "ratekit:api:{ip:203.0.113.7}"
	res, err := store.AllowAllN(ctx, []core.Check{{Key: key, Limit: core.PerMinute(100)}}, 1)
	// err: Redis could not decide. !res[0].Allowed: limited, a result, never an error;
	// retry after res[0].RetryAfter.
	// snippet:end
	_, _ = res, err
}
