// Command gin is the ratekit example app for Gin.
//
//	go run ./examples/gin                          # embedded miniredis
//	go run ./examples/gin -redis localhost:6379    # a Redis server
//
// GET / is limited by the default rule (-limit per -period and client),
// GET /strict also by the strict rule (-strict-limit), and GET /healthz is
// never limited, nor is GET /metrics, served with -metrics (METRICS=1).
// Run it with -h for every flag and its environment variable.
package main

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/ginlimit"
)

func main() { app.Main("gin", newServer) }

func newServer(limiter *core.Limiter, rules app.Rules, extra app.Extra) (app.Server, error) {
	// The default rule on every route but /healthz, /metrics and /admin/,
	// served or not.
	perClient, err := ginlimit.New(limiter, nil, ginlimit.WithRuleSet(rules.Default),
		ginlimit.WithSkip(func(c *gin.Context) bool { return app.UnlimitedRoute(c.FullPath(), c.Request.URL.Path) }))
	if err != nil {
		return nil, err
	}
	// The strict rule on /strict only.
	strict, err := ginlimit.New(limiter, nil, ginlimit.WithRuleSet(rules.Strict))
	if err != nil {
		return nil, err
	}
	// The login rule on POST /login only, counting only its 401 answers.
	login, err := ginlimit.New(limiter, rules.Login, ginlimit.WithCountOnly(app.LoginRule, app.CountsAsFailure))
	if err != nil {
		return nil, err
	}

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery(), perClient)
	r.GET(app.RootPath, func(c *gin.Context) { c.String(http.StatusOK, "hello from gin\n") })
	r.GET(app.StrictPath, strict, func(c *gin.Context) { c.String(http.StatusOK, "hello from gin, strictly\n") })
	r.POST(app.LoginPath, login, func(c *gin.Context) { c.Status(rules.LoginStatus(c.GetHeader(app.PasswordHeader))) })
	r.GET(app.HealthzPath, func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	r.Any(app.PagePath+"*file", gin.WrapH(extra.Page)) // the live page, never limited
	if extra.Metrics != nil {                          // -metrics
		r.GET(app.MetricsPath, gin.WrapH(extra.Metrics))
	}
	if extra.Admin != nil { // ADMIN_TOKEN
		r.GET(app.AdminQuotaPath, gin.WrapH(extra.Admin))
		r.POST(app.AdminResetPath, gin.WrapH(extra.Admin))
	}
	return app.HTTPServer(r), nil
}
