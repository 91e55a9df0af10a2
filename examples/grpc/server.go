package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/promlimit"
)

// server is the running app: the gRPC server and, with -metrics, the HTTP
// server of /metrics, over the Limiter and its Redis.
type server struct {
	backend   *app.Backend
	limiter   *core.Limiter
	rules     *core.RuleSet // the default and strict rules, as one interceptor's
	grpc      *grpc.Server
	ln        net.Listener
	metrics   *http.Server // nil without -metrics
	metricsLn net.Listener
}

// start opens the store, makes the Limiter, the gRPC server and the metrics
// server, and listens: on cfg.Addr and, with -metrics, on metricsAddr.
func start(cfg app.Config, metricsAddr string, log *slog.Logger) (s *server, err error) {
	s = &server{}
	defer func() {
		if err != nil {
			for _, ln := range []net.Listener{s.ln, s.metricsLn} {
				if ln != nil {
					ln.Close()
				}
			}
			s.close()
		}
	}()
	if s.backend, err = app.OpenBackend(cfg); err != nil {
		return nil, fmt.Errorf("open the store: %w", err)
	}
	opts := []core.Option{core.WithFailurePolicy(cfg.Fail), core.WithTimeout(cfg.Timeout), core.WithLogger(log), core.WithPrefix(cfg.Prefix)}
	var reg *prometheus.Registry
	if cfg.Metrics {
		collector := promlimit.MustNew()
		reg = prometheus.NewRegistry()
		reg.MustRegister(collector, collectors.NewGoCollector())
		opts = append(opts, core.WithObserver(collector))
	}
	if s.limiter, err = core.NewLimiter(s.backend.Store, opts...); err != nil {
		return nil, err
	}
	def, strict, err := cfg.RateRules()
	if err != nil {
		return nil, err
	}
	if s.rules, err = core.NewRuleSet(interceptorRules(def, strict)); err != nil {
		return nil, err
	}
	if s.grpc, err = newGRPCServer(s.limiter, s.rules); err != nil {
		return nil, err
	}
	if s.ln, err = net.Listen("tcp", cfg.Addr); err != nil {
		return nil, err
	}
	if reg != nil {
		mux := http.NewServeMux()
		mux.Handle("GET "+app.MetricsPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		s.metrics = app.HTTPServer(mux)
		if s.metricsLn, err = net.Listen("tcp", metricsAddr); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return s, nil
}

// newGRPCServer returns the gRPC server: the Greeter under the default rule,
// SayHelloStrict also under the strict one, in one interceptor whose rules
// are decided all or nothing; the health service and server reflection,
// never limited.
func newGRPCServer(limiter *core.Limiter, rules *core.RuleSet) (*grpc.Server, error) {
	skipReflection := grpclimit.WithSkip(func(_ context.Context, fullMethod string) bool {
		return strings.HasPrefix(fullMethod, "/grpc.reflection.")
	})
	unary, err := grpclimit.UnaryServerInterceptor(limiter, nil, grpclimit.WithRuleSet(rules), skipReflection)
	if err != nil {
		return nil, err
	}
	stream, err := grpclimit.StreamServerInterceptor(limiter, nil, grpclimit.WithRuleSet(rules), skipReflection)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
	srv.RegisterService(&greeterDesc, struct{}{})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	reflection.Register(srv)
	return srv, nil
}

// interceptorRules returns the rules of the app's one interceptor: the
// default rules, and the strict ones, which skip every method but
// SayHelloStrict.
func interceptorRules(def, strict []core.Rule) []core.Rule {
	rules := slices.Clone(def)
	for _, r := range strict {
		r.Skip = grpclimit.ExceptMethods(strictMethod)
		rules = append(rules, r)
	}
	return rules
}

// reload rereads the rules file into the interceptor's rules, or logs why
// it cannot and keeps them.
func (s *server) reload(cfg app.Config, log *slog.Logger) {
	if cfg.RulesFile == "" {
		log.Warn("SIGHUP: no rules file to reread (-rules); the rules stay")
		return
	}
	def, strict, err := cfg.RateRules()
	if err == nil {
		err = s.rules.Replace(interceptorRules(def, strict))
	}
	if err != nil {
		log.Error("SIGHUP: the rules file is not valid; the rules stay", "err", err)
		return
	}
	log.Info("SIGHUP: rules reloaded", "file", cfg.RulesFile)
}

// serve logs how to use the app, serves until ctx ends, then stops
// gracefully and returns the exit status.
func (s *server) serve(ctx context.Context, cfg app.Config, log *slog.Logger) int {
	addr := s.ln.Addr().String()
	log.Info(name+" example listening", "addr", addr)
	log.LogAttrs(ctx, slog.LevelInfo, "store: "+s.backend.Kind, s.backend.Attrs...)
	var limits []any
	for _, r := range s.rules.Rules() {
		limits = append(limits, r.Name, r.Limit.String())
	}
	log.Info("limits", append(limits, "strict on", strictMethod, "key", cfg.KeyMode, "prefix", cfg.Prefix, "fail", cfg.Fail.String())...)
	served := make(chan error, 2)
	go func() { served <- s.grpc.Serve(s.ln) }()
	if s.metrics != nil {
		log.Info("Prometheus metrics", "url", "http://"+s.metricsLn.Addr().String()+app.MetricsPath)
		go func() { served <- s.metrics.Serve(s.metricsLn) }()
	}
	log.Info(fmt.Sprintf("try it: call %d in quick succession fails with ResourceExhausted", min(cfg.Limit, cfg.StrictLimit)+1),
		"cmd", tryCommand(cfg, addr))
	if s.backend.Embedded == nil {
		if err := s.backend.Ping(ctx, 2*time.Second); err != nil {
			log.Warn("Redis does not answer yet: calls are decided by the fail policy until it does", "fail", cfg.Fail.String(), "err", err)
		}
	}
	code := s.wait(ctx, served, cfg, log)
	if err := s.shutdown(); err != nil {
		log.Error("calls still in flight were cut off", "err", err)
		code = 1
	}
	s.close()
	log.Info("stopped")
	return code
}

// wait serves until ctx ends, and returns 0, or until a server stops by
// itself, and returns 1, rereading the rules file on each SIGHUP
// meanwhile.
func (s *server) wait(ctx context.Context, served <-chan error, cfg app.Config, log *slog.Logger) int {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case err := <-served:
			log.Error("a server stopped", "err", err)
			return 1
		case <-ctx.Done():
			log.Info("shutting down", "cause", context.Cause(ctx))
			return 0
		case <-hup:
			s.reload(cfg, log)
		}
	}
}

// shutdown stops both servers, letting calls in flight finish within
// app.ShutdownTimeout.
func (s *server) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), app.ShutdownTimeout)
	defer cancel()
	var errs []error
	if s.metrics != nil {
		errs = append(errs, s.metrics.Shutdown(ctx))
	}
	stopped := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-ctx.Done():
		s.grpc.Stop()
		<-stopped
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// close closes the Limiter and the store, of a server that start may
// have left half made.
func (s *server) close() {
	if s.limiter != nil {
		s.limiter.Close()
	}
	if s.backend != nil {
		s.backend.Close()
	}
}

// tryCommand returns a grpcurl command line that shows the limits at work
// on the app at addr: in jwt mode with a token signed by the configured
// secret, valid for an hour.
func tryCommand(cfg app.Config, addr string) string {
	header := ""
	switch cfg.KeyMode {
	case app.KeyAPIKey:
		header = "-H 'x-api-key: my-key' "
	case app.KeyJWT:
		claims := jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
		if token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(cfg.JWTSecret)); err == nil {
			header = "-H 'authorization: Bearer " + token + "' "
		}
	}
	return "grpcurl -plaintext " + header + addr + " " + greeterService + "/SayHelloStrict"
}
