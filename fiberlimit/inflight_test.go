package fiberlimit_test

import (
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// inFlightHarness builds Fiber apps for the concurrency suite. app.Test
// serves on a goroutine of its own, where a panic would end the test
// binary: Fiber's recover middleware, outside the one under test, turns it
// into a 500.
var inFlightHarness = adaptertest.InFlightHarness{
	Name: "fiberlimit.InFlight",
	New: func(tb testing.TB, l *inflight.Limiter, rule inflight.Rule, s adaptertest.InFlightSetup) (adaptertest.App, error) {
		mw, err := adaptertest.MakeInFlight(s, fiberlimit.InFlight, fiberlimit.MustInFlight, l, rule, inFlightOptions(s))
		if err != nil {
			return nil, err
		}
		h := func(c *fiber.Ctx) error {
			if s.Handler != nil {
				s.Handler(c.Get(adaptertest.ClientHeader))
			}
			return c.SendString("ok")
		}
		app := fiber.New()
		app.Use(recover.New(), mw)
		app.Get("/", h)
		app.Get("/healthz", h)
		return serve(tb, app, nil), nil
	},
}

func inFlightOptions(s adaptertest.InFlightSetup) []fiberlimit.Option {
	opts := []fiberlimit.Option{fiberlimit.WithFailClosedStatus(s.FailClosedStatus), fiberlimit.WithNoIdentity(s.NoIdentity)}
	if s.Skip != "" {
		opts = append(opts, fiberlimit.WithNext(func(c *fiber.Ctx) bool { return c.Path() == s.Skip }))
	}
	if s.Denied != nil {
		opts = append(opts, fiberlimit.WithInFlightDeniedHandler(func(c *fiber.Ctx, res inflight.Result) error {
			a := s.Denied(res, c.GetRespHeader("Retry-After"))
			return c.Status(a.Status).SendString(a.Body)
		}))
	}
	if s.Error != nil {
		opts = append(opts, fiberlimit.WithErrorHandler(func(c *fiber.Ctx, _ int, err error) error {
			a := s.Error(err, c.GetRespHeader("Retry-After"))
			return c.Status(a.Status).SendString(a.Body)
		}))
	}
	return opts
}

func TestInFlightSuite(t *testing.T) { adaptertest.RunInFlight(t, inFlightHarness) }

// Each middleware rejects the other's denied handler, and nil options.
func TestInFlightOptions(t *testing.T) {
	adaptertest.InFlightRejectsOptions(t, "fiberlimit.InFlight", fiberlimit.InFlight, fiberlimit.MustInFlight, map[string]fiberlimit.Option{
		adaptertest.NilOption:       nil,
		"WithNext":                  fiberlimit.WithNext(nil),
		"WithInFlightDeniedHandler": fiberlimit.WithInFlightDeniedHandler(nil),
		"WithDeniedHandler":         fiberlimit.WithDeniedHandler(func(*fiber.Ctx, core.Decision) error { return nil }),
	})
	adaptertest.RejectsOptions(t, "fiberlimit.New", fiberlimit.New, fiberlimit.MustNew, map[string]fiberlimit.Option{
		"WithInFlightDeniedHandler": fiberlimit.WithInFlightDeniedHandler(func(*fiber.Ctx, inflight.Result) error { return nil }),
	})
}
