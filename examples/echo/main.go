// Command echo is the ratekit example app for Echo.
//
//	go run ./examples/echo                          # embedded miniredis
//	go run ./examples/echo -redis localhost:6379    # a Redis server
//
// GET / is limited by the default rule (-limit per -period and client),
// GET /strict also by the strict rule (-strict-limit), and GET /healthz is
// never limited, nor is GET /metrics, served with -metrics (METRICS=1).
// Run it with -h for every flag and its environment variable.
package main

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/examples/internal/app"
)

func main() { app.Main("echo", newServer) }

func newServer(limiter *core.Limiter, rules app.Rules, extra app.Extra) (app.Server, error) {
	// The default rule on every route but /healthz, /metrics and /admin/,
	// served or not.
	perClient, err := echolimit.New(limiter, nil, echolimit.WithRuleSet(rules.Default),
		echolimit.WithSkipper(func(c echo.Context) bool { return app.UnlimitedRoute(c.Path(), c.Request().URL.Path) }))
	if err != nil {
		return nil, err
	}
	// The strict rule on /strict only.
	strict, err := echolimit.New(limiter, nil, echolimit.WithRuleSet(rules.Strict))
	if err != nil {
		return nil, err
	}
	// The login rule on POST /login only, counting only its 401 answers.
	login, err := echolimit.New(limiter, rules.Login, echolimit.WithCountOnly(app.LoginRule, app.CountsAsFailure))
	if err != nil {
		return nil, err
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(perClient)
	e.GET(app.RootPath, func(c echo.Context) error { return c.String(http.StatusOK, "hello from echo\n") })
	e.GET(app.StrictPath, func(c echo.Context) error { return c.String(http.StatusOK, "hello from echo, strictly\n") }, strict)
	e.POST(app.LoginPath, func(c echo.Context) error {
		return c.NoContent(rules.LoginStatus(c.Request().Header.Get(app.PasswordHeader)))
	}, login)
	e.GET(app.HealthzPath, func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
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
