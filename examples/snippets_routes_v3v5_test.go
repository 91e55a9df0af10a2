package examples_test

// Snippets of docs/adapters.md for Echo v5 and Fiber v3, as
// snippets_routes_test.go has them for the others.

import (
	"net/http"
	"time"

	"github.com/gofiber/fiber/v3"
	"github.com/labstack/echo/v5"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echo5limit"
	"github.com/ratekit/ratekit/fiber3limit"
)

func routesEcho5(limiter *core.Limiter, rules []core.Rule, clientIP core.KeyFunc) http.Handler {
	handleLogin := func(c *echo.Context) error { return c.NoContent(loginStatus(c.QueryParam("password"))) }
	handleSearch := func(c *echo.Context) error { return c.String(http.StatusOK, "results\n") }
	// snippet:routes-echo5
	login := echo5limit.MustNew(limiter, []core.Rule{{Name: "login", Limit: core.PerMinute(3), Key: clientIP}},
		echo5limit.WithCountOnly("login", func(status int) bool { return status == http.StatusUnauthorized }))
	search := echo5limit.MustNew(limiter, []core.Rule{{Name: "search", Limit: core.Per(10, 10*time.Second), Key: clientIP}})
	e := echo.New()
	e.Use(echo5limit.MustNew(limiter, rules)) // every route: the quick start's rules
	e.POST("/login", handleLogin, login)      // this route only: 3 failed logins a minute
	e.GET("/search", handleSearch, search)    // this route only: 10 per 10 s
	// snippet:end
	return e
}

func routesFiber3(limiter *core.Limiter, rules []core.Rule, clientIP core.KeyFunc) *fiber.App {
	handleLogin := func(c fiber.Ctx) error { return c.SendStatus(loginStatus(c.Query("password"))) }
	handleSearch := func(c fiber.Ctx) error { return c.SendString("results\n") }
	// snippet:routes-fiber3
	login := fiber3limit.MustNew(limiter, []core.Rule{{Name: "login", Limit: core.PerMinute(3), Key: clientIP}},
		fiber3limit.WithCountOnly("login", func(status int) bool { return status == http.StatusUnauthorized }))
	search := fiber3limit.MustNew(limiter, []core.Rule{{Name: "search", Limit: core.Per(10, 10*time.Second), Key: clientIP}})
	app := fiber.New()
	app.Use(fiber3limit.MustNew(limiter, rules)) // every route: the quick start's rules
	app.Post("/login", login, handleLogin)       // this route only: 3 failed logins a minute
	app.Get("/search", search, handleSearch)     // this route only: 10 per 10 s
	// snippet:end
	return app
}

// fiber3Handler serves a Fiber v3 app's answers to net/http requests.
func fiber3Handler(app *fiber.App) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := app.Test(r, fiber.TestConfig{}) // no timeout
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})
}
