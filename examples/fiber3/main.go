// Command fiber3 is the ratekit example app for Fiber v3.
//
//	go run ./examples/fiber3                          # embedded miniredis
//	go run ./examples/fiber3 -redis localhost:6379    # a Redis server
//
// GET / is limited by the default rule (-limit per -period and client),
// GET /strict also by the strict rule (-strict-limit), and GET /healthz is
// never limited, nor is GET /metrics, served with -metrics (METRICS=1).
// Its rules and storage keys are those of every other example app, so it
// shares their limits over one Redis. Run it with -h for every flag and
// its environment variable.
package main

import (
	"context"
	"net"

	"github.com/gofiber/fiber/v3"
	"github.com/gofiber/fiber/v3/middleware/recover"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/fiber3limit"
)

func main() { app.Main("fiber3", newServer) }

func newServer(limiter *core.Limiter, rules app.Rules, extra app.Extra) (app.Server, error) {
	// The default rule on every route but /healthz, /metrics and /admin/.
	perClient, err := fiber3limit.New(limiter, nil, fiber3limit.WithRuleSet(rules.Default),
		fiber3limit.WithNext(func(c fiber.Ctx) bool { return app.Unlimited(c.Path()) }))
	if err != nil {
		return nil, err
	}
	// The strict rule on /strict only.
	strict, err := fiber3limit.New(limiter, nil, fiber3limit.WithRuleSet(rules.Strict))
	if err != nil {
		return nil, err
	}
	// The login rule on POST /login only, counting only its 401 answers.
	login, err := fiber3limit.New(limiter, rules.Login, fiber3limit.WithCountOnly(app.LoginRule, app.CountsAsFailure))
	if err != nil {
		return nil, err
	}

	f := fiber.New()
	f.Use(recover.New(), perClient)
	f.Get(app.RootPath, func(c fiber.Ctx) error { return c.SendString("hello from fiber v3\n") })
	f.Get(app.StrictPath, strict, func(c fiber.Ctx) error { return c.SendString("hello from fiber v3, strictly\n") })
	f.Post(app.LoginPath, login, func(c fiber.Ctx) error {
		return c.SendStatus(rules.LoginStatus(c.Get(app.PasswordHeader)))
	})
	f.Get(app.HealthzPath, func(c fiber.Ctx) error { return c.SendString("ok\n") })
	// Fiber v3 serves a net/http handler as it is
	f.All(app.PagePath+"*", extra.Page) // the live page, never limited
	if extra.Metrics != nil {           // -metrics
		f.Get(app.MetricsPath, extra.Metrics)
	}
	if extra.Admin != nil { // ADMIN_TOKEN
		f.Get(app.AdminQuotaPath, extra.Admin)
		f.Post(app.AdminResetPath, extra.Admin)
	}
	return server{f}, nil
}

// server serves a Fiber v3 app as an app.Server.
type server struct{ *fiber.App }

func (s server) Serve(ln net.Listener) error {
	return s.Listener(ln, fiber.ListenConfig{DisableStartupMessage: true})
}

func (s server) Shutdown(ctx context.Context) error { return s.ShutdownWithContext(ctx) }
