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
	"slices"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/core"
	base "github.com/ratekit/ratekit/examples/internal/serve"
	"github.com/ratekit/ratekit/leasestore"
)

// Server serves an app's routes on a listener until Shutdown: see
// [base.Server].
type Server = base.Server

// Build returns an app's server: its framework's router with the rules
// installed through its adapter, over limiter, and the routes of extra
// that are not nil, outside its limits.
type Build func(limiter *core.Limiter, rules Rules, extra Extra) (Server, error)

// Extra holds the net/http handlers of routes that an app serves only
// when configured to, never limited.
type Extra struct {
	// Metrics serves GET [MetricsPath] with -metrics.
	Metrics http.Handler
	// Page serves the live page under [PagePath], always: GET for the page
	// and its data, POST for its writes (with ADMIN_TOKEN). Mount it for
	// every method under the prefix, never limited.
	Page http.Handler
	// Admin serves GET [AdminQuotaPath] and POST [AdminResetPath] when
	// ADMIN_TOKEN is set; it answers 401 itself to requests without it,
	// and throttles wrong tokens.
	Admin http.Handler
}

// StoreTimeout is a store deadline for a store in the caller's own process
// on a busy machine: see [base.StoreTimeout].
const StoreTimeout = base.StoreTimeout

// ShutdownTimeout bounds how long a stopping app waits for requests in
// flight.
const ShutdownTimeout = 10 * time.Second

// Main runs the example app called name and exits: with status 0 after a
// graceful shutdown on SIGINT or SIGTERM, 2 for a bad flag or environment
// value, 1 when it cannot start.
func Main(name string, build Build) { MainWith(name, Defaults{}, build) }

// MainWith is [Main] with the defaults of d.
func MainWith(name string, d Defaults, build Build) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := RunWith(ctx, name, d, os.Args[1:], os.Getenv, os.Stderr, build)
	stop()
	os.Exit(code)
}

// HTTPServer returns an *http.Server for h with the timeouts a server
// facing the internet needs.
func HTTPServer(h http.Handler) *http.Server { return base.HTTPServer(h) }

// Run runs the example app called name with args and the environment of
// getenv, logging to stderr, until ctx ends, and returns the exit status:
// 0 after a graceful shutdown or for -h, 2 for a bad flag or environment
// value, 1 when the app cannot start or stops by itself.
func Run(ctx context.Context, name string, args []string, getenv func(string) string, stderr io.Writer, build Build) int {
	return RunWith(ctx, name, Defaults{}, args, getenv, stderr, build)
}

// RunWith is [Run] with the defaults of d.
func RunWith(ctx context.Context, name string, d Defaults, args []string, getenv func(string) string, stderr io.Writer, build Build) int {
	cfg, err := ParseWith(name, d, args, getenv, stderr)
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
		core.WithPrefix(cfg.Prefix),
		core.WithDenialLog(core.DenialLog{ShowIdentity: cfg.ShowIdentities}),
	}
	var extra Extra
	recorder, err := newRecorder(backend, cfg)
	if err != nil {
		return fail("cannot set up the live page", err)
	}
	defer recorder.Close()
	opts = append(opts, core.WithObserver(recorder))
	if cfg.Metrics {
		collector, handler, err := newMetrics()
		if err != nil {
			return fail("cannot set up the metrics", err)
		}
		opts = append(opts, core.WithObserver(collector))
		extra.Metrics = handler
	}
	var otel *otelTelemetry // -otel's, shut down after the Limiter
	if cfg.OTel {
		if otel, err = newOTel(stderr, cfg.OTelInterval); err != nil {
			return fail("cannot set up OpenTelemetry", err)
		}
		defer otel.shutdown(log)
		opts = append(opts, core.WithObserver(otel.observer))
	}
	var store core.Store = backend.Store
	if cfg.Lease {
		leasing, err := leasestore.New(backend.Store)
		if err != nil {
			return fail("cannot create the leasing store", err)
		}
		defer leasing.Close() // after the Limiter: deferred calls run last first
		store = leasing
	}
	limiter, err := core.NewLimiter(store, opts...)
	if err != nil {
		return fail("cannot create the limiter", err)
	}
	defer limiter.Close()
	rules, err := cfg.Rules()
	if err != nil {
		return fail("cannot build the rules", err)
	}
	if cfg.AdminToken != "" {
		if extra.Admin, err = adminHandler(limiter, rules, cfg.AdminToken); err != nil {
			return fail("cannot build the admin routes", err)
		}
	}
	if extra.Page, err = newPage(limiter, recorder, rules, cfg); err != nil {
		return fail("cannot build the live page", err)
	}
	srv, err := build(limiter, rules, extra)
	if err != nil {
		return fail("cannot build the server", err)
	}
	// SIGHUP is handled from before the port opens: one sent as soon as
	// the app answers must reload, not end it (its default action)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fail("cannot listen", err)
	}

	base := "http://" + ln.Addr().String()
	log.Info(name+" example listening", "url", base)
	log.LogAttrs(ctx, slog.LevelInfo, "store: "+backend.Kind, backend.Attrs...)
	logRules(log, cfg, rules)
	if cfg.AdminToken != "" {
		log.Info("admin routes", "quota", base+AdminQuotaPath+"?rule=default&identity=ip:127.0.0.1", "reset", "POST "+base+AdminResetPath)
	}
	log.Info("live page", "url", base+PagePath, "identities", map[bool]string{true: "shown", false: "hashed"}[cfg.ShowIdentities])
	if cfg.Metrics {
		log.Info("Prometheus metrics", "url", base+MetricsPath)
	}
	if cfg.OTel {
		log.Info("OpenTelemetry metrics: a JSON line here at each export, and when stopping", "every", cfg.OTelInterval)
	}
	if d.Try != nil {
		msg, cmd := d.Try(cfg, base)
		log.Info("try it: "+msg, "cmd", cmd)
	} else {
		log.Info(fmt.Sprintf("try it: call %d in quick succession is answered 429", min(cfg.Limit, cfg.StrictLimit)+1),
			"cmd", TryCommand(cfg, base))
	}
	if backend.Embedded == nil {
		if err := backend.Ping(ctx, 2*time.Second); err != nil {
			log.Warn("Redis does not answer yet: requests are decided by the fail policy until it does",
				"fail", cfg.Fail.String(), "err", err)
		}
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if err := serve(ctx, served, hup, log, cfg, rules); err != nil {
		return fail("the server stopped", err)
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

// serve waits until ctx ends, and returns nil then, or until the server
// stops by itself, and returns its error; on each SIGHUP (from hup)
// meanwhile, it rereads the rules file (with -rules) and swaps the rules
// in, or logs why it cannot and keeps the rules it has.
func serve(ctx context.Context, served <-chan error, hup <-chan os.Signal, log *slog.Logger, cfg Config, rules Rules) error {
	for {
		select {
		case err := <-served:
			return err
		case <-ctx.Done():
			return nil
		case <-hup:
			if cfg.RulesFile == "" {
				log.Warn("SIGHUP: no rules file to reread (-rules); the rules stay")
				continue
			}
			if err := cfg.Reload(rules); err != nil {
				log.Error("SIGHUP: the rules file is not valid; the rules stay", "err", err)
				continue
			}
			log.Info("SIGHUP: rules reloaded", "file", cfg.RulesFile)
			logRules(log, cfg, rules)
		}
	}
}

// logRules logs the rules an app enforces.
func logRules(log *slog.Logger, cfg Config, rules Rules) {
	attrs := []any{}
	for _, r := range append(slices.Clone(rules.Default.Rules()), rules.Strict.Rules()...) {
		attrs = append(attrs, r.Name, r.Limit.String())
	}
	attrs = append(attrs, LoginRule, rules.Login[0].Limit.String()+" failures on POST "+LoginPath,
		"key", cfg.KeyMode, "prefix", cfg.Prefix, "fail", cfg.Fail.String(), "timeout", cfg.Timeout)
	log.Info("limits", attrs...)
}
