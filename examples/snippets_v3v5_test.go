package examples_test

// Snippets of README.md for Fiber v3 and Echo v5, checked like those of
// snippets_test.go; the functions serve until killed, so they are compiled,
// not run.

import (
	"log"
	"net/http"

	"github.com/gofiber/fiber/v3"
	"github.com/labstack/echo/v5"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echo5limit"
	"github.com/ratekit/ratekit/fiber3limit"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/redisstore"
)

// quickStart is the README's quick start setup: a Limiter over Redis and a
// rule of 100 requests a minute per client IP.
func quickStart() (*core.Limiter, []core.Rule) {
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
	return limiter, []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}
}

// Fiber v3.
func Example_fiber3() {
	limiter, rules := quickStart()

	// snippet:fiber3
	app := fiber.New()
	app.Use(fiber3limit.MustNew(limiter, rules))
	app.Get("/", func(c fiber.Ctx) error { return c.SendString("hello\n") })
	log.Fatal(app.Listen(":8080"))
	// snippet:end
}

// Echo v5.
func Example_echo5() {
	limiter, rules := quickStart()

	// snippet:echo5
	e := echo.New()
	e.Use(echo5limit.MustNew(limiter, rules))
	e.GET("/", func(c *echo.Context) error { return c.String(http.StatusOK, "hello\n") })
	log.Fatal(e.Start(":8080"))
	// snippet:end
}
