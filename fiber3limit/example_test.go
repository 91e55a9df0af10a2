package fiber3limit_test

import (
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/gofiber/fiber/v3"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/fiber3limit"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/redisstore"
)

// A global limit of 100 requests a minute per client IP that skips health
// checks, and a stricter one on the login route, over Redis.
func Example() {
	clientIP, err := keyfuncs.IP() // the socket peer, whatever c.IP() would say
	if err != nil {
		log.Fatal(err)
	}
	global := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}
	login := []core.Rule{{Name: "login", Limit: core.PerMinute(2), Key: clientIP}}

	// miniredis stands in for Redis, on a still clock: the output is exact
	mr := miniredis.NewMiniRedis()
	mr.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
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
	defer limiter.Close()

	app := fiber.New()
	// the global limit skips health checks through WithNext, the Next of
	// Fiber's own middlewares; the login limit is a handler of its route
	app.Use(fiber3limit.MustNew(limiter, global, fiber3limit.WithNext(func(c fiber.Ctx) bool { return c.Path() == "/healthz" })))
	app.Get("/healthz", func(c fiber.Ctx) error { return c.SendStatus(fiber.StatusNoContent) })
	app.Post("/login", fiber3limit.MustNew(limiter, login), func(c fiber.Ctx) error { return c.SendString("welcome") })

	for _, r := range []struct{ method, target string }{
		{"POST", "/login"}, {"POST", "/login"}, {"POST", "/login"}, {"GET", "/healthz"},
	} {
		resp, err := app.Test(httptest.NewRequest(r.method, r.target, nil), fiber.TestConfig{}) // no timeout
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		fmt.Printf("%s %s: %d Retry-After=%q RateLimit=%q\n", r.method, r.target, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"))
	}
	// Output:
	// POST /login: 200 Retry-After="" RateLimit="\"default\";r=99;t=1, \"login\";r=1;t=30"
	// POST /login: 200 Retry-After="" RateLimit="\"default\";r=98;t=2, \"login\";r=0;t=60"
	// POST /login: 429 Retry-After="30" RateLimit="\"default\";r=97;t=2, \"login\";r=0;t=60"
	// GET /healthz: 204 Retry-After="" RateLimit=""
}

// Key limits by what only Fiber knows, here a tenant that an earlier
// handler stored in the request's Locals. The identity it returns is
// copied, so a string that fasthttp will reuse, such as c.Get's, is safe.
func ExampleKey() {
	perTenant := fiber3limit.Key(func(c fiber.Ctx) (string, error) {
		if id := fiber.Locals[string](c, "tenant"); id != "" {
			return "tenant:" + id, nil
		}
		return "", core.ErrNoIdentity
	})
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

	app := fiber.New()
	app.Use(func(c fiber.Ctx) error {
		fiber.Locals(c, "tenant", "acme") // as an authentication middleware would
		return c.Next()
	})
	app.Use(fiber3limit.MustNew(limiter, []core.Rule{{Name: "tenant", Limit: core.PerHour(1000), Key: perTenant}}))
	app.Get("/", func(c fiber.Ctx) error { return c.SendString("hello") })

	resp, err := app.Test(httptest.NewRequest("GET", "/", nil), fiber.TestConfig{})
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit-Policy"), resp.Header.Get("X-RateLimit-Remaining"))
	// Output:
	// 200 "tenant";q=1000;w=3600 999
}
