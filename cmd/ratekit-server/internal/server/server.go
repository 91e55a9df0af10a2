// Package server wires ratekit-server together: the Redis stores, the two
// Limiters, the Service, the configuration watcher, statistics, and the
// listeners of every front door (gRPC, HTTP, debug, Prometheus).
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/redisconn"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/runtime"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/service"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/stats"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/tracing"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/xds"
	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/livepage"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/promlimit"
)

// Server is one ratekit-server.
type Server struct {
	set     settings.Settings
	log     *slog.Logger
	stores  *redisconn.Stores
	compatL *core.Limiter
	nativeL *core.Limiter
	adminL  *core.Limiter // wrong admin tokens
	// the live page's observers of compatL and nativeL, in that order
	recorders []*livepage.Recorder
	svc       *service.Service
	stats     *stats.Stats
	health    *healthState
	watcher   *runtime.Watcher
	xds       *xds.Client
	// xdsVersion is the version_info of the xDS configuration in use
	xdsVersion atomic.Pointer[string]
	tracer     *tracing.Tracer
	flusher    *stats.Flusher

	grpc       *grpc.Server
	grpcLis    net.Listener
	https      []*http.Server
	listeners  []net.Listener
	loaded     chan struct{}
	loadedOnce sync.Once
	wg         sync.WaitGroup
	errs       chan error
}

// New is NewContext with a context that never ends.
func New(set settings.Settings, log *slog.Logger) (*Server, error) {
	return NewContext(context.Background(), set, log)
}

// NewContext builds a server from its settings: it waits for Redis as
// REDIS_STARTUP_* say (unless RATEKIT_START_WITHOUT_REDIS), then opens the
// listeners and loads the configuration. It returns an error when Redis
// is not up in time, when ctx ends while it waits, when a port is taken
// or, unless FORCE_START_WITHOUT_INITIAL_CONFIG, when the files do not
// load.
func NewContext(ctx context.Context, set settings.Settings, log *slog.Logger) (_ *Server, err error) {
	s := &Server{set: set, log: log, loaded: make(chan struct{}), errs: make(chan error, 8)}
	var statsOpts []stats.Option
	if set.UsePrometheus && set.PrometheusResponseTimeMS && set.PrometheusMapperYAML == "" {
		statsOpts = append(statsOpts, stats.ResponseTimeInMilliseconds())
	}
	s.stats = stats.New(statsOpts...)
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.health = newHealth(set.HealthyWithConfig)
	if s.stores, err = redisconn.Open(set); err != nil {
		return nil, err
	}
	s.stores.OnReadOnly(s.stats.RedisReadOnly.Inc)
	if !set.StartWithoutRedis {
		if err := s.stores.AwaitUp(ctx, set, log); err != nil {
			return nil, err
		}
	}
	reg := prometheus.NewRegistry()
	if err := s.limiters(reg); err != nil {
		return nil, err
	}
	s.svc = service.New(s.compatL, s.nativeL, s.stats, service.Options{
		GlobalShadow: set.GlobalShadow, GlobalQuota: set.GlobalQuota,
		Headers: set.HeadersEnabled, LimitHeader: set.LimitHeader, RemainingHeader: set.RemainingHeader, ResetHeader: set.ResetHeader,
		DynamicMetadata: set.DynamicMetadata, RuleMetadata: set.RuleMetadata, Stop: set.Stop, NearLimitRatio: set.NearLimitRatio,
		LocalCache: set.LocalCacheBytes > 0, Logger: log,
		Watch:        [2]core.IdentityObserver{s.recorders[0], s.recorders[1]},
		CallerLimits: callerLimits[set.CallerLimits], CallerMaxUnit: set.CallerLimitMaxUnit,
	})
	if err := s.configure(set, log); err != nil {
		return nil, err
	}
	if err := s.listen(reg); err != nil {
		return nil, err
	}
	if !set.DisableStats && !set.UsePrometheus {
		addr := ""
		if set.UseStatsd {
			addr = net.JoinHostPort(set.StatsdHost, strconv.Itoa(set.StatsdPort))
		}
		s.flusher = stats.NewFlusher(s.stats, addr, set.StatsFlushInterval, log)
	}
	return s, nil
}

// configure loads the configuration from its source, the files (watched)
// or an xDS server, and keeps it current; a first configuration refused
// fails the start unless FORCE_START_WITHOUT_INITIAL_CONFIG.
func (s *Server) configure(set settings.Settings, log *slog.Logger) error {
	var first error
	use := func(c *config.Config, warns []config.Warning, err error) {
		for _, w := range warns {
			log.Warn("configuration", "warning", w.Error())
		}
		if err != nil {
			s.stats.ConfigLoadError.Inc()
			log.Error("configuration refused; the last good one stays", "error", err.Error())
			s.loadedOnce.Do(func() { first = err; close(s.loaded) })
			return
		}
		s.stats.ConfigLoadSuccess.Inc()
		s.svc.SetConfig(c)
		s.health.setConfig(!c.Empty())
		log.Info("configuration loaded", "files", len(c.Files()), "rules", c.Rules())
		s.loadedOnce.Do(func() { close(s.loaded) })
	}
	opts := config.Options{DefaultAlgorithm: set.Algorithm, MergeDomains: set.MergeDomains}
	if set.ConfigType == "grpc_xds_sotw" {
		if err := s.subscribe(opts, use); err != nil {
			return err
		}
	} else {
		src := runtime.Source{Root: set.RuntimeRoot, Subdirectory: set.RuntimeSubdirectory, AppDirectory: set.RuntimeAppDirectory, IgnoreDotFiles: set.RuntimeIgnoreDot}
		var err error
		if s.watcher, err = runtime.Watch(src, opts, use); err != nil {
			return err
		}
	}
	if !set.ForceStart && first != nil {
		return fmt.Errorf("configuration: %w (FORCE_START_WITHOUT_INITIAL_CONFIG=true starts anyway)", first)
	}
	return nil
}

var callerLimits = map[settings.CallerLimits]service.CallerLimits{
	settings.CallerLimitsAccept: service.AcceptCallerLimits,
	settings.CallerLimitsIgnore: service.IgnoreCallerLimits,
	settings.CallerLimitsRefuse: service.RefuseCallerLimits,
}

// limiters builds the Limiter over each store, with the library's
// deadline, breaker and failure policy, and ratekit's metrics on reg.
func (s *Server) limiters(reg *prometheus.Registry) error {
	set := s.set
	common := s.commonOptions()
	// envoy counts every hit, denied or not: the compatible Limiter asks
	// Redis every time, unless LOCAL_CACHE_SIZE_IN_BYTES asks to remember
	// over-limit keys, as envoy's local cache does
	denied := set.LocalCacheBytes / 128
	if set.LocalCacheBytes > 0 {
		denied = max(denied, 1)
	}
	for _, l := range []struct {
		name  string
		store core.Store
		dst   **core.Limiter
		opts  []core.Option
	}{
		{"compatible", s.stores.Compat, &s.compatL, []core.Option{core.WithDeniedCache(denied)}},
		{"ratekit", s.stores.Native, &s.nativeL, nil},
	} {
		col, err := promlimit.New(promlimit.WithConstLabels(prometheus.Labels{"limiter": l.name}))
		if err != nil {
			return err
		}
		if set.UsePrometheus {
			if err := reg.Register(col); err != nil {
				return err
			}
		}
		rec, err := s.recorder(l.name)
		if err != nil {
			return err
		}
		s.recorders = append(s.recorders, rec)
		// the metrics through service.Observer, whose rule names stay
		// bounded; the live page's Recorder is told the store's health
		// here, and the decisions by the Service, by configured rule and
		// with their descriptors (service.Options.Watch)
		opts := append(append(append([]core.Option(nil), common...), l.opts...),
			core.WithObserver(service.Observer(col)), core.WithObserver(storeOnly{rec}))
		lim, err := core.NewLimiter(l.store, opts...)
		if err != nil {
			return fmt.Errorf("%s limiter: %w", l.name, err)
		}
		*l.dst = lim
	}
	if set.UsePrometheus {
		reg.MustRegister(s.promCollector(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return nil
}

// commonOptions returns the options both Limiters share: the settings'
// prefix, deadline, failure policy, replicas and breaker, the logger, and
// the health check's view of the breaker.
func (s *Server) commonOptions() []core.Option {
	set := s.set
	return []core.Option{
		core.WithPrefix(set.CacheKeyPrefix),
		core.WithTimeout(set.Timeout),
		core.WithFailurePolicy(set.Failure),
		core.WithReplicas(set.Replicas),
		core.WithBreaker(core.BreakerConfig{Failures: set.BreakerFailures, Backoff: set.BreakerBackoff, MaxBackoff: set.BreakerMaxBackoff}),
		core.WithLogger(s.log),
		core.OnBreakerChange(func(_, to core.BreakerState) {
			if set.RedisHealthCheck {
				s.health.setRedis(to == core.BreakerClosed)
			}
		}),
	}
}

// recorder returns the live page's Recorder of the named Limiter, which
// publishes its offenders under the prefix and name to the fleet's view
// unless RATEKIT_LIVE_PAGE_FLEET=false.
func (s *Server) recorder(name string) (*livepage.Recorder, error) {
	var opts livepage.RecorderOptions
	if s.set.LivePageFleet {
		fleet, err := livepage.NewRedisFleet(s.stores.Client, s.set.CacheKeyPrefix+"ratekit-server:"+name+":")
		if err != nil {
			return nil, fmt.Errorf("the live page's fleet (RATEKIT_LIVE_PAGE_FLEET=false goes without): %w", err)
		}
		opts.Fleet = fleet
	}
	return livepage.NewRecorder(opts)
}

// storeOnly passes a Limiter's store calls and breaker changes to the
// live page's Recorder, not its decisions: the Service tells those.
type storeOnly struct{ rec *livepage.Recorder }

func (storeOnly) Decided(context.Context, core.DecisionEvent) {}
func (o storeOnly) StoreCalled(d time.Duration, err error)    { o.rec.StoreCalled(d, err) }
func (o storeOnly) BreakerChanged(from, to core.BreakerState) { o.rec.BreakerChanged(from, to) }

// configTables returns the live page's table of the domains loaded and
// where each came from: the files and lines of their domain keys, or the
// xDS resource and the configuration's version.
func (s *Server) configTables() []livepage.Table {
	t := livepage.Table{Title: "Domains loaded", Columns: []string{"domain", "rules", "source"}, Rows: [][]string{}}
	version := ""
	if v := s.xdsVersion.Load(); v != nil {
		version = *v
	}
	for _, d := range s.svc.Config().Domains() {
		var src []string
		for _, f := range d.Sources {
			if name, ok := strings.CutPrefix(f.File, "xds:"); ok && s.xds != nil {
				src = append(src, fmt.Sprintf("xDS RateLimitConfig %s, version %s", name, version))
				continue
			}
			src = append(src, fmt.Sprintf("%s:%d", f.File, f.Line))
		}
		t.Rows = append(t.Rows, []string{d.Name, strconv.Itoa(d.Rules), strings.Join(src, "; ")})
	}
	return []livepage.Table{t}
}

// listen opens the listener of every front door, in the order Addrs
// reports them (gRPC's apart): HTTP, debug and, when on, Prometheus's,
// which serves reg.
func (s *Server) listen(reg *prometheus.Registry) error {
	set := s.set
	if err := s.listenGRPC(); err != nil {
		return err
	}
	mux, err := s.httpMux()
	if err != nil {
		return err
	}
	if err := s.serveHTTP("HTTP", net.JoinHostPort(set.Host, strconv.Itoa(set.Port)), mux, set.WriteTimeout); err != nil {
		return err
	}
	dmux, err := s.debugMux()
	if err != nil {
		return err
	}
	if err := s.serveHTTP("debug", net.JoinHostPort(set.DebugHost, strconv.Itoa(set.DebugPort)), dmux, set.WriteTimeout); err != nil {
		return err
	}
	if set.UsePrometheus {
		pmux := http.NewServeMux()
		pmux.Handle(set.PrometheusPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if err := s.serveHTTP("Prometheus", set.PrometheusAddr, pmux, set.WriteTimeout); err != nil {
			return err
		}
	}
	return nil
}

// listenGRPC builds the gRPC server, with the rate limit and health
// services, and opens its listener: GRPC_UDS's socket, or GRPC_HOST and
// GRPC_PORT.
func (s *Server) listenGRPC() error {
	set := s.set
	opts := []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionAge: set.GRPCMaxConnectionAge, MaxConnectionAgeGrace: set.GRPCMaxConnectionAgeGrace,
		}),
		// calls run on long-lived workers, whose stacks have grown
		// already, instead of a fresh goroutine each (whose stack grows
		// by copies on every call): enough for the calls in flight of a
		// busy server; past them gRPC starts goroutines as usual
		grpc.NumStreamWorkers(streamWorkers),
		// a request of envoy's is a few descriptors of short values: a
		// larger one is refused before it is read whole
		grpc.MaxRecvMsgSize(set.MaxRequestBytes),
		grpc.MaxConcurrentStreams(maxStreams),
	}
	creds, err := grpcTLS(set, s.log)
	if err != nil {
		return err
	}
	if creds != nil {
		opts = append(opts, creds)
	}
	if set.Tracing.Enabled {
		if s.tracer, err = tracing.Start(context.Background(), set.Tracing); err != nil {
			return err
		}
		opts = append(opts, grpc.UnaryInterceptor(s.tracer.Unary()))
	}
	s.grpc = grpc.NewServer(opts...)
	rlspb.RegisterRateLimitServiceServer(s.grpc, &rlsServer{svc: s.svc, stats: s.stats, log: s.log})
	healthpb.RegisterHealthServer(s.grpc, s.health.grpc)
	if set.GRPCUDS != "" {
		_ = os.Remove(set.GRPCUDS)
		s.grpcLis, err = net.Listen("unix", set.GRPCUDS)
	} else {
		s.grpcLis, err = net.Listen("tcp", net.JoinHostPort(set.GRPCHost, strconv.Itoa(set.GRPCPort)))
	}
	if err != nil {
		return fmt.Errorf("gRPC listener: %w", err)
	}
	return nil
}

// httpMux returns the handlers of the HTTP port: health, /json, /check
// and, with an admin token, the admin endpoints.
func (s *Server) httpMux() (*http.ServeMux, error) {
	mux := http.NewServeMux()
	mux.Handle("/healthcheck", s.health)
	mux.Handle("/json", jsonHandler(s.svc, int64(s.set.MaxRequestBytes), s.log))
	ipKey, err := newIPKey(s.set.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("RATEKIT_TRUSTED_PROXIES: %w", err)
	}
	mux.Handle("/check", checkHandler(s.svc, ipKey, s.log))
	if s.set.AdminToken != "" {
		admin, err := s.adminThrottle(adminHandler(s.svc, s.set.AdminToken, s.log))
		if err != nil {
			return nil, err
		}
		mux.Handle("/admin/quota", admin)
		mux.Handle("/admin/reset", admin)
	}
	return mux, nil
}

// adminGuessRule names the limit on wrong admin tokens.
const adminGuessRule = "admin-guesses"

// adminThrottle limits the wrong admin tokens of each client address (the
// socket's peer, whatever it forwards) to RATEKIT_ADMIN_GUESSES a minute,
// with ratekit's own middleware over a store in this process. A request
// with a token reserves a unit before the token is compared, so that
// concurrent guesses cannot overrun the limit; only the 401s keep it. An
// address past the limit gets 429 whatever token it sends, the right one
// too: otherwise it could go on guessing. Other addresses are unaffected.
func (s *Server) adminThrottle(h http.Handler) (http.Handler, error) {
	store, err := memorystore.New()
	if err != nil {
		return nil, err
	}
	if s.adminL, err = core.NewLimiter(store); err != nil {
		return nil, err
	}
	peer, err := keyfuncs.IP()
	if err != nil {
		return nil, err
	}
	mw, err := nethttp.New(s.adminL, []core.Rule{{Name: adminGuessRule, Limit: core.PerMinute(s.set.AdminGuesses), Key: peer}},
		nethttp.WithCountOnly(adminGuessRule, func(status int) bool { return status == http.StatusUnauthorized }),
		nethttp.WithSkip(func(r *http.Request) bool { return len(r.Header.Values("Authorization")) == 0 }))
	if err != nil {
		return nil, err
	}
	return mw(h), nil
}

// debugMux returns the handlers of the debug port, as envoy's: the
// configuration, pprof (unless RATEKIT_PPROF=false), and at / the list of
// them; and ratekit's live page of both Limiters at /ratekit/ (package
// livepage), read-only: the service's rules are descriptors, and its
// peeks and resets are /admin/'s.
func (s *Server) debugMux() (*http.ServeMux, error) {
	endpoints := map[string]string{
		"/ratekit/": "the live page: domains loaded and their sources, rules, decisions per second, top offenders, the store's health",
		"/rlconfig": "print out the currently loaded configuration for debugging",
	}
	dmux := http.NewServeMux()
	dmux.HandleFunc("/rlconfig", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, s.svc.Config().Dump())
	})
	if len(s.recorders) == 2 {
		page, err := livepage.New(livepage.Options{ShowIdentities: s.set.LivePageIdentities, Tables: s.configTables},
			livepage.Source{Name: "compatible", Limiter: s.compatL, Recorder: s.recorders[0]},
			livepage.Source{Name: "ratekit", Limiter: s.nativeL, Recorder: s.recorders[1]})
		if err != nil {
			return nil, err
		}
		dmux.Handle("/ratekit/", page)
	}
	if s.set.Pprof {
		endpoints["/debug/pprof/"] = "root of various pprof endpoints. hit for help."
		endpoints["/debug/pprof/profile"] = "CPU profiling endpoint"
		endpoints["/debug/pprof/trace"] = "trace endpoint"
		limit := maxSeconds(s.set.PprofMaxSeconds)
		dmux.Handle("/debug/pprof/", limit(pprof.Index))
		dmux.Handle("/debug/pprof/profile", limit(pprof.Profile))
		dmux.Handle("/debug/pprof/trace", limit(pprof.Trace))
	}
	dmux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		keys := make([]string, 0, len(endpoints))
		for k := range endpoints {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "%s: %s\n", k, endpoints[k])
		}
	})
	return dmux, nil
}

// maxSeconds refuses a pprof request whose seconds= is longer than max:
// pprof lengthens its answer's write deadline by seconds= itself, so that
// without this /debug/pprof/trace?seconds=3600 would stream for an hour.
func maxSeconds(max int) func(http.HandlerFunc) http.Handler {
	return func(h http.HandlerFunc) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := r.URL.Query().Get("seconds"); v != "" {
				sec, err := strconv.ParseFloat(v, 64)
				if err != nil || !(sec <= float64(max)) {
					http.Error(w, fmt.Sprintf("seconds=%.20q: at most %d (RATEKIT_PPROF_MAX_SECONDS)", v, max), http.StatusBadRequest)
					return
				}
			}
			h(w, r)
		})
	}
}

// serveHTTP opens a listener for h now, and serves it from Serve on, with
// the settings' read and idle timeouts and write (from the end of a
// request's headers to the end of its answer): a connection idle, or
// sending its request or taking its answer, longer than these is closed.
func (s *Server) serveHTTP(what, addr string, h http.Handler, write time.Duration) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s listener: %w", what, err)
	}
	s.listeners = append(s.listeners, lis)
	s.https = append(s.https, &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(10*time.Second, s.set.ReadTimeout),
		ReadTimeout:       s.set.ReadTimeout,
		WriteTimeout:      write,
		IdleTimeout:       s.set.IdleTimeout,
	})
	return nil
}

// streamWorkers is how many goroutines serve gRPC calls: an idle one
// holds its stack, tens of KiB.
const streamWorkers = 256

// maxStreams bounds the calls in flight on one gRPC connection (each may
// ask Redis for up to service.MaxDescriptors descriptors at once). Envoy
// keeps one connection per worker thread, each with a few calls in
// flight; a client past the bound waits for a call to end.
const maxStreams = 1024

// Addrs returns the addresses served: HTTP, gRPC, debug and, when on,
// Prometheus.
func (s *Server) Addrs() []string {
	out := []string{s.listeners[0].Addr().String(), s.grpcLis.Addr().String()}
	for _, l := range s.listeners[1:] {
		out = append(out, l.Addr().String())
	}
	return out
}

// Serve serves every listener until Shutdown, and returns the first error
// of a listener that failed.
func (s *Server) Serve() error {
	s.log.Info("serving", "http", s.listeners[0].Addr().String(), "grpc", s.grpcLis.Addr().String())
	s.wg.Add(1 + len(s.https))
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(s.grpcLis); err != nil {
			s.errs <- fmt.Errorf("gRPC: %w", err)
		}
	}()
	for i, h := range s.https {
		go func() {
			defer s.wg.Done()
			if err := h.Serve(s.listeners[i]); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.errs <- err
			}
		}()
	}
	s.wg.Wait()
	select {
	case err := <-s.errs:
		return err
	default:
		return nil
	}
}

// Shutdown fails the health checks, stops accepting calls, lets those in
// flight finish within ctx, and closes everything.
func (s *Server) Shutdown(ctx context.Context) {
	s.health.setDraining()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
	}
	for _, h := range s.https {
		_ = h.Shutdown(ctx)
	}
	s.wg.Wait()
	s.Close()
}

// Close releases what New built, calls in flight cut off; Shutdown
// calls it after letting them finish.
func (s *Server) Close() {
	if s.grpc != nil {
		s.grpc.Stop()
	}
	for _, h := range s.https {
		_ = h.Close()
	}
	if s.watcher != nil {
		_ = s.watcher.Close()
	}
	if s.xds != nil {
		_ = s.xds.Close()
	}
	if s.tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.tracer.Shutdown(ctx)
		cancel()
	}
	if s.flusher != nil {
		_ = s.flusher.Close()
	}
	if s.compatL != nil {
		_ = s.compatL.Close()
	}
	if s.nativeL != nil {
		_ = s.nativeL.Close()
	}
	if s.adminL != nil {
		_ = s.adminL.Close()
	}
	for _, r := range s.recorders {
		_ = r.Close()
	}
	if s.stores != nil {
		_ = s.stores.Close()
	}
	for _, l := range s.listeners {
		_ = l.Close()
	}
	if s.grpcLis != nil {
		_ = s.grpcLis.Close()
	}
}

// healthState is envoy's health: healthy while every component is, the
// components being Redis (only with REDIS_HEALTH_CHECK_ACTIVE_CONNECTION),
// the configuration (only with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)
// and not shutting down.
type healthState struct {
	mu                   sync.Mutex
	needConfig           bool
	redis, config, drain bool
	grpc                 *health.Server
}

func newHealth(needConfig bool) *healthState {
	h := &healthState{needConfig: needConfig, redis: true, config: !needConfig, grpc: health.NewServer()}
	h.update()
	return h
}

func (h *healthState) ok() bool { return h.redis && h.config && !h.drain }

func (h *healthState) update() {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if h.ok() {
		st = healthpb.HealthCheckResponse_SERVING
	}
	h.grpc.SetServingStatus("ratelimit", st)
	h.grpc.SetServingStatus("", st)
}

func (h *healthState) set(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f()
	h.update()
}

func (h *healthState) setRedis(up bool) { h.set(func() { h.redis = up }) }

// setConfig records whether the configuration loaded has a domain, which
// matters under HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED only.
func (h *healthState) setConfig(loaded bool) {
	h.set(func() {
		if h.needConfig {
			h.config = loaded
		}
	})
}
func (h *healthState) setDraining() { h.set(func() { h.drain = true }) }

func (h *healthState) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	ok := h.ok()
	h.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	_, _ = w.Write([]byte("OK"))
}
