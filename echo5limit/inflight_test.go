package echo5limit_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v5"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echo5limit"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// inFlightHarness builds Echo apps for the concurrency suite.
var inFlightHarness = adaptertest.InFlightHarness{
	Name: "echo5limit.InFlight",
	New: func(_ testing.TB, l *inflight.Limiter, rule inflight.Rule, s adaptertest.InFlightSetup) (adaptertest.App, error) {
		mw, err := adaptertest.MakeInFlight(s, echo5limit.InFlight, echo5limit.MustInFlight, l, rule, inFlightOptions(s))
		if err != nil {
			return nil, err
		}
		h := func(c *echo.Context) error {
			if s.Handler != nil {
				s.Handler(c.Request().Header.Get(adaptertest.ClientHeader))
			}
			return c.String(http.StatusOK, "ok")
		}
		e := echo.New()
		e.Use(mw)
		e.GET("/", h)
		e.GET("/healthz", h)
		return adaptertest.HTTPApp(e), nil
	},
}

func inFlightOptions(s adaptertest.InFlightSetup) []echo5limit.Option {
	opts := []echo5limit.Option{echo5limit.WithFailClosedStatus(s.FailClosedStatus), echo5limit.WithNoIdentity(s.NoIdentity)}
	if s.Skip != "" {
		opts = append(opts, echo5limit.WithSkipper(func(c *echo.Context) bool { return c.Path() == s.Skip }))
	}
	if s.Denied != nil {
		opts = append(opts, echo5limit.WithInFlightDeniedHandler(func(c *echo.Context, res inflight.Result) error {
			a := s.Denied(res, c.Response().Header().Get("Retry-After"))
			return c.String(a.Status, a.Body)
		}))
	}
	if s.Error != nil {
		opts = append(opts, echo5limit.WithErrorHandler(func(c *echo.Context, _ int, err error) error {
			a := s.Error(err, c.Response().Header().Get("Retry-After"))
			return c.String(a.Status, a.Body)
		}))
	}
	return opts
}

func TestInFlightSuite(t *testing.T) { adaptertest.RunInFlight(t, inFlightHarness) }

// Each middleware rejects the other's denied handler, and nil options.
func TestInFlightOptions(t *testing.T) {
	adaptertest.InFlightRejectsOptions(t, "echo5limit.InFlight", echo5limit.InFlight, echo5limit.MustInFlight, map[string]echo5limit.Option{
		adaptertest.NilOption:       nil,
		"WithSkipper":               echo5limit.WithSkipper(nil),
		"WithInFlightDeniedHandler": echo5limit.WithInFlightDeniedHandler(nil),
		"WithDeniedHandler":         echo5limit.WithDeniedHandler(func(*echo.Context, core.Decision) error { return nil }),
	})
	adaptertest.RejectsOptions(t, "echo5limit.New", echo5limit.New, echo5limit.MustNew, map[string]echo5limit.Option{
		"WithInFlightDeniedHandler": echo5limit.WithInFlightDeniedHandler(func(*echo.Context, inflight.Result) error { return nil }),
	})
}
