package settings_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
	"github.com/ratekit/ratekit/core"
)

func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsAreEnvoys(t *testing.T) {
	s, notes, err := settings.Load(env("RUNTIME_SUBDIRECTORY", "ratelimit"))
	if err != nil || len(notes) != 0 {
		t.Fatal(err, notes)
	}
	if s.Port != 8080 || s.GRPCPort != 8081 || s.DebugPort != 6070 || s.RedisURL != "/var/run/nutcracker/ratelimit.sock" ||
		s.RedisSocketType != "unix" || s.RedisType != "single" || s.RedisPoolSize != 10 || !s.UseStatsd ||
		s.PrometheusAddr != ":9090" || s.NearLimitRatio != 0.8 || s.LimitHeader != "RateLimit-Limit" ||
		s.StatsFlushInterval != 10*time.Second || s.RuntimeAppDirectory != "config" || !s.RuntimeWatchRoot {
		t.Fatalf("defaults: %+v", s)
	}
	// ratekit's safer ones
	if s.DebugHost != "127.0.0.1" || !s.Pprof || s.ReadTimeout != 10*time.Second || s.WriteTimeout != 10*time.Second ||
		s.IdleTimeout != time.Minute || s.PprofMaxSeconds != 60 || s.AdminGuesses != 10 {
		t.Fatalf("safe defaults: %+v", s)
	}
	if s.Failure != core.FailLocal || s.Timeout != 50*time.Millisecond || s.Batch != 4 {
		t.Fatalf("ratekit's defaults: %+v", s)
	}
}

func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"PORT", "eighty"}, "PORT=\"eighty\": not an integer"},
		{[]string{"USE_PROMETHEUS", "true"}, "USE_STATSD are both true"},
		{[]string{"BACKEND_TYPE", "memcache"}, "BACKEND_TYPE"},
		{[]string{"CONFIG_TYPE", "GRPC_XDS"}, "CONFIG_TYPE"},
		{[]string{"CONFIG_TYPE", "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_MAX_INTERVAL", "1s"}, "XDS_CLIENT_BACKOFF_MAX_INTERVAL"},
		{[]string{"CONFIG_TYPE", "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "a:b,c"}, `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS="a:b,c": "c" is not key:value`},
		{[]string{"CONFIG_TYPE", "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS", "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "c"}, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together"},
		{[]string{"GRPC_SERVER_USE_TLS", "true", "GRPC_SERVER_TLS_CERT", "c"}, "GRPC_SERVER_TLS_KEY"},
		{[]string{"GRPC_SERVER_USE_TLS", "true", "GRPC_SERVER_TLS_CERT", "c", "GRPC_SERVER_TLS_KEY", "k", "GRPC_CLIENT_TLS_SAN", "x"}, "GRPC_CLIENT_TLS_SAN needs GRPC_CLIENT_TLS_CACERT"},
		{[]string{"REDIS_STARTUP_MAX_INTERVAL", "soon"}, "REDIS_STARTUP_MAX_INTERVAL"},
		{[]string{"REDIS_CLUSTER_PIPELINE_PARALLELISM", "-1"}, "REDIS_CLUSTER_PIPELINE_PARALLELISM"},
		{[]string{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "yes please"}, "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS"},
		{[]string{"REDIS_STARTUP_INITIAL_INTERVAL", "0s"}, "REDIS_STARTUP_INITIAL_INTERVAL must be above 0"},
		{[]string{"REDIS_STARTUP_INITIAL_INTERVAL", "1m"}, "REDIS_STARTUP_MAX_INTERVAL at least it"},
		{[]string{"REDIS_STARTUP_MAX_ELAPSED_TIME", "-1s"}, "REDIS_STARTUP_MAX_ELAPSED_TIME 0 or more"},
		{[]string{"REDIS_PERSECOND", "true"}, "ratekit-server has no second Redis for per-second limits"},
		{[]string{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "CREATE"}, "REDIS_POOL_ON_EMPTY_BEHAVIOR"},
		{[]string{"TRACING_ENABLED", "true", "TRACING_EXPORTER_PROTOCOL", "zipkin"}, "TRACING_EXPORTER_PROTOCOL"},
		{[]string{"USE_DOG_STATSD", "true"}, "ratekit-server has no DogStatsD"},
		{[]string{"EXTRA_TAGS", "a:b"}, "ratekit-server has no extra statistics tags"},
		{[]string{"RATEKIT_FAILURE_POLICY", "maybe"}, "RATEKIT_FAILURE_POLICY"},
		{[]string{"RATEKIT_ALGORITHM", "leaky"}, "RATEKIT_ALGORITHM"},
		{[]string{"LOG_FORMAT", "xml"}, `LOG_FORMAT="xml": text or json`},
		{[]string{"CACHE_KEY_PREFIX", "{x}"}, "CACHE_KEY_PREFIX"},
		{[]string{"NEAR_LIMIT_RATIO", "2"}, "NEAR_LIMIT_RATIO"},
		{[]string{"RUNTIME_SUBDIRECTORY", ""}, "RUNTIME_WATCH_ROOT=true needs RUNTIME_SUBDIRECTORY"},
		{[]string{"MEMCACHE_HOST_PORT", "a:1"}, "MEMCACHE_HOST_PORT"},
		{[]string{"RATEKIT_ADMIN_TOKEN", "short"}, "shorter than 16"},
		{[]string{"RATEKIT_TRUSTED_PROXIES", "10.0.0.0/8, nonsense"}, `RATEKIT_TRUSTED_PROXIES="10.0.0.0/8, nonsense": parse prefix "nonsense"`},
		{[]string{"RATEKIT_TRUSTED_PROXIES", "0.0.0.0/1, 128.0.0.0/1"}, "RATEKIT_TRUSTED_PROXIES: keyfuncs: the trusted proxies hold every address"},
	} {
		e := append([]string{"RUNTIME_SUBDIRECTORY", "x"}, tc.env...)
		_, _, err := settings.Load(env(e...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.env, err, tc.want)
		}
	}
}

func TestTrustedProxies(t *testing.T) {
	s, _, err := settings.Load(env("RUNTIME_SUBDIRECTORY", "x", "RATEKIT_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.1"))
	if err != nil || len(s.TrustedProxies) != 2 || s.TrustedProxies[1].String() != "192.0.2.1/32" {
		t.Fatalf("%v %v", s.TrustedProxies, err)
	}
}

func TestNoEffectIsSaid(t *testing.T) {
	_, notes, err := settings.Load(env("RUNTIME_SUBDIRECTORY", "x", "REDIS_PIPELINE_WINDOW", "150us", "EXPIRATION_JITTER_MAX_SECONDS", "300"))
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "REDIS_PIPELINE_WINDOW=150us") {
		t.Fatalf("notes %q, error %v", notes, err)
	}
}

// TestRedisStartup: envoy's defaults, values as set, and REDIS_STARTUP_*
// said to change nothing when the server does not wait for Redis.
func TestRedisStartup(t *testing.T) {
	s, _, err := settings.Load(env("RUNTIME_SUBDIRECTORY", "x"))
	if err != nil || s.RedisStartup != (settings.Startup{Initial: time.Second, Max: 30 * time.Second}) || s.StartWithoutRedis {
		t.Fatalf("defaults: %+v %v %v", s.RedisStartup, s.StartWithoutRedis, err)
	}
	s, notes, err := settings.Load(env("RUNTIME_SUBDIRECTORY", "x", "REDIS_STARTUP_INITIAL_INTERVAL", "200ms", "REDIS_STARTUP_MAX_INTERVAL", "2s", "REDIS_STARTUP_MAX_ELAPSED_TIME", "1m"))
	if err != nil || len(notes) != 0 || s.RedisStartup != (settings.Startup{Initial: 200 * time.Millisecond, Max: 2 * time.Second, MaxElapsed: time.Minute}) {
		t.Fatalf("set: %+v %q %v", s.RedisStartup, notes, err)
	}
	_, notes, err = settings.Load(env("RUNTIME_SUBDIRECTORY", "x", "RATEKIT_START_WITHOUT_REDIS", "true", "REDIS_STARTUP_MAX_ELAPSED_TIME", "1m"))
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "REDIS_STARTUP_MAX_ELAPSED_TIME=1m: changes nothing while RATEKIT_START_WITHOUT_REDIS is true") {
		t.Fatalf("notes %q, error %v", notes, err)
	}
}

// TestResponseTimeAsMilliseconds: read with Prometheus, said to change
// nothing without it or with a mapping file, as envoy ignores it there.
func TestResponseTimeAsMilliseconds(t *testing.T) {
	base := []string{"RUNTIME_SUBDIRECTORY", "x", "USE_STATSD", "false", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true"}
	s, notes, err := settings.Load(env(append(base, "USE_PROMETHEUS", "true")...))
	if err != nil || len(notes) != 0 || !s.PrometheusResponseTimeMS {
		t.Fatalf("with Prometheus: %v %q %v", s.PrometheusResponseTimeMS, notes, err)
	}
	for _, tc := range []struct{ more []string }{
		{nil},
		{[]string{"USE_PROMETHEUS", "true", "PROMETHEUS_MAPPER_YAML", "/m.yaml"}},
	} {
		_, notes, err := settings.Load(env(append(base, tc.more...)...))
		if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS=true: changes nothing") {
			t.Errorf("%v: notes %q, error %v", tc.more, notes, err)
		}
	}
}

// TestCallerBounds: what callers may ask, by default and as set.
func TestCallerBounds(t *testing.T) {
	s, _, err := settings.Load(env("RUNTIME_SUBDIRECTORY", "ratelimit"))
	if err != nil || s.CallerLimits != settings.CallerLimitsAccept || s.CallerLimitMaxUnit.String() != "HOUR" || s.MaxRequestBytes != 256<<10 {
		t.Fatalf("defaults: %v %v %d %v", s.CallerLimits, s.CallerLimitMaxUnit, s.MaxRequestBytes, err)
	}
	s, _, err = settings.Load(env("RUNTIME_SUBDIRECTORY", "ratelimit", "RATEKIT_CALLER_LIMITS", "Refuse", "RATEKIT_CALLER_LIMIT_MAX_UNIT", "year", "RATEKIT_MAX_REQUEST_BYTES", "1048576"))
	if err != nil || s.CallerLimits != settings.CallerLimitsRefuse || s.CallerLimitMaxUnit.String() != "YEAR" || s.MaxRequestBytes != 1<<20 {
		t.Fatalf("set: %v %v %d %v", s.CallerLimits, s.CallerLimitMaxUnit, s.MaxRequestBytes, err)
	}
	for _, kv := range [][2]string{{"RATEKIT_CALLER_LIMITS", "maybe"}, {"RATEKIT_CALLER_LIMIT_MAX_UNIT", "unknown"}, {"RATEKIT_CALLER_LIMIT_MAX_UNIT", "fortnight"}, {"RATEKIT_MAX_REQUEST_BYTES", "100"}} {
		if _, _, err := settings.Load(env("RUNTIME_SUBDIRECTORY", "ratelimit", kv[0], kv[1])); err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s: %v", kv[0], kv[1], err)
		}
	}
}

// envoyGateway is the environment of Envoy Gateway's rate limit
// Deployment (its testdata/deployments/default.yaml), with Prometheus
// on and the mapper file left out.
var envoyGateway = []string{
	"RUNTIME_ROOT", "/data",
	"RUNTIME_SUBDIRECTORY", "ratelimit",
	"RUNTIME_IGNOREDOTFILES", "true",
	"RUNTIME_WATCH_ROOT", "false",
	"LOG_LEVEL", "info",
	"USE_STATSD", "false",
	"USE_PROMETHEUS", "true",
	"PROMETHEUS_ADDR", ":19001",
	"PROMETHEUS_MAPPER_YAML", "/etc/statsd-exporter/conf.yaml",
	"CONFIG_TYPE", "GRPC_XDS_SOTW",
	"CONFIG_GRPC_XDS_SERVER_URL", "envoy-gateway:18001",
	"CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit",
	"GRPC_SERVER_USE_TLS", "true",
	"GRPC_SERVER_TLS_CERT", "/certs/tls.crt",
	"GRPC_SERVER_TLS_KEY", "/certs/tls.key",
	"GRPC_SERVER_TLS_CA_CERT", "/certs/ca.crt",
	"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true",
	"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/certs/tls.crt",
	"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/certs/tls.key",
	"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt",
	"FORCE_START_WITHOUT_INITIAL_CONFIG", "true",
	"REDIS_SOCKET_TYPE", "tcp",
	"REDIS_URL", "redis.redis.svc:6379",
	"TRACING_SERVICE_NAME", "envoy-ratelimit",
}

func TestEnvoyGatewaysEnvironment(t *testing.T) {
	s, notes, err := settings.Load(env(envoyGateway...))
	if err != nil {
		t.Fatal(err)
	}
	if s.ConfigType != "grpc_xds_sotw" || !s.GRPCServerTLS || s.GRPCServerTLSCert != "/certs/tls.crt" || s.GRPCClientTLSCACert != "" ||
		s.PrometheusMapperYAML != "/etc/statsd-exporter/conf.yaml" {
		t.Fatalf("%+v", s)
	}
	x := s.XDS
	if x.ServerURL != "envoy-gateway:18001" || x.NodeID != "envoy-ratelimit" || !x.UseTLS || x.ClientKey != "/certs/tls.key" ||
		x.ServerCACert != "/certs/ca.crt" || x.BackoffInitial != 10*time.Second || x.BackoffMax != time.Minute ||
		x.BackoffRandomFactor != 0.5 || !x.BackoffJitter || x.ConnectRetryInterval != 3*time.Second || x.MaxMsgSize != 0 {
		t.Fatalf("%+v", x)
	}
	said := strings.Join(notes, "\n")
	for _, n := range []string{"GRPC_SERVER_TLS_CA_CERT=/certs/ca.crt", "RUNTIME_ROOT=/data: changes nothing while the configuration comes over xDS", "TRACING_SERVICE_NAME"} {
		if !strings.Contains(said, n) {
			t.Errorf("no note on %s in\n%s", n, said)
		}
	}
}

func TestUnusedFeatureSettingsAreSaid(t *testing.T) {
	_, notes, err := settings.Load(env("RUNTIME_SUBDIRECTORY", "x", "CONFIG_GRPC_XDS_SERVER_URL", "cp:18000", "GRPC_SERVER_TLS_CERT", "/c", "REDIS_PERSECOND_URL", "r:6379"))
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Join(notes, "\n")
	for _, n := range []string{"CONFIG_GRPC_XDS_SERVER_URL=cp:18000: changes nothing while CONFIG_TYPE is FILE", "GRPC_SERVER_TLS_CERT=/c: changes nothing while GRPC_SERVER_USE_TLS is false", "REDIS_PERSECOND_URL"} {
		if !strings.Contains(said, n) {
			t.Errorf("no note on %s in\n%s", n, said)
		}
	}
}

// TestEveryEnvoyVariable: every variable of envoy's settings.go is in the
// table, so none is read silently past.
func TestEveryEnvoyVariable(t *testing.T) {
	known := map[string]bool{}
	for _, n := range settings.Names() {
		known[n] = true
	}
	for _, n := range envoyVariables {
		if !known[n] && n != "MEMCACHE_HOST_PORT" && n != "MEMCACHE_SRV" {
			t.Errorf("%s is not in the table", n)
		}
	}
}

// envoyVariables are the variables of envoyproxy/ratelimit's src/settings/settings.go
// (and REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR, added after it).
var envoyVariables = []string{
	"HOST",
	"PORT",
	"DEBUG_HOST",
	"DEBUG_PORT",
	"GRPC_UDS",
	"GRPC_HOST",
	"GRPC_PORT",
	"GRPC_MAX_CONNECTION_AGE",
	"GRPC_MAX_CONNECTION_AGE_GRACE",
	"GRPC_SERVER_USE_TLS",
	"GRPC_SERVER_TLS_CERT",
	"GRPC_SERVER_TLS_KEY",
	"GRPC_CLIENT_TLS_CACERT",
	"GRPC_CLIENT_TLS_SAN",
	"LOG_LEVEL",
	"LOG_FORMAT",
	"CONFIG_TYPE",
	"FORCE_START_WITHOUT_INITIAL_CONFIG",
	"CONFIG_GRPC_XDS_NODE_ID",
	"CONFIG_GRPC_XDS_NODE_METADATA",
	"CONFIG_GRPC_XDS_SERVER_URL",
	"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
	"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
	"CONFIG_GRPC_XDS_SERVER_USE_TLS",
	"CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
	"CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
	"CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
	"CONFIG_GRPC_XDS_SERVER_TLS_SAN",
	"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
	"XDS_CLIENT_BACKOFF_MAX_INTERVAL",
	"XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
	"XDS_CLIENT_BACKOFF_JITTER",
	"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
	"USE_DOG_STATSD",
	"USE_DOG_STATSD_MOGRIFIERS",
	"USE_STATSD",
	"STATSD_HOST",
	"STATSD_PORT",
	"EXTRA_TAGS",
	"STATS_FLUSH_INTERVAL",
	"DISABLE_STATS",
	"USE_PROMETHEUS",
	"PROMETHEUS_ADDR",
	"PROMETHEUS_PATH",
	"PROMETHEUS_MAPPER_YAML",
	"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS",
	"RUNTIME_ROOT",
	"RUNTIME_SUBDIRECTORY",
	"RUNTIME_APPDIRECTORY",
	"RUNTIME_IGNOREDOTFILES",
	"RUNTIME_WATCH_ROOT",
	"EXPIRATION_JITTER_MAX_SECONDS",
	"LOCAL_CACHE_SIZE_IN_BYTES",
	"NEAR_LIMIT_RATIO",
	"CACHE_KEY_PREFIX",
	"BACKEND_TYPE",
	"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
	"LIMIT_RESPONSE_HEADERS_ENABLED",
	"LIMIT_LIMIT_HEADER",
	"LIMIT_REMAINING_HEADER",
	"LIMIT_RESET_HEADER",
	"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
	"REDIS_SOCKET_TYPE",
	"REDIS_TYPE",
	"REDIS_URL",
	"REDIS_POOL_SIZE",
	"REDIS_AUTH",
	"REDIS_TLS",
	"REDIS_TLS_CLIENT_CERT",
	"REDIS_TLS_CLIENT_KEY",
	"REDIS_TLS_CACERT",
	"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
	"REDIS_PIPELINE_WINDOW",
	"REDIS_PIPELINE_LIMIT",
	"REDIS_CLUSTER_PIPELINE_PARALLELISM",
	"REDIS_PERSECOND",
	"REDIS_PERSECOND_SOCKET_TYPE",
	"REDIS_PERSECOND_TYPE",
	"REDIS_PERSECOND_URL",
	"REDIS_PERSECOND_POOL_SIZE",
	"REDIS_PERSECOND_AUTH",
	"REDIS_PERSECOND_TLS",
	"REDIS_SENTINEL_AUTH",
	"REDIS_PERSECOND_SENTINEL_AUTH",
	"REDIS_PERSECOND_PIPELINE_WINDOW",
	"REDIS_PERSECOND_PIPELINE_LIMIT",
	"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM",
	"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
	"REDIS_TIMEOUT",
	"REDIS_PERSECOND_TIMEOUT",
	"REDIS_POOL_ON_EMPTY_BEHAVIOR",
	"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR",
	"REDIS_STARTUP_INITIAL_INTERVAL",
	"REDIS_STARTUP_MAX_INTERVAL",
	"REDIS_STARTUP_MAX_ELAPSED_TIME",
	"MEMCACHE_HOST_PORT",
	"MEMCACHE_MAX_IDLE_CONNS",
	"MEMCACHE_SRV",
	"MEMCACHE_SRV_REFRESH",
	"MEMCACHE_TLS",
	"MEMCACHE_TLS_CLIENT_CERT",
	"MEMCACHE_TLS_CLIENT_KEY",
	"MEMCACHE_TLS_CACERT",
	"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION",
	"SHADOW_MODE",
	"QUOTA_MODE",
	"RESPONSE_DYNAMIC_METADATA",
	"MERGE_DOMAIN_CONFIG",
	"TRACING_ENABLED",
	"TRACING_SERVICE_NAME",
	"TRACING_SERVICE_NAMESPACE",
	"TRACING_SERVICE_INSTANCE_ID",
	"TRACING_EXPORTER_PROTOCOL",
	"TRACING_SAMPLING_RATE",
	"REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR",
}

// TestEnvoyGatewayPage loads the environment docs/gateways-envoy-gateway.md
// lists as Envoy Gateway's: it must start.
func TestEnvoyGatewayPage(t *testing.T) {
	page, err := os.ReadFile("../../../../docs/gateways-envoy-gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```sh\n(CONFIG_TYPE=.*?)```").FindSubmatch(page)
	if m == nil {
		t.Fatal("no environment on the page")
	}
	var kv []string
	for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		k, v, _ := strings.Cut(line, "=")
		kv = append(kv, k, v)
	}
	s, _, err := settings.Load(env(kv...))
	if err != nil {
		t.Fatal(err)
	}
	if s.ConfigType != "grpc_xds_sotw" || !s.GRPCServerTLS || !s.XDS.UseTLS || len(kv) < 40 {
		t.Fatalf("%+v", s)
	}
}
