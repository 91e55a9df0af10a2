package echolimit_test

import (
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// inFlightHarness builds Echo apps for the concurrency suite.
var inFlightHarness = adaptertest.InFlightHarness{
	Name: "echolimit.InFlight",
	New: func(_ testing.TB, l *inflight.Limiter, rule inflight.Rule, s adaptertest.InFlightSetup) (adaptertest.App, error) {
		mw, err := adaptertest.MakeInFlight(s, echolimit.InFlight, echolimit.MustInFlight, l, rule, inFlightOptions(s))
		if err != nil {
			return nil, err
		}
		h := func(c echo.Context) error {
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

func inFlightOptions(s adaptertest.InFlightSetup) []echolimit.Option {
	opts := []echolimit.Option{echolimit.WithFailClosedStatus(s.FailClosedStatus), echolimit.WithNoIdentity(s.NoIdentity)}
	if s.Skip != "" {
		opts = append(opts, echolimit.WithSkipper(func(c echo.Context) bool { return c.Path() == s.Skip }))
	}
	if s.Denied != nil {
		opts = append(opts, echolimit.WithInFlightDeniedHandler(func(c echo.Context, res inflight.Result) error {
			a := s.Denied(res, c.Response().Header().Get("Retry-After"))
			return c.String(a.Status, a.Body)
		}))
	}
	if s.Error != nil {
		opts = append(opts, echolimit.WithErrorHandler(func(c echo.Context, _ int, err error) error {
			a := s.Error(err, c.Response().Header().Get("Retry-After"))
			return c.String(a.Status, a.Body)
		}))
	}
	return opts
}

func TestInFlightSuite(t *testing.T) { adaptertest.RunInFlight(t, inFlightHarness) }

// Each middleware rejects the other's denied handler, and nil options.
func TestInFlightOptions(t *testing.T) {
	adaptertest.InFlightRejectsOptions(t, "echolimit.InFlight", echolimit.InFlight, echolimit.MustInFlight, map[string]echolimit.Option{
		adaptertest.NilOption:       nil,
		"WithSkipper":               echolimit.WithSkipper(nil),
		"WithInFlightDeniedHandler": echolimit.WithInFlightDeniedHandler(nil),
		"WithDeniedHandler":         echolimit.WithDeniedHandler(func(echo.Context, core.Decision) error { return nil }),
	})
	adaptertest.RejectsOptions(t, "echolimit.New", echolimit.New, echolimit.MustNew, map[string]echolimit.Option{
		"WithInFlightDeniedHandler": echolimit.WithInFlightDeniedHandler(func(echo.Context, inflight.Result) error { return nil }),
	})
}
