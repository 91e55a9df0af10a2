package fiber3limit_test

import (
	"testing"

	"github.com/gofiber/fiber/v3"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/fiber3limit"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// inFlightHarness builds Fiber v3 apps for the concurrency suite; a
// handler's panic leaves the app's fasthttp handler, called directly.
var inFlightHarness = adaptertest.InFlightHarness{
	Name: "fiber3limit.InFlight",
	New: func(_ testing.TB, l *inflight.Limiter, rule inflight.Rule, s adaptertest.InFlightSetup) (adaptertest.App, error) {
		mw, err := adaptertest.MakeInFlight(s, fiber3limit.InFlight, fiber3limit.MustInFlight, l, rule, inFlightOptions(s))
		if err != nil {
			return nil, err
		}
		h := func(c fiber.Ctx) error {
			if s.Handler != nil {
				s.Handler(c.Get(adaptertest.ClientHeader))
			}
			return c.SendString("ok")
		}
		app := fiber.New()
		app.Use(withNetContext, mw)
		app.Get("/", h)
		app.Get("/healthz", h)
		return serve(app), nil
	},
}

func inFlightOptions(s adaptertest.InFlightSetup) []fiber3limit.Option {
	opts := []fiber3limit.Option{fiber3limit.WithFailClosedStatus(s.FailClosedStatus), fiber3limit.WithNoIdentity(s.NoIdentity)}
	if s.Skip != "" {
		opts = append(opts, fiber3limit.WithNext(func(c fiber.Ctx) bool { return c.Path() == s.Skip }))
	}
	if answer := s.Denied; answer != nil {
		opts = append(opts, fiber3limit.WithInFlightDeniedHandler(func(c fiber.Ctx, res inflight.Result) error {
			return send(c, answer(res, c.GetRespHeader("Retry-After")))
		}))
	}
	if answer := s.Error; answer != nil {
		opts = append(opts, fiber3limit.WithErrorHandler(func(c fiber.Ctx, _ int, err error) error {
			return send(c, answer(err, c.GetRespHeader("Retry-After")))
		}))
	}
	return opts
}

func TestInFlightSuite(t *testing.T) { adaptertest.RunInFlight(t, inFlightHarness) }

// Each middleware rejects the other's denied handler, and nil options.
func TestInFlightOptions(t *testing.T) {
	adaptertest.InFlightRejectsOptions(t, "fiber3limit.InFlight", fiber3limit.InFlight, fiber3limit.MustInFlight, map[string]fiber3limit.Option{
		adaptertest.NilOption:       nil,
		"WithNext":                  fiber3limit.WithNext(nil),
		"WithInFlightDeniedHandler": fiber3limit.WithInFlightDeniedHandler(nil),
		"WithDeniedHandler":         fiber3limit.WithDeniedHandler(func(fiber.Ctx, core.Decision) error { return nil }),
	})
	adaptertest.RejectsOptions(t, "fiber3limit.New", fiber3limit.New, fiber3limit.MustNew, map[string]fiber3limit.Option{
		"WithInFlightDeniedHandler": fiber3limit.WithInFlightDeniedHandler(func(fiber.Ctx, inflight.Result) error { return nil }),
	})
}
