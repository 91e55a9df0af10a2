package ginlimit_test

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

func init() { gin.SetMode(gin.TestMode) }

func ok(c *gin.Context) {
	status, _ := adaptertest.AnswerStatus(c.GetHeader)
	adaptertest.PanicIf(c.GetHeader, "before")
	if adaptertest.StreamAnswer(c.Request.Context(), c.GetHeader, func(line string) error {
		_, err := c.Writer.WriteString(line)
		c.Writer.Flush()
		return err
	}, func(n int) { ginlimit.AddCost(c, n) }) {
		return
	}
	c.String(status, "ok")
	ginlimit.AddCost(c, adaptertest.AnswerCost(c.GetHeader))
	adaptertest.PanicIf(c.GetHeader, "after")
}

// engine returns an engine that serves ok on GET / and /healthz behind mws.
func engine(mws ...gin.HandlerFunc) *gin.Engine {
	e := gin.New()
	e.Use(mws...)
	e.GET("/", ok)
	e.GET("/healthz", ok)
	return e
}

// harness builds Gin apps for the shared suite: the per-route middleware
// on a group, the login one on its route.
var harness = adaptertest.Harness{
	Name: "ginlimit.New",
	New: func(_ testing.TB, l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (adaptertest.App, error) {
		mw, err := newMiddleware(l, rules, s)
		if err != nil {
			return nil, err
		}
		return adaptertest.HTTPApp(engine(mw)), nil
	},
	Routes: func(_ testing.TB, l *core.Limiter, global, users, login []core.Rule) adaptertest.App {
		e := gin.New()
		e.Use(ginlimit.MustNew(l, global))
		e.Group("/users", ginlimit.MustNew(l, users)).GET("/:id", ok)
		e.POST("/login", ginlimit.MustNew(l, login), ok)
		e.GET("/", ok)
		return adaptertest.HTTPApp(e)
	},
	Pattern: "/users/:id",
}

func newMiddleware(l *core.Limiter, rules []core.Rule, s adaptertest.Setup) (gin.HandlerFunc, error) {
	if s.Must {
		return ginlimit.MustNew(l, rules, options(s)...), nil
	}
	return ginlimit.New(l, rules, options(s)...)
}

// options returns the options that s describes; its hooks write what s's
// hooks answer.
func options(s adaptertest.Setup) []ginlimit.Option {
	opts := adaptertest.Shared(s.Config, ginlimit.WithHeaders, ginlimit.WithIETFDraft, ginlimit.WithFailClosedStatus, ginlimit.WithNoIdentity)
	opts = append(opts, adaptertest.Quota(s.Config, ginlimit.WithRuleSet, ginlimit.WithCountOnly)...)
	opts = append(opts, adaptertest.Charged(s.Config, ginlimit.WithCharged)...)
	if s.Skip != "" {
		opts = append(opts, ginlimit.WithSkip(func(c *gin.Context) bool { return c.FullPath() == s.Skip }))
	}
	if s.Denied != nil {
		opts = append(opts, ginlimit.WithDeniedHandler(func(c *gin.Context, d core.Decision) {
			write(c, s.Denied(d, c.Writer.Header().Get("Retry-After")))
		}))
	}
	if s.Error != nil {
		opts = append(opts, ginlimit.WithErrorHandler(func(c *gin.Context, status int, err error) {
			write(c, s.Error(status, err, c.Writer.Header().Get("Retry-After")))
		}))
	}
	return opts
}

func write(c *gin.Context, a adaptertest.Answer) { c.Data(a.Status, "text/plain", []byte(a.Body)) }

func TestSuite(t *testing.T) { adaptertest.Run(t, harness) }

// Key and cost functions over the *gin.Context read what an earlier
// middleware put there, and fail outside Gin.
func TestNativeKeyAndCost(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := core.Rule{
		Name:  "tenant",
		Limit: core.Limit{Rate: 10, Period: time.Minute, Algorithm: core.FixedWindow},
		Key: ginlimit.Key(func(c *gin.Context) (string, error) {
			if id := c.GetString("tenant"); id != "" {
				return "tenant:" + id, nil
			}
			return "", core.ErrNoIdentity
		}),
		Cost: ginlimit.Cost(func(c *gin.Context) int { return c.GetInt("cost") }),
	}
	app := adaptertest.HTTPApp(engine(func(c *gin.Context) {
		c.Set("tenant", c.GetHeader(adaptertest.ClientHeader))
		c.Set("cost", 3)
	}, ginlimit.MustNew(l, []core.Rule{rule})))
	if got, want := app.Get("/", "acme").Header.Get("X-RateLimit-Remaining"), "7"; got != want {
		t.Errorf("X-RateLimit-Remaining %q, want %q", got, want)
	}
	if got, want := app.Get("/", "").Header.Get("X-RateLimit-Remaining"), ""; got != want {
		t.Errorf("no tenant: X-RateLimit-Remaining %q, want none (the rule is skipped)", got)
	}
	outside := adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil))
	if _, err := rule.Key(outside); err == nil || errors.Is(err, core.ErrNoIdentity) {
		t.Errorf("native key outside Gin: %v, want an error not wrapping ErrNoIdentity", err)
	}
	if got := rule.Cost(outside); got != 0 {
		t.Errorf("native cost outside Gin: %d, want 0", got)
	}
	if _, ok := ginlimit.Context(outside); ok {
		t.Error("Context found a *gin.Context outside Gin")
	}
}

// A nil option, and options given a nil function, are rejected.
func TestNilOptions(t *testing.T) {
	adaptertest.RejectsOptions(t, "ginlimit.New", ginlimit.New, ginlimit.MustNew, map[string]ginlimit.Option{
		adaptertest.NilOption: nil,
		"WithSkip":            ginlimit.WithSkip(nil),
		"WithDeniedHandler":   ginlimit.WithDeniedHandler(nil),
		"WithErrorHandler":    ginlimit.WithErrorHandler(nil),
	})
}
