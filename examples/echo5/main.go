// Command echo5 is the ratekit example app for Echo v5.
//
//	go run ./examples/echo5                          # embedded miniredis
//	go run ./examples/echo5 -redis localhost:6379    # a Redis server
//
// GET / is limited by the default rule (-limit per -period and client),
// GET /strict also by the strict rule (-strict-limit), and GET /healthz is
// never limited, nor is GET /metrics, served with -metrics (METRICS=1).
// Its rules and storage keys are those of every other example app, so it
// shares their limits over one Redis. Run it with -h for every flag and
// its environment variable.
package main

import (
	"net/http"

	"github.com/labstack/echo/v5"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echo5limit"
	"github.com/ratekit/ratekit/examples/internal/app"
)

func main() { app.Main("echo5", newServer) }

func newServer(limiter *core.Limiter, rules app.Rules, extra app.Extra) (app.Server, error) {
	// The default rule on every route but /healthz, /metrics and /admin/,
	// served or not: an unmatched route's pattern is "".
	perClient, err := echo5limit.New(limiter, nil, echo5limit.WithRuleSet(rules.Default),
		echo5limit.WithSkipper(func(c *echo.Context) bool { return app.UnlimitedRoute(c.Path(), c.Request().URL.Path) }))
	if err != nil {
		return nil, err
	}
	// The strict rule on /strict only.
	strict, err := echo5limit.New(limiter, nil, echo5limit.WithRuleSet(rules.Strict))
	if err != nil {
		return nil, err
	}
	// The login rule on POST /login only, counting only its 401 answers.
	login, err := echo5limit.New(limiter, rules.Login, echo5limit.WithCountOnly(app.LoginRule, app.CountsAsFailure))
	if err != nil {
		return nil, err
	}

	e := echo.New()
	e.Use(perClient)
	e.GET(app.RootPath, func(c *echo.Context) error { return c.String(http.StatusOK, "hello from echo v5\n") })
	e.GET(app.StrictPath, func(c *echo.Context) error { return c.String(http.StatusOK, "hello from echo v5, strictly\n") }, strict)
	e.POST(app.LoginPath, func(c *echo.Context) error {
		return c.NoContent(rules.LoginStatus(c.Request().Header.Get(app.PasswordHeader)))
	}, login)
	e.GET(app.HealthzPath, func(c *echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.Any(app.PagePath+"*", echo.WrapHandler(extra.Page)) // the live page, never limited
	if extra.Metrics != nil {                             // -metrics
		e.GET(app.MetricsPath, echo.WrapHandler(extra.Metrics))
	}
	if extra.Admin != nil { // ADMIN_TOKEN
		e.GET(app.AdminQuotaPath, echo.WrapHandler(extra.Admin))
		e.POST(app.AdminResetPath, echo.WrapHandler(extra.Admin))
	}
	return app.HTTPServer(e), nil
}
