package ginlimit_test

import (
	"net/http"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// inFlightHarness builds Gin apps for the concurrency suite.
var inFlightHarness = adaptertest.InFlightHarness{
	Name: "ginlimit.InFlight",
	New: func(_ testing.TB, l *inflight.Limiter, rule inflight.Rule, s adaptertest.InFlightSetup) (adaptertest.App, error) {
		mw, err := adaptertest.MakeInFlight(s, ginlimit.InFlight, ginlimit.MustInFlight, l, rule, inFlightOptions(s))
		if err != nil {
			return nil, err
		}
		h := func(c *gin.Context) {
			if s.Handler != nil {
				s.Handler(c.GetHeader(adaptertest.ClientHeader))
			}
			c.String(http.StatusOK, "ok")
		}
		e := gin.New()
		e.Use(mw)
		e.GET("/", h)
		e.GET("/healthz", h)
		return adaptertest.HTTPApp(e), nil
	},
}

func inFlightOptions(s adaptertest.InFlightSetup) []ginlimit.Option {
	opts := []ginlimit.Option{ginlimit.WithFailClosedStatus(s.FailClosedStatus), ginlimit.WithNoIdentity(s.NoIdentity)}
	if s.Skip != "" {
		opts = append(opts, ginlimit.WithSkip(func(c *gin.Context) bool { return c.FullPath() == s.Skip }))
	}
	if s.Denied != nil {
		opts = append(opts, ginlimit.WithInFlightDeniedHandler(func(c *gin.Context, res inflight.Result) {
			write(c, s.Denied(res, c.Writer.Header().Get("Retry-After")))
		}))
	}
	if s.Error != nil {
		opts = append(opts, ginlimit.WithErrorHandler(func(c *gin.Context, _ int, err error) {
			write(c, s.Error(err, c.Writer.Header().Get("Retry-After")))
		}))
	}
	return opts
}

func TestInFlightSuite(t *testing.T) { adaptertest.RunInFlight(t, inFlightHarness) }

// Each middleware rejects the other's denied handler, and nil options.
func TestInFlightOptions(t *testing.T) {
	adaptertest.InFlightRejectsOptions(t, "ginlimit.InFlight", ginlimit.InFlight, ginlimit.MustInFlight, map[string]ginlimit.Option{
		adaptertest.NilOption:       nil,
		"WithSkip":                  ginlimit.WithSkip(nil),
		"WithInFlightDeniedHandler": ginlimit.WithInFlightDeniedHandler(nil),
		"WithDeniedHandler":         ginlimit.WithDeniedHandler(func(*gin.Context, core.Decision) {}),
	})
	adaptertest.RejectsOptions(t, "ginlimit.New", ginlimit.New, ginlimit.MustNew, map[string]ginlimit.Option{
		"WithInFlightDeniedHandler": ginlimit.WithInFlightDeniedHandler(func(*gin.Context, inflight.Result) {}),
	})
}
