// Command fiber is the ratekit example app for Fiber (v2).
//
//	go run ./examples/fiber                          # embedded miniredis
//	go run ./examples/fiber -redis localhost:6379    # a Redis server
//
// GET / is limited by the default rule (-limit per -period and client),
// GET /strict also by the strict rule (-strict-limit), and GET /healthz is
// never limited, nor is GET /metrics, served with -metrics (METRICS=1).
// Run it with -h for every flag and its environment variable.
package main

import (
	"context"
	"net"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/fiberlimit"
)

func main() { app.Main("fiber", newServer) }

func newServer(limiter *core.Limiter, rules app.Rules, extra app.Extra) (app.Server, error) {
	// The default rule on every route but /healthz, /metrics and /admin/.
	perClient, err := fiberlimit.New(limiter, nil, fiberlimit.WithRuleSet(rules.Default),
		fiberlimit.WithNext(func(c *fiber.Ctx) bool { return app.Unlimited(c.Path()) }))
	if err != nil {
		return nil, err
	}
	// The strict rule on /strict only.
	strict, err := fiberlimit.New(limiter, nil, fiberlimit.WithRuleSet(rules.Strict))
	if err != nil {
		return nil, err
	}
	// The login rule on POST /login only, counting only its 401 answers.
	login, err := fiberlimit.New(limiter, rules.Login, fiberlimit.WithCountOnly(app.LoginRule, app.CountsAsFailure))
	if err != nil {
		return nil, err
	}

	f := fiber.New(fiber.Config{DisableStartupMessage: true})
	f.Use(recover.New(), perClient)
	f.Get(app.RootPath, func(c *fiber.Ctx) error { return c.SendString("hello from fiber\n") })
	f.Get(app.StrictPath, strict, func(c *fiber.Ctx) error { return c.SendString("hello from fiber, strictly\n") })
	f.Post(app.LoginPath, login, func(c *fiber.Ctx) error {
		return c.SendStatus(rules.LoginStatus(c.Get(app.PasswordHeader)))
	})
	f.Get(app.HealthzPath, func(c *fiber.Ctx) error { return c.SendString("ok\n") })
	f.All(app.PagePath+"*", adaptor.HTTPHandler(extra.Page)) // the live page, never limited
	if extra.Metrics != nil {                                // -metrics
		f.Get(app.MetricsPath, adaptor.HTTPHandler(extra.Metrics))
	}
	if extra.Admin != nil { // ADMIN_TOKEN
		f.Get(app.AdminQuotaPath, adaptor.HTTPHandler(extra.Admin))
		f.Post(app.AdminResetPath, adaptor.HTTPHandler(extra.Admin))
	}
	return server{f}, nil
}

// server serves a Fiber app as an app.Server.
type server struct{ *fiber.App }

func (s server) Serve(ln net.Listener) error        { return s.Listener(ln) }
func (s server) Shutdown(ctx context.Context) error { return s.ShutdownWithContext(ctx) }
