package fiberlimit_test

import (
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/redisstore"
)

// Key limits by what only Fiber knows. The identity it returns is copied,
// so a string that fasthttp will reuse, such as c.Get's, is safe.
func ExampleKey() {
	tenant := fiberlimit.Key(func(c *fiber.Ctx) (string, error) {
		if id, _ := c.Locals("tenant").(string); id != "" {
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
	perTenant := fiberlimit.MustNew(limiter, []core.Rule{{Name: "tenant", Limit: core.PerHour(1000), Key: tenant}})

	app := fiber.New()
	app.Use(func(c *fiber.Ctx) error { c.Locals("tenant", "acme"); return c.Next() }, perTenant)
	app.Get("/", func(c *fiber.Ctx) error { return c.SendString("hello") })

	resp, err := app.Test(httptest.NewRequest("GET", "/", nil), -1)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit-Policy"), resp.Header.Get("X-RateLimit-Remaining"))
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

	// MustNew suits rules fixed at start-up; the login limit is a handler
	// of its route alone, and the global one skips health checks
	app := fiber.New()
	app.Use(fiberlimit.MustNew(limiter, []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}},
		fiberlimit.WithNext(func(c *fiber.Ctx) bool { return c.Path() == "/healthz" })))
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.SendString("ok") })
	app.Post("/login",
		fiberlimit.MustNew(limiter, []core.Rule{{Name: "login", Limit: core.PerMinute(2), Key: clientIP}}),
		func(c *fiber.Ctx) error { return c.SendString("welcome") })

	for range 3 {
		resp, err := app.Test(httptest.NewRequest("POST", "/login", nil), -1)
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("%d X-RateLimit-Remaining=%s Retry-After=%q\n", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), resp.Header.Get("Retry-After"))
		fmt.Println("    RateLimit:", resp.Header.Get("RateLimit"))
	}
	// Output:
	// 200 X-RateLimit-Remaining=1 Retry-After=""
	//     RateLimit: "default";r=99;t=1, "login";r=1;t=30
	// 200 X-RateLimit-Remaining=0 Retry-After=""
	//     RateLimit: "default";r=98;t=2, "login";r=0;t=60
	// 429 X-RateLimit-Remaining=0 Retry-After="30"
	//     RateLimit: "default";r=97;t=2, "login";r=0;t=60
}
