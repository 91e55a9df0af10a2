// Package settings reads the server's settings from the environment:
// envoyproxy/ratelimit's variables, with its names and defaults, and
// ratekit's own, prefixed RATEKIT_. A setting the server cannot honour is
// an error at start, never ignored; one that tunes a part of envoy that
// ratekit does not have (a pipeline window, an expiry jitter) is accepted
// and said to change nothing.
package settings

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/config"
	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
)

// Settings are the server's settings.
type Settings struct {
	Host      string
	Port      int
	DebugHost string
	DebugPort int
	GRPCHost  string
	GRPCPort  int
	GRPCUDS   string

	GRPCMaxConnectionAge      time.Duration
	GRPCMaxConnectionAgeGrace time.Duration

	// TLS on the gRPC port: the certificate and key files, read again
	// when they change; with a client CA, client certificates are
	// required and checked, and with a SAN, one of theirs must be it.
	GRPCServerTLS       bool
	GRPCServerTLSCert   string
	GRPCServerTLSKey    string
	GRPCClientTLSCACert string
	GRPCClientTLSSAN    string

	LogLevel  string
	LogFormat string

	// ConfigType is "file" or "grpc_xds_sotw".
	ConfigType          string
	XDS                 XDS
	Tracing             Tracing
	ForceStart          bool
	HealthyWithConfig   bool
	RuntimeRoot         string
	RuntimeSubdirectory string
	RuntimeAppDirectory string
	RuntimeIgnoreDot    bool
	RuntimeWatchRoot    bool
	MergeDomains        bool

	UseStatsd          bool
	StatsdHost         string
	StatsdPort         int
	StatsFlushInterval time.Duration
	DisableStats       bool
	UsePrometheus      bool
	PrometheusAddr     string
	PrometheusPath     string
	// PrometheusMapperYAML is a statsd_exporter mapping file.
	PrometheusMapperYAML string
	// PrometheusResponseTimeMS observes the response time in
	// milliseconds under envoy's default mapping.
	PrometheusResponseTimeMS bool

	LocalCacheBytes int
	NearLimitRatio  float32
	CacheKeyPrefix  string
	Stop            bool

	HeadersEnabled  bool
	LimitHeader     string
	RemainingHeader string
	ResetHeader     string

	RedisSocketType    string
	RedisType          string
	RedisURL           string
	RedisPoolSize      int
	RedisAuth          string
	RedisSentinelAuth  string
	RedisTLS           bool
	RedisTLSCert       string
	RedisTLSKey        string
	RedisTLSCACert     string
	RedisTLSSkipVerify bool
	RedisTimeout       time.Duration
	RedisHealthCheck   bool
	RedisStartup       Startup

	GlobalShadow    bool
	GlobalQuota     bool
	DynamicMetadata bool
	// RuleMetadata names the deciding rule in every answer's dynamic
	// metadata (RATEKIT_RULE_METADATA).
	RuleMetadata bool

	// ratekit's own
	Failure core.FailurePolicy
	// StartWithoutRedis serves at once when Redis does not answer at
	// start, instead of waiting as RedisStartup says.
	StartWithoutRedis bool
	Timeout           time.Duration
	Replicas          int
	Algorithm         config.Algorithm
	Batch             int
	AdminToken        string
	BreakerFailures   int
	BreakerBackoff    time.Duration
	BreakerMaxBackoff time.Duration
	// TrustedProxies are the proxies in front of the gateways, whose
	// addresses /check's ip_from= skips in a forwarded list.
	TrustedProxies []netip.Prefix

	// What callers may ask: the limits descriptors bring, and the size of
	// one request.
	CallerLimits       CallerLimits
	CallerLimitMaxUnit config.Unit
	MaxRequestBytes    int

	// the HTTP servers' bounds (HTTP, debug and Prometheus ports)
	ReadTimeout     time.Duration
	WriteTimeout    time.Duration
	IdleTimeout     time.Duration
	PprofMaxSeconds int
	Pprof           bool
	// AdminGuesses is how many wrong admin tokens one client address
	// may send a minute.
	AdminGuesses int
	// LivePageIdentities shows descriptors' values on the live page, not
	// hashes; LivePageFleet publishes this process's offenders to Redis
	// and shows the fleet's.
	LivePageIdentities bool
	LivePageFleet      bool
}

// CallerLimits is what the server does with a descriptor that brings its
// own limit (RATEKIT_CALLER_LIMITS).
type CallerLimits uint8

const (
	// CallerLimitsAccept counts the descriptor by its own limit, as envoy
	// does, up to RATEKIT_CALLER_LIMIT_MAX_UNIT.
	CallerLimitsAccept CallerLimits = iota
	// CallerLimitsIgnore counts it as if it brought none: by the rule of
	// the files it matches, if any.
	CallerLimitsIgnore
	// CallerLimitsRefuse refuses the request (InvalidArgument, 400).
	CallerLimitsRefuse
)

// Setting is one variable the server reads.
type Setting struct {
	Name    string
	Default string
	Doc     string
	set     func(s *Settings, v string) error
}

// Table lists every variable, envoy's first, in the order of the docs.
var Table = []Setting{
	{"HOST", "0.0.0.0", "address of the HTTP port (/healthcheck, /json)", str(func(s *Settings) *string { return &s.Host })},
	{"PORT", "8080", "HTTP port", integer(func(s *Settings) *int { return &s.Port })},
	{"GRPC_HOST", "0.0.0.0", "address of the gRPC port", str(func(s *Settings) *string { return &s.GRPCHost })},
	{"GRPC_PORT", "8081", "gRPC port (RateLimitService and health)", integer(func(s *Settings) *int { return &s.GRPCPort })},
	{"GRPC_UDS", "", "a unix socket path to serve gRPC on instead of GRPC_HOST:GRPC_PORT", str(func(s *Settings) *string { return &s.GRPCUDS })},
	{"GRPC_MAX_CONNECTION_AGE", "24h", "connections are closed (GoAway) after about this long", duration(func(s *Settings) *time.Duration { return &s.GRPCMaxConnectionAge })},
	{"GRPC_MAX_CONNECTION_AGE_GRACE", "1h", "then forcibly after this much more", duration(func(s *Settings) *time.Duration { return &s.GRPCMaxConnectionAgeGrace })},
	{"DEBUG_HOST", "127.0.0.1", "address of the debug port (/rlconfig, pprof): loopback, unlike envoy's 0.0.0.0, as its endpoints are unauthenticated", str(func(s *Settings) *string { return &s.DebugHost })},
	{"DEBUG_PORT", "6070", "debug port", integer(func(s *Settings) *int { return &s.DebugPort })},
	{"LOG_LEVEL", "WARN", "trace, debug, info, warn, error, fatal or panic", oneOf(func(s *Settings) *string { return &s.LogLevel }, "trace", "debug", "info", "warn", "warning", "error", "fatal", "panic")},
	{"LOG_FORMAT", "text", "text or json", str(func(s *Settings) *string { return &s.LogFormat })},
	{"GRPC_SERVER_USE_TLS", "false", "TLS on the gRPC port, with GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY", boolean(func(s *Settings) *bool { return &s.GRPCServerTLS })},
	{"GRPC_SERVER_TLS_CERT", "", "certificate chain file of the gRPC port, read again when it changes", str(func(s *Settings) *string { return &s.GRPCServerTLSCert })},
	{"GRPC_SERVER_TLS_KEY", "", "private key file of the gRPC port, read again when it changes", str(func(s *Settings) *string { return &s.GRPCServerTLSKey })},
	{"GRPC_CLIENT_TLS_CACERT", "", "CA file of client certificates: when set, every client must present a certificate it signed", str(func(s *Settings) *string { return &s.GRPCClientTLSCACert })},
	{"GRPC_CLIENT_TLS_SAN", "", "a DNS name the client certificate must hold (with GRPC_CLIENT_TLS_CACERT)", str(func(s *Settings) *string { return &s.GRPCClientTLSSAN })},
	{"GRPC_SERVER_TLS_CA_CERT", "", "accepted, changes nothing: Envoy Gateway sets it, envoy's service does not read it (client certificates are checked with GRPC_CLIENT_TLS_CACERT)", noEffect()},
	{"CONFIG_TYPE", "FILE", "FILE (files under RUNTIME_ROOT) or GRPC_XDS_SOTW (RateLimitConfig resources from an xDS server)", oneOf(func(s *Settings) *string { return &s.ConfigType }, "file", "grpc_xds_sotw")},
	{"FORCE_START_WITHOUT_INITIAL_CONFIG", "false", "start even when the files cannot be loaded (answers errors until they can)", boolean(func(s *Settings) *bool { return &s.ForceStart })},
	{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "false", "unhealthy until a configuration with a domain is loaded", boolean(func(s *Settings) *bool { return &s.HealthyWithConfig })},
	{"RUNTIME_ROOT", "/srv/runtime_data/current", "root of the configuration files", str(func(s *Settings) *string { return &s.RuntimeRoot })},
	{"RUNTIME_SUBDIRECTORY", "", "subdirectory of RUNTIME_ROOT", str(func(s *Settings) *string { return &s.RuntimeSubdirectory })},
	{"RUNTIME_APPDIRECTORY", "config", "directory of the files under it: every file there is loaded", str(func(s *Settings) *string { return &s.RuntimeAppDirectory })},
	{"RUNTIME_IGNOREDOTFILES", "false", "skip files and directories whose name starts with a dot", boolean(func(s *Settings) *bool { return &s.RuntimeIgnoreDot })},
	{"RUNTIME_WATCH_ROOT", "true", "watch RUNTIME_ROOT for a symlink swap (true) or the directory's files (false)", boolean(func(s *Settings) *bool { return &s.RuntimeWatchRoot })},
	{"MERGE_DOMAIN_CONFIG", "false", "let several files add to one domain", boolean(func(s *Settings) *bool { return &s.MergeDomains })},
	{"USE_STATSD", "true", "send statistics to statsd over TCP", boolean(func(s *Settings) *bool { return &s.UseStatsd })},
	{"STATSD_HOST", "localhost", "statsd host", str(func(s *Settings) *string { return &s.StatsdHost })},
	{"STATSD_PORT", "8125", "statsd port", integer(func(s *Settings) *int { return &s.StatsdPort })},
	{"STATS_FLUSH_INTERVAL", "10s", "how often statistics go to statsd (or the log)", duration(func(s *Settings) *time.Duration { return &s.StatsFlushInterval })},
	{"DISABLE_STATS", "false", "no statistics at all", boolean(func(s *Settings) *bool { return &s.DisableStats })},
	{"USE_PROMETHEUS", "false", "serve statistics to Prometheus (USE_STATSD must be false)", boolean(func(s *Settings) *bool { return &s.UsePrometheus })},
	{"PROMETHEUS_ADDR", ":9090", "address of the Prometheus listener", str(func(s *Settings) *string { return &s.PrometheusAddr })},
	{"PROMETHEUS_PATH", "/metrics", "path of the Prometheus endpoint", str(func(s *Settings) *string { return &s.PrometheusPath })},
	{"PROMETHEUS_MAPPER_YAML", "", "a statsd_exporter mapping file the statistics go through, as in envoy; empty: envoy's default mapping", str(func(s *Settings) *string { return &s.PrometheusMapperYAML })},
	{"USE_DOG_STATSD", "false", "refused when true", refusedTrue("DogStatsD")},
	{"EXTRA_TAGS", "", "refused when set", refused("extra statistics tags")},
	{"LOCAL_CACHE_SIZE_IN_BYTES", "0", "remember over-limit keys locally until their window ends (about 128 bytes a key); 0 turns it off", integer(func(s *Settings) *int { return &s.LocalCacheBytes })},
	{"NEAR_LIMIT_RATIO", "0.8", "share of a limit from which hits count as near_limit", ratio(func(s *Settings) *float32 { return &s.NearLimitRatio })},
	{"CACHE_KEY_PREFIX", "", "prefix of every Redis key", str(func(s *Settings) *string { return &s.CacheKeyPrefix })},
	{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false", "when a descriptor would go over, count only those that would (one atomic script)", boolean(func(s *Settings) *bool { return &s.Stop })},
	{"LIMIT_RESPONSE_HEADERS_ENABLED", "false", "add the closest descriptor's limit, remaining and reset as response headers", boolean(func(s *Settings) *bool { return &s.HeadersEnabled })},
	{"LIMIT_LIMIT_HEADER", "RateLimit-Limit", "name of the limit header", str(func(s *Settings) *string { return &s.LimitHeader })},
	{"LIMIT_REMAINING_HEADER", "RateLimit-Remaining", "name of the remaining header", str(func(s *Settings) *string { return &s.RemainingHeader })},
	{"LIMIT_RESET_HEADER", "RateLimit-Reset", "name of the reset header", str(func(s *Settings) *string { return &s.ResetHeader })},
	{"SHADOW_MODE", "false", "answer OK whatever the limits say (they are still counted)", boolean(func(s *Settings) *bool { return &s.GlobalShadow })},
	{"QUOTA_MODE", "false", "answer over-limit descriptors OK, as quota_mode does", boolean(func(s *Settings) *bool { return &s.GlobalQuota })},
	{"RESPONSE_DYNAMIC_METADATA", "false", "add envoy's dynamic metadata to answers", boolean(func(s *Settings) *bool { return &s.DynamicMetadata })},
	{"BACKEND_TYPE", "redis", "redis only (memcache is refused)", oneOf(nil, "redis", "")},
	{"REDIS_SOCKET_TYPE", "unix", "tcp or unix", oneOf(func(s *Settings) *string { return &s.RedisSocketType }, "tcp", "unix")},
	{"REDIS_TYPE", "SINGLE", "SINGLE, SENTINEL (REDIS_URL = master,host:port,...) or CLUSTER (host:port,...)", oneOf(func(s *Settings) *string { return &s.RedisType }, "single", "sentinel", "cluster")},
	{"REDIS_URL", "/var/run/nutcracker/ratelimit.sock", "address(es) of Redis, as REDIS_TYPE says", str(func(s *Settings) *string { return &s.RedisURL })},
	{"REDIS_POOL_SIZE", "10", "connections per Redis server", integer(func(s *Settings) *int { return &s.RedisPoolSize })},
	{"REDIS_AUTH", "", "password, or user:password", str(func(s *Settings) *string { return &s.RedisAuth })},
	{"REDIS_SENTINEL_AUTH", "", "password (or user:password) of the Sentinels", str(func(s *Settings) *string { return &s.RedisSentinelAuth })},
	{"REDIS_TLS", "false", "TLS to Redis", boolean(func(s *Settings) *bool { return &s.RedisTLS })},
	{"REDIS_TLS_CLIENT_CERT", "", "client certificate file", str(func(s *Settings) *string { return &s.RedisTLSCert })},
	{"REDIS_TLS_CLIENT_KEY", "", "client key file", str(func(s *Settings) *string { return &s.RedisTLSKey })},
	{"REDIS_TLS_CACERT", "", "CA file of the server's certificate", str(func(s *Settings) *string { return &s.RedisTLSCACert })},
	{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "accept a certificate for another host name; its chain is still verified (REDIS_TLS_CACERT, else the system's roots)", boolean(func(s *Settings) *bool { return &s.RedisTLSSkipVerify })},
	{"REDIS_TIMEOUT", "10s", "dial, read and write timeout of the Redis client (each decision also has RATEKIT_TIMEOUT)", duration(func(s *Settings) *time.Duration { return &s.RedisTimeout })},
	{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "false", "unhealthy while the circuit breaker holds Redis as down", boolean(func(s *Settings) *bool { return &s.RedisHealthCheck })},
	{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT", "WAIT only, as envoy (CREATE and ERROR are refused)", oneOf(nil, "wait")},
	{"REDIS_PIPELINE_WINDOW", "0", "accepted, changes nothing: concurrent calls share pipelines without waiting", noEffect()},
	{"REDIS_PIPELINE_LIMIT", "0", "accepted, changes nothing (as in envoy)", noEffect()},
	{"EXPIRATION_JITTER_MAX_SECONDS", "300", "accepted, changes nothing: keys expire at their window's end", noEffect()},
	{"REDIS_PERSECOND", "false", "refused when true: one Redis serves every limit", refusedTrue("second Redis for per-second limits")},
	{"TRACING_ENABLED", "false", "a span per ShouldRateLimit, exported over OTLP (OTEL_EXPORTER_OTLP_* say where)", boolean(func(s *Settings) *bool { return &s.Tracing.Enabled })},

	{"RATEKIT_FAILURE_POLICY", "local", "when Redis fails: local (limit per replica), open (allow) or closed (deny)", failure},
	{"RATEKIT_START_WITHOUT_REDIS", "false", "serve at once when Redis does not answer at start, deciding by RATEKIT_FAILURE_POLICY until it does, instead of waiting as REDIS_STARTUP_* say", boolean(func(s *Settings) *bool { return &s.StartWithoutRedis })},
	{"RATEKIT_TIMEOUT", "50ms", "deadline of each decision's Redis call", duration(func(s *Settings) *time.Duration { return &s.Timeout })},
	{"RATEKIT_REPLICAS", "1", "replicas sharing the limits: each holds 1/N of a limit while Redis is away", integer(func(s *Settings) *int { return &s.Replicas })},
	{"RATEKIT_ALGORITHM", "compatible", "how limits that name none are counted: compatible (as envoy), gcra, fixed, sliding-log, sliding-counter", algorithm},
	{"RATEKIT_BATCH", "4", "pipelines in flight of envoy's counting on a SINGLE or SENTINEL Redis, shared by concurrent calls (a pipeline's calls in one script run); ratekit's own algorithms keep the library's 8; 0 sends each call of both alone", integer(func(s *Settings) *int { return &s.Batch })},
	{"RATEKIT_ADMIN_TOKEN", "", "bearer token of /admin/quota and /admin/reset on PORT; empty: no admin endpoints", str(func(s *Settings) *string { return &s.AdminToken })},
	{"RATEKIT_BREAKER_FAILURES", "5", "consecutive failures that open the circuit breaker", integer(func(s *Settings) *int { return &s.BreakerFailures })},
	{"RATEKIT_BREAKER_BACKOFF", "100ms", "first wait before probing Redis again", duration(func(s *Settings) *time.Duration { return &s.BreakerBackoff })},
	{"RATEKIT_BREAKER_MAX_BACKOFF", "1s", "longest wait between probes", duration(func(s *Settings) *time.Duration { return &s.BreakerMaxBackoff })},
	{"RATEKIT_RULE_METADATA", "false", "name the rule that decided each answer in its dynamic metadata (ratekit.rule), for Envoy's access log", boolean(func(s *Settings) *bool { return &s.RuleMetadata })},
	{"RATEKIT_TRUSTED_PROXIES", "", "addresses and CIDRs of proxies in front of the gateways, comma-separated: /check's ip_from= walks a forwarded list from the right past them", prefixes(func(s *Settings) *[]netip.Prefix { return &s.TrustedProxies })},
	// what callers may ask
	{"RATEKIT_CALLER_LIMITS", "accept", "a descriptor's own limit: accept (as envoy), ignore (count it by the files' rule) or refuse the request", callerLimits},
	{"RATEKIT_CALLER_LIMIT_MAX_UNIT", "hour", "the longest unit a descriptor's own limit may ask for (second, minute, hour, day, week, month, year); longer ones are refused", maxUnit},
	{"RATEKIT_MAX_REQUEST_BYTES", "262144", "largest request: a gRPC message or a /json body", integer(func(s *Settings) *int { return &s.MaxRequestBytes })},

	// the HTTP servers' bounds: a connection is closed when it is idle, or
	// its request or answer takes, longer than these
	{"RATEKIT_READ_TIMEOUT", "10s", "longest read of one request, body included, on the HTTP, debug and Prometheus ports", duration(func(s *Settings) *time.Duration { return &s.ReadTimeout })},
	{"RATEKIT_WRITE_TIMEOUT", "10s", "longest time from the end of a request's headers to the end of its answer, on the HTTP, debug and Prometheus ports", duration(func(s *Settings) *time.Duration { return &s.WriteTimeout })},
	{"RATEKIT_IDLE_TIMEOUT", "60s", "how long an idle keep-alive connection stays open, on the HTTP, debug and Prometheus ports", duration(func(s *Settings) *time.Duration { return &s.IdleTimeout })},
	{"RATEKIT_PPROF_MAX_SECONDS", "60", "longest profile, trace or delta profile (seconds=) pprof takes; longer ones are refused with 400 (pprof lengthens its answer's write timeout by seconds=)", integer(func(s *Settings) *int { return &s.PprofMaxSeconds })},
	{"RATEKIT_PPROF", "true", "serve pprof's /debug/pprof/ on the debug port; false leaves /rlconfig alone there", boolean(func(s *Settings) *bool { return &s.Pprof })},
	{"RATEKIT_LIVE_PAGE_IDENTITIES", "false", "show the descriptors (domain|key=value) among the live page's offenders; false shows a keyed hash of each", boolean(func(s *Settings) *bool { return &s.LivePageIdentities })},
	{"RATEKIT_LIVE_PAGE_FLEET", "true", "publish this process's top offenders to Redis every 3 seconds (one small write per Limiter) and show the fleet's on the live page", boolean(func(s *Settings) *bool { return &s.LivePageFleet })},
	{"RATEKIT_ADMIN_GUESSES", "10", "wrong admin tokens one client address may send a minute; past them, 429 until the minute is over", integer(func(s *Settings) *int { return &s.AdminGuesses })},
}

// Load reads the settings through lookup (os.LookupEnv). It returns notes
// on settings accepted that change nothing, and an error naming every
// setting that is malformed or cannot be honoured.
func Load(lookup func(string) (string, bool)) (Settings, []string, error) {
	var (
		s     Settings
		notes []string
		errs  []error
	)
	for _, t := range Table {
		v, set := lookup(t.Name)
		if !set {
			v = t.Default
		}
		err := t.set(&s, v)
		switch {
		case errors.Is(err, errNoEffect):
			if set && v != t.Default {
				notes = append(notes, fmt.Sprintf("%s=%s: %s", t.Name, v, t.Doc))
			}
		case err != nil:
			errs = append(errs, fmt.Errorf("%s=%q: %w", t.Name, v, err))
		}
	}
	errs = append(errs, s.check(lookup)...)
	more, moreErrs := s.checkFeatures(lookup)
	notes = append(notes, more...)
	errs = append(errs, moreErrs...)
	return s, notes, errors.Join(errs...)
}

// check refuses combinations the server cannot honour.
func (s *Settings) check(lookup func(string) (string, bool)) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.UsePrometheus && s.UseStatsd {
		add("USE_PROMETHEUS and USE_STATSD are both true: envoy refuses two statistics sinks too; set USE_STATSD=false")
	}
	if s.ConfigType == "file" && s.RuntimeWatchRoot && s.RuntimeSubdirectory == "" {
		add("RUNTIME_WATCH_ROOT=true needs RUNTIME_SUBDIRECTORY: files are loaded from RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY (envoy would load none)")
	}
	if s.RedisTLS && (s.RedisTLSCert == "") != (s.RedisTLSKey == "") {
		add("REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY go together")
	}
	if strings.ContainsAny(s.CacheKeyPrefix, "{}") || hasControl(s.CacheKeyPrefix) || len(s.CacheKeyPrefix) > 64 {
		add("CACHE_KEY_PREFIX=%q: a prefix of at most 64 bytes without braces or control bytes", s.CacheKeyPrefix)
	}
	if s.Replicas < 1 {
		add("RATEKIT_REPLICAS=%d: at least 1", s.Replicas)
	}
	if f := strings.ToLower(s.LogFormat); f != "text" && f != "json" {
		add("LOG_FORMAT=%q: text or json", s.LogFormat)
	}
	if s.Batch < 0 || s.Batch > 64 {
		add("RATEKIT_BATCH=%d: 0 to 64", s.Batch)
	}
	if s.Timeout <= 0 {
		add("RATEKIT_TIMEOUT must be above 0")
	}
	if s.LocalCacheBytes < 0 {
		add("LOCAL_CACHE_SIZE_IN_BYTES must not be negative")
	}
	if s.StatsFlushInterval <= 0 {
		add("STATS_FLUSH_INTERVAL must be above 0")
	}
	for _, name := range []string{"MEMCACHE_HOST_PORT", "MEMCACHE_SRV"} {
		if v, ok := lookup(name); ok && v != "" {
			add("%s is set: ratekit keeps limits in Redis only", name)
		}
	}
	if s.RedisPoolSize < 1 {
		add("REDIS_POOL_SIZE must be at least 1")
	}
	if s.AdminToken != "" && len(s.AdminToken) < 16 {
		add("RATEKIT_ADMIN_TOKEN is shorter than 16 bytes")
	}
	s.checkBounds(add)
	s.checkStartup(add)
	return errs
}

// checkBounds checks the settings that bound what the service holds for
// traffic nobody vetted: timeouts, pprof, admin guesses, request sizes.
func (s *Settings) checkBounds(add func(format string, args ...any)) {
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"RATEKIT_READ_TIMEOUT", s.ReadTimeout}, {"RATEKIT_WRITE_TIMEOUT", s.WriteTimeout}, {"RATEKIT_IDLE_TIMEOUT", s.IdleTimeout}} {
		if t.d <= 0 {
			add("%s must be above 0: every HTTP server has its timeouts", t.name)
		}
	}
	if s.PprofMaxSeconds < 1 {
		add("RATEKIT_PPROF_MAX_SECONDS must be at least 1")
	}
	if s.AdminGuesses < 1 {
		add("RATEKIT_ADMIN_GUESSES must be at least 1")
	}
	if len(s.TrustedProxies) > 0 {
		if _, err := keyfuncs.IP(keyfuncs.TrustedProxies(s.TrustedProxies...)); err != nil {
			add("RATEKIT_TRUSTED_PROXIES: %v", err)
		}
	}
	if s.MaxRequestBytes < 4<<10 || s.MaxRequestBytes > 64<<20 {
		add("RATEKIT_MAX_REQUEST_BYTES=%d: 4096 to 67108864", s.MaxRequestBytes)
	}
}

// checkStartup checks REDIS_STARTUP_*.
func (s *Settings) checkStartup(add func(format string, args ...any)) {
	st := s.RedisStartup
	if st.Initial <= 0 || st.Max < st.Initial || st.MaxElapsed < 0 {
		add("REDIS_STARTUP_INITIAL_INTERVAL must be above 0, REDIS_STARTUP_MAX_INTERVAL at least it, REDIS_STARTUP_MAX_ELAPSED_TIME 0 or more")
	}
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

var errNoEffect = errors.New("no effect")

func str(f func(*Settings) *string) func(*Settings, string) error {
	return func(s *Settings, v string) error { *f(s) = v; return nil }
}

func integer(f func(*Settings) *int) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return errors.New("not an integer")
		}
		*f(s) = n
		return nil
	}
}

func boolean(f func(*Settings) *bool) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return errors.New("not a boolean (true or false)")
		}
		*f(s) = b
		return nil
	}
}

func prefixes(f func(*Settings) *[]netip.Prefix) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		ps, err := keyfuncs.ParsePrefixes(v)
		if err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), "keyfuncs: "))
		}
		*f(s) = ps
		return nil
	}
}

func duration(f func(*Settings) *time.Duration) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return errors.New("not a Go duration (such as 50ms or 10s)")
		}
		*f(s) = d
		return nil
	}
}

func ratio(f func(*Settings) *float32) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 32)
		if err != nil || r < 0 || r > 1 {
			return errors.New("not a ratio between 0 and 1")
		}
		*f(s) = float32(r)
		return nil
	}
}

func oneOf(f func(*Settings) *string, allowed ...string) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		for _, a := range allowed {
			if strings.EqualFold(v, a) {
				if f != nil {
					*f(s) = strings.ToLower(v)
				}
				return nil
			}
		}
		return fmt.Errorf("not one of %s", strings.Join(allowed, ", "))
	}
}

func refused(what string) func(*Settings, string) error {
	return func(_ *Settings, v string) error {
		if v != "" {
			return fmt.Errorf("ratekit-server has no %s", what)
		}
		return nil
	}
}

func refusedTrue(what string) func(*Settings, string) error {
	return func(_ *Settings, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return errors.New("not a boolean (true or false)")
		}
		if b {
			return fmt.Errorf("ratekit-server has no %s", what)
		}
		return nil
	}
}

func noEffect() func(*Settings, string) error {
	return func(*Settings, string) error { return errNoEffect }
}

func failure(s *Settings, v string) error {
	p, err := core.ParseFailurePolicy(v)
	if err != nil {
		return errors.New("not local, open or closed")
	}
	s.Failure = p
	return nil
}

func algorithm(s *Settings, v string) error {
	a, err := config.ParseAlgorithm(v)
	if err != nil {
		return err
	}
	s.Algorithm = a
	return nil
}

func callerLimits(s *Settings, v string) error {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "accept":
		s.CallerLimits = CallerLimitsAccept
	case "ignore":
		s.CallerLimits = CallerLimitsIgnore
	case "refuse":
		s.CallerLimits = CallerLimitsRefuse
	default:
		return errors.New("not accept, ignore or refuse")
	}
	return nil
}

func maxUnit(s *Settings, v string) error {
	u, ok := rlspb.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(strings.TrimSpace(v))]
	if _, known := config.UnitLength(config.Unit(u)); !ok || !known {
		return errors.New("not second, minute, hour, day, week, month or year")
	}
	s.CallerLimitMaxUnit = config.Unit(u)
	return nil
}

// Names returns the names of every setting, sorted.
func Names() []string {
	out := make([]string, len(Table))
	for i, t := range Table {
		out[i] = t.Name
	}
	sort.Strings(out)
	return out
}
