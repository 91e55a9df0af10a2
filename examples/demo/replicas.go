package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	"github.com/labstack/echo/v4"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echolimit"
	"github.com/ratekit/ratekit/examples/internal/serve"
	"github.com/ratekit/ratekit/fiberlimit"
	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/nethttp"
)

// A framework builds a replica's server: its router with rules installed on
// GET / through the framework's adapter, as in examples/<framework>.
type framework struct {
	name  string
	build func(l *core.Limiter, rules []core.Rule) (serve.Server, error)
}

var frameworks = []framework{
	{"net/http", func(l *core.Limiter, rules []core.Rule) (serve.Server, error) {
		mw, err := nethttp.New(l, rules)
		if err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello from net/http\n") })
		return serve.HTTPServer(mw(mux)), nil
	}},
	{"gin", func(l *core.Limiter, rules []core.Rule) (serve.Server, error) {
		mw, err := ginlimit.New(l, rules)
		if err != nil {
			return nil, err
		}
		gin.SetMode(gin.ReleaseMode)
		r := gin.New()
		r.Use(mw)
		r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "hello from gin\n") })
		return serve.HTTPServer(r), nil
	}},
	{"echo", func(l *core.Limiter, rules []core.Rule) (serve.Server, error) {
		mw, err := echolimit.New(l, rules)
		if err != nil {
			return nil, err
		}
		e := echo.New()
		e.HideBanner, e.HidePort = true, true
		e.Use(mw)
		e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "hello from echo\n") })
		return serve.HTTPServer(e), nil
	}},
	{"fiber", func(l *core.Limiter, rules []core.Rule) (serve.Server, error) {
		mw, err := fiberlimit.New(l, rules)
		if err != nil {
			return nil, err
		}
		f := fiber.New(fiber.Config{DisableStartupMessage: true})
		f.Use(mw)
		f.Get("/", func(c *fiber.Ctx) error { return c.SendString("hello from fiber\n") })
		return fiberServer{f}, nil
	}},
}

// fiberServer serves a Fiber app as an serve.Server.
type fiberServer struct{ *fiber.App }

func (s fiberServer) Serve(ln net.Listener) error        { return s.Listener(ln) }
func (s fiberServer) Shutdown(ctx context.Context) error { return s.ShutdownWithContext(ctx) }

// A replica is one framework's server on its own loopback port, with its
// own Limiter, as if it ran in a process of its own.
type replica struct {
	name    string
	url     string
	limiter *core.Limiter
	breaker *atomic.Int32 // its circuit breaker's state
	srv     serve.Server
	served  chan error
}

// startReplica starts fw's server over l on a free loopback port.
func startReplica(fw framework, l *core.Limiter, rules []core.Rule) (*replica, error) {
	srv, err := fw.build(l, rules)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &replica{name: fw.name, url: "http://" + ln.Addr().String(), limiter: l, srv: srv, served: make(chan error, 1)}
	go func() { r.served <- srv.Serve(ln) }()
	return r, nil
}

// stop shuts the replica's server down, then closes its Limiter.
func (r *replica) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	if serr := <-r.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, r.limiter.Close())
}
