package examples_test

// Snippets of docs/adapters.md: a rule on one route, and a rule that counts
// only failed logins, in Gin, Echo v4 and Fiber v2 (snippets_routes_v3v5_test.go
// has Echo v5 and Fiber v3). Each builds its framework's router, which
// TestRouteRules drives.

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/ginlimit"
)

func routesGin(limiter *core.Limiter, rules []core.Rule, clientIP core.KeyFunc) http.Handler {
	handleLogin := func(c *gin.Context) { c.Status(loginStatus(c.Query("password"))) }
	handleSearch := func(c *gin.Context) { c.String(http.StatusOK, "results\n") }
	gin.SetMode(gin.ReleaseMode)
	// snippet:routes-gin
	login := ginlimit.MustNew(limiter, []core.Rule{{Name: "login", Limit: core.PerMinute(3), Key: clientIP}},
		ginlimit.WithCountOnly("login", func(status int) bool { return status == http.StatusUnauthorized }))
	search := ginlimit.MustNew(limiter, []core.Rule{{Name: "search", Limit: core.Per(10, 10*time.Second), Key: clientIP}})
	r := gin.New()
	r.Use(ginlimit.MustNew(limiter, rules)) // every route: the quick start's rules
	r.POST("/login", login, handleLogin)    // this route only: 3 failed logins a minute
	r.GET("/search", search, handleSearch)  // this route only: 10 per 10 s
	// snippet:end
	return r
}

func routesEcho(limiter *core.Limiter, rules []core.Rule, clientIP core.KeyFunc) http.Handler {
	handleLogin := func(c echo.Context) error { return c.NoContent(loginStatus(c.QueryParam("password"))) }
	handleSearch := func(c echo.Context) error { return c.String(http.StatusOK, "results\n") }
	// snippet:routes-echo
	login := echolimit.MustNew(limiter, []core.Rule{{Name: "login", Limit: core.PerMinute(3), Key: clientIP}},
		echolimit.WithCountOnly("login", func(status int) bool { return status == http.StatusUnauthorized }))
	search := echolimit.MustNew(limiter, []core.Rule{{Name: "search", Limit: core.Per(10, 10*time.Second), Key: clientIP}})
	e := echo.New()
	e.Use(echolimit.MustNew(limiter, rules)) // every route: the quick start's rules
	e.POST("/login", handleLogin, login)     // this route only: 3 failed logins a minute
	e.GET("/search", handleSearch, search)   // this route only: 10 per 10 s
	// snippet:end
	return e
}

func routesFiber(limiter *core.Limiter, rules []core.Rule, clientIP core.KeyFunc) *fiber.App {
	handleLogin := func(c *fiber.Ctx) error { return c.SendStatus(loginStatus(c.Query("password"))) }
	handleSearch := func(c *fiber.Ctx) error { return c.SendString("results\n") }
	// snippet:routes-fiber
	login := fiberlimit.MustNew(limiter, []core.Rule{{Name: "login", Limit: core.PerMinute(3), Key: clientIP}},
		fiberlimit.WithCountOnly("login", func(status int) bool { return status == http.StatusUnauthorized }))
	search := fiberlimit.MustNew(limiter, []core.Rule{{Name: "search", Limit: core.Per(10, 10*time.Second), Key: clientIP}})
	app := fiber.New()
	app.Use(fiberlimit.MustNew(limiter, rules)) // every route: the quick start's rules
	app.Post("/login", login, handleLogin)      // this route only: 3 failed logins a minute
	app.Get("/search", search, handleSearch)    // this route only: 10 per 10 s
	// snippet:end
	return app
}

// loginStatus is the test's login: only "right" is the password.
func loginStatus(password string) int {
	if password == "right" {
		return http.StatusNoContent
	}
	return http.StatusUnauthorized
}
