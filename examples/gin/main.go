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

func newServer(limiter *core.Limiter, rules app.Rules, metrics http.Handler) (app.Server, error) {
	// The default rule on every route but /healthz and /metrics, served or not.
	perClient, err := ginlimit.New(limiter, rules.Default,
		ginlimit.WithSkip(func(c *gin.Context) bool { return app.UnlimitedRoute(c.FullPath(), c.Request.URL.Path) }))
	if err != nil {
		return nil, err
	}
	// The strict rule on /strict only.
	strict, err := ginlimit.New(limiter, rules.Strict)
	if err != nil {
		return nil, err
	}

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery(), perClient)
	r.GET(app.RootPath, func(c *gin.Context) { c.String(http.StatusOK, "hello from gin\n") })
	r.GET(app.StrictPath, strict, func(c *gin.Context) { c.String(http.StatusOK, "hello from gin, strictly\n") })
	r.GET(app.HealthzPath, func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })
	if metrics != nil { // -metrics
		r.GET(app.MetricsPath, gin.WrapH(metrics))
	}
	return app.HTTPServer(r), nil
}
