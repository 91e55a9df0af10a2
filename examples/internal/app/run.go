package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/core"
)

// Server serves an app's routes on a listener until Shutdown. An
// *http.Server is one; Fiber's app needs a two-method wrapper.
type Server interface {
	// Serve accepts connections on ln until Shutdown; it may return
	// http.ErrServerClosed then.
	Serve(ln net.Listener) error
	// Shutdown stops accepting connections and waits, until ctx ends, for
	// requests in flight to finish.
	Shutdown(ctx context.Context) error
}

// Build returns an app's server: its framework's router with the rules
// installed through its adapter, over limiter. metrics is the handler of
// [MetricsPath] when the app runs with -metrics, nil otherwise: the app
// serves it, outside its limits, only when it is not nil.
type Build func(limiter *core.Limiter, rules Rules, metrics http.Handler) (Server, error)

// StoreTimeout is a store deadline for a store in the caller's own process
// on a busy machine (the demo, the apps' own tests), far above the
// library's default of 50 ms ([core.DefaultTimeout]), where a short
// deadline would turn a moment of CPU starvation into a false outage. The
// apps keep the library's default unless -timeout raises it, as a service
// next to its Redis should.
const StoreTimeout = time.Second

// ShutdownTimeout bounds how long a stopping app waits for requests in
// flight.
const ShutdownTimeout = 10 * time.Second

// Main runs the example app called name and exits: with status 0 after a
// graceful shutdown on SIGINT or SIGTERM, 2 for a bad flag or environment
// value, 1 when it cannot start.
func Main(name string, build Build) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, name, os.Args[1:], os.Getenv, os.Stderr, build)
	stop()
	os.Exit(code)
}

// HTTPServer returns an *http.Server for h with the timeouts a server
// facing the internet needs.
func HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}

// Run runs the example app called name with args and the environment of
// getenv, logging to stderr, until ctx ends, and returns the exit status:
// 0 after a graceful shutdown or for -h, 2 for a bad flag or environment
// value, 1 when the app cannot start or stops by itself.
func Run(ctx context.Context, name string, args []string, getenv func(string) string, stderr io.Writer, build Build) int {
	cfg, err := Parse(name, args, getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var ue *UsageError
		if errors.As(err, &ue) && ue.printed {
			return 2
		}
		fmt.Fprintf(stderr, "%s: %v\nRun %s -h to see every flag.\n", name, err, name)
		return 2
	}
	log := NewLogger(stderr)
	fail := func(msg string, err error) int {
		log.Error(msg, "err", err)
		return 1
	}

	backend, err := OpenBackend(cfg)
	if err != nil {
		return fail("cannot open the store", err)
	}
	defer backend.Close()
	opts := []core.Option{
		core.WithFailurePolicy(cfg.Fail),
		core.WithTimeout(cfg.Timeout),
		core.WithLogger(log),
	}
	var metrics http.Handler
	if cfg.Metrics {
		collector, handler, err := newMetrics()
		if err != nil {
			return fail("cannot set up the metrics", err)
		}
		opts = append(opts, core.WithObserver(collector))
		metrics = handler
	}
	var otel *otelTelemetry // -otel's, shut down after the Limiter
	if cfg.OTel {
		if otel, err = newOTel(stderr, cfg.OTelInterval); err != nil {
			return fail("cannot set up OpenTelemetry", err)
		}
		defer otel.shutdown(log)
		opts = append(opts, core.WithObserver(otel.observer))
	}
	limiter, err := core.NewLimiter(backend.Store, opts...)
	if err != nil {
		return fail("cannot create the limiter", err)
	}
	defer limiter.Close()
	rules, err := cfg.Rules()
	if err != nil {
		return fail("cannot build the rules", err)
	}
	srv, err := build(limiter, rules, metrics)
	if err != nil {
		return fail("cannot build the server", err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fail("cannot listen", err)
	}

	base := "http://" + ln.Addr().String()
	log.Info(name+" example listening", "url", base)
	log.LogAttrs(ctx, slog.LevelInfo, "store: "+backend.Kind, backend.Attrs...)
	def, strict := cfg.Limits()
	log.Info("limits",
		DefaultRule, def.String(), StrictRule, strict.String()+" on "+StrictPath,
		"key", cfg.KeyMode, "fail", cfg.Fail.String(), "timeout", cfg.Timeout)
	if cfg.Metrics {
		log.Info("Prometheus metrics", "url", base+MetricsPath)
	}
	if cfg.OTel {
		log.Info("OpenTelemetry metrics: a JSON line here at each export, and when stopping", "every", cfg.OTelInterval)
	}
	log.Info(fmt.Sprintf("try it: call %d in quick succession is answered 429", min(cfg.Limit, cfg.StrictLimit)+1),
		"cmd", TryCommand(cfg, base))
	if backend.Embedded == nil {
		if err := backend.Ping(ctx, 2*time.Second); err != nil {
			log.Warn("Redis does not answer yet: requests are decided by the fail policy until it does",
				"fail", cfg.Fail.String(), "err", err)
		}
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fail("the server stopped", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "cause", context.Cause(ctx))
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	code := 0
	if err := srv.Shutdown(sctx); err != nil {
		log.Error("requests still in flight were cut off", "err", err)
		code = 1
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "err", err)
		code = 1
	}
	limiter.Close()
	otel.shutdown(log)
	backend.Close()
	log.Info("stopped")
	return code
}

// NewLogger returns the apps' logger: text lines on w, with the time of day
// only.
func NewLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				a.Value = slog.StringValue(a.Value.Time().Format("15:04:05.000"))
			}
			return a
		},
	}))
}

// TryCommand returns a curl command line that shows the limits at work on
// the app at base: in jwt mode with a token signed by the configured
// secret, valid for an hour.
func TryCommand(c Config, base string) string {
	header := ""
	switch c.KeyMode {
	case KeyAPIKey:
		header = "-H 'X-API-Key: my-key' "
	case KeyJWT:
		token := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": "alice",
			"exp": time.Now().Add(time.Hour).Unix(),
		})
		if s, err := token.SignedString([]byte(c.JWTSecret)); err == nil {
			header = "-H 'Authorization: Bearer " + s + "' "
		}
	}
	return "curl -i " + header + base + StrictPath
}
