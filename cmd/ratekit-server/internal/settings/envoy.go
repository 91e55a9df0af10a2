package settings

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// XDS are the settings of the xDS client that CONFIG_TYPE=GRPC_XDS_SOTW
// uses: envoy's CONFIG_GRPC_XDS_* and XDS_CLIENT_* variables.
type XDS struct {
	NodeID       string
	NodeMetadata map[string]string
	ServerURL    string
	// ConnectRetryInterval is the wait between attempts to connect, with
	// half of it as jitter.
	ConnectRetryInterval time.Duration
	// Headers are sent as metadata with the stream.
	Headers map[string]string

	UseTLS       bool
	ClientCert   string
	ClientKey    string
	ServerCACert string
	// ServerSAN is the name the server's certificate is checked against
	// instead of the host of ServerURL.
	ServerSAN string

	// The wait before opening a new stream after one ended grows from
	// BackoffInitial to BackoffMax, each randomized by ±BackoffRandomFactor
	// when BackoffJitter.
	BackoffInitial      time.Duration
	BackoffMax          time.Duration
	BackoffRandomFactor float64
	BackoffJitter       bool
	// MaxMsgSize bounds a response of the server; 0 is gRPC's default
	// (4 MiB).
	MaxMsgSize int
}

// Startup is how the server waits for Redis at start: envoy's
// REDIS_STARTUP_* settings.
type Startup struct {
	// Initial is the first wait between two attempts; the waits double,
	// each drawn between Initial and its bound, up to Max.
	Initial time.Duration
	Max     time.Duration
	// MaxElapsed is how long the server waits before it gives up; 0
	// waits for ever.
	MaxElapsed time.Duration
}

// Tracing are envoy's TRACING_* settings; the exporter reads the
// OTEL_EXPORTER_OTLP_* variables itself.
type Tracing struct {
	Enabled           bool
	ServiceName       string
	ServiceNamespace  string
	ServiceInstanceID string
	// Protocol is "http" or "grpc".
	Protocol     string
	SamplingRate float64
}

// envoyTable are envoy's variables that settings.go's table does not hold:
// the xDS client's, and those of features ratekit-server does without,
// accepted when they change nothing and said so. init puts them before
// ratekit's own.
var envoyTable = []Setting{
	{"CONFIG_GRPC_XDS_NODE_ID", "default", "node ID sent to the xDS server (its snapshots are set for it)", str(func(s *Settings) *string { return &s.XDS.NodeID })},
	{"CONFIG_GRPC_XDS_NODE_METADATA", "", "node metadata sent to the xDS server: key=value pairs, comma-separated", nodeMetadata},
	{"CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000", "host:port of the xDS server", str(func(s *Settings) *string { return &s.XDS.ServerURL })},
	{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "3s", "wait between attempts to connect to the xDS server (with half of it as jitter)", duration(func(s *Settings) *time.Duration { return &s.XDS.ConnectRetryInterval })},
	{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "", "metadata sent with the xDS stream: key:value pairs, comma-separated", pairs(":", func(s *Settings) *map[string]string { return &s.XDS.Headers })},
	{"CONFIG_GRPC_XDS_SERVER_USE_TLS", "false", "TLS to the xDS server", boolean(func(s *Settings) *bool { return &s.XDS.UseTLS })},
	{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "", "client certificate file presented to the xDS server", str(func(s *Settings) *string { return &s.XDS.ClientCert })},
	{"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "", "its private key file", str(func(s *Settings) *string { return &s.XDS.ClientKey })},
	{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "", "CA file of the xDS server's certificate (added to the system's roots, as envoy does)", str(func(s *Settings) *string { return &s.XDS.ServerCACert })},
	{"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "", "name the xDS server's certificate must hold, instead of the host of CONFIG_GRPC_XDS_SERVER_URL", str(func(s *Settings) *string { return &s.XDS.ServerSAN })},
	{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "10s", "first wait before a new xDS stream after one ended", duration(func(s *Settings) *time.Duration { return &s.XDS.BackoffInitial })},
	{"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "60s", "longest wait before a new xDS stream", duration(func(s *Settings) *time.Duration { return &s.XDS.BackoffMax })},
	{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0.5", "share of each wait drawn at random (with XDS_CLIENT_BACKOFF_JITTER)", ratio64(func(s *Settings) *float64 { return &s.XDS.BackoffRandomFactor })},
	{"XDS_CLIENT_BACKOFF_JITTER", "true", "randomize the waits", boolean(func(s *Settings) *bool { return &s.XDS.BackoffJitter })},
	{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "", "largest xDS response accepted; empty or 0: gRPC's 4 MiB", intOrZero(func(s *Settings) *int { return &s.XDS.MaxMsgSize })},

	{"USE_DOG_STATSD_MOGRIFIERS", "", "accepted, changes nothing: DogStatsD is refused", noEffect()},
	{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "false", "true: ratelimit_service_response_time_seconds observes milliseconds, as envoy's legacy mapping does (its name and buckets stay); changes nothing with PROMETHEUS_MAPPER_YAML, as in envoy", boolean(func(s *Settings) *bool { return &s.PrometheusResponseTimeMS })},
	{"TRACING_SERVICE_NAME", "RateLimit", "service.name of the spans", str(func(s *Settings) *string { return &s.Tracing.ServiceName })},
	{"TRACING_SERVICE_NAMESPACE", "", "service.namespace of the spans", str(func(s *Settings) *string { return &s.Tracing.ServiceNamespace })},
	{"TRACING_SERVICE_INSTANCE_ID", "", "service.instance.id of the spans; empty: a random UUID", str(func(s *Settings) *string { return &s.Tracing.ServiceInstanceID })},
	{"TRACING_EXPORTER_PROTOCOL", "http", "OTLP over http or grpc", oneOf(func(s *Settings) *string { return &s.Tracing.Protocol }, "http", "grpc")},
	{"TRACING_SAMPLING_RATE", "1", "share of traces sampled, unless the caller's parent decided", ratio64(func(s *Settings) *float64 { return &s.Tracing.SamplingRate })},
	{"REDIS_STARTUP_INITIAL_INTERVAL", "1s", "first wait before asking Redis again when it does not answer at start (nothing is served until it does); the waits double, with jitter, up to REDIS_STARTUP_MAX_INTERVAL", duration(func(s *Settings) *time.Duration { return &s.RedisStartup.Initial })},
	{"REDIS_STARTUP_MAX_INTERVAL", "30s", "longest wait between two attempts at start", duration(func(s *Settings) *time.Duration { return &s.RedisStartup.Max })},
	{"REDIS_STARTUP_MAX_ELAPSED_TIME", "0", "give up, and exit 1 naming it, when Redis has not answered after this long at start; 0 waits for ever (as envoy)", duration(func(s *Settings) *time.Duration { return &s.RedisStartup.MaxElapsed })},
	{"REDIS_CLOSE_CONNECTION_ON_READONLY_ERROR", "false", "accepted, changes nothing: a connection answered READONLY (a master demoted behind a Service or DNS name) is closed whatever it says, so the next one dials the new master; false cannot keep it (go-redis always closes it), and READONLY replies are counted (ratelimit.redis_pool.readonly_error)", boolNoEffect()},
	{"REDIS_CLUSTER_PIPELINE_PARALLELISM", "1", "accepted, changes nothing: a request's descriptors of different keys are decided at once whatever it says (envoy's 0, bounded by the request's descriptors rather than REDIS_POOL_SIZE), each decision one script on its key's Cluster node", intNoEffect()},
	{"REDIS_PERSECOND_SOCKET_TYPE", "unix", "accepted, changes nothing: REDIS_PERSECOND is refused", noEffect()},
	{"REDIS_PERSECOND_TYPE", "SINGLE", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"REDIS_PERSECOND_URL", "/var/run/nutcracker/ratelimitpersecond.sock", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"REDIS_PERSECOND_POOL_SIZE", "10", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"REDIS_PERSECOND_AUTH", "", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"REDIS_PERSECOND_SENTINEL_AUTH", "", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"REDIS_PERSECOND_TLS", "false", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"REDIS_PERSECOND_PIPELINE_WINDOW", "0", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"REDIS_PERSECOND_PIPELINE_LIMIT", "0", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "1", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"REDIS_PERSECOND_TIMEOUT", "10s", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "WAIT", "as REDIS_PERSECOND_SOCKET_TYPE", noEffect()},
	{"MEMCACHE_MAX_IDLE_CONNS", "2", "accepted, changes nothing: memcache is refused (MEMCACHE_HOST_PORT and MEMCACHE_SRV are refused when set)", noEffect()},
	{"MEMCACHE_SRV_REFRESH", "0", "as MEMCACHE_MAX_IDLE_CONNS", noEffect()},
	{"MEMCACHE_TLS", "false", "as MEMCACHE_MAX_IDLE_CONNS", noEffect()},
	{"MEMCACHE_TLS_CLIENT_CERT", "", "as MEMCACHE_MAX_IDLE_CONNS", noEffect()},
	{"MEMCACHE_TLS_CLIENT_KEY", "", "as MEMCACHE_MAX_IDLE_CONNS", noEffect()},
	{"MEMCACHE_TLS_CACERT", "", "as MEMCACHE_MAX_IDLE_CONNS", noEffect()},
	{"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "as MEMCACHE_MAX_IDLE_CONNS", noEffect()},
}

func init() {
	i := 0
	for i < len(Table) && !strings.HasPrefix(Table[i].Name, "RATEKIT_") {
		i++
	}
	Table = append(Table[:i:i], append(envoyTable, Table[i:]...)...)
}

// checkFeatures refuses what the TLS and xDS settings cannot do, and
// notes the variables set for a feature that is off, which change
// nothing (as in envoy, which reads them only when it is on).
func (s *Settings) checkFeatures(lookup func(string) (string, bool)) (notes []string, errs []error) {
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	unused := func(why string, names ...string) {
		for _, n := range names {
			if v, ok := lookup(n); ok && v != "" {
				notes = append(notes, fmt.Sprintf("%s=%s: changes nothing while %s", n, v, why))
			}
		}
	}
	if s.GRPCServerTLS {
		if s.GRPCServerTLSCert == "" || s.GRPCServerTLSKey == "" {
			add("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY")
		}
		if s.GRPCClientTLSSAN != "" && s.GRPCClientTLSCACert == "" {
			add("GRPC_CLIENT_TLS_SAN needs GRPC_CLIENT_TLS_CACERT: without it client certificates are not asked for")
		}
	} else {
		unused("GRPC_SERVER_USE_TLS is false", "GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT", "GRPC_CLIENT_TLS_SAN")
	}
	s.offFeatures(unused)
	x := s.XDS
	if s.ConfigType == "grpc_xds_sotw" {
		if x.ServerURL == "" {
			add("CONFIG_TYPE=GRPC_XDS_SOTW needs CONFIG_GRPC_XDS_SERVER_URL")
		}
		if x.ConnectRetryInterval <= 0 || x.BackoffInitial <= 0 || x.BackoffMax < x.BackoffInitial {
			add("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL and XDS_CLIENT_BACKOFF_INITIAL_INTERVAL must be above 0, XDS_CLIENT_BACKOFF_MAX_INTERVAL at least the initial interval")
		}
		if x.MaxMsgSize < 0 {
			add("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES must not be negative")
		}
		if x.UseTLS {
			if (x.ClientCert == "") != (x.ClientKey == "") {
				add("CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together")
			}
		} else {
			unused("CONFIG_GRPC_XDS_SERVER_USE_TLS is false", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN")
		}
		unused("the configuration comes over xDS", "RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "RUNTIME_IGNOREDOTFILES", "RUNTIME_WATCH_ROOT")
	} else {
		var names []string
		for _, t := range envoyTable {
			if strings.HasPrefix(t.Name, "CONFIG_GRPC_XDS_") || strings.HasPrefix(t.Name, "XDS_CLIENT_") {
				names = append(names, t.Name)
			}
		}
		unused("CONFIG_TYPE is FILE", names...)
	}
	return notes, errs
}

// offFeatures notes, through unused, the variables of the statistics,
// the wait for Redis and tracing that their other settings turn off.
func (s *Settings) offFeatures(unused func(why string, names ...string)) {
	if !s.UsePrometheus {
		unused("USE_PROMETHEUS is false", "PROMETHEUS_MAPPER_YAML", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS")
	} else if s.PrometheusMapperYAML != "" {
		unused("PROMETHEUS_MAPPER_YAML is set (as in envoy)", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS")
	}
	if s.StartWithoutRedis {
		unused("RATEKIT_START_WITHOUT_REDIS is true", "REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME")
	}
	if !s.Tracing.Enabled {
		unused("TRACING_ENABLED is false", "TRACING_SERVICE_NAME", "TRACING_SERVICE_NAMESPACE", "TRACING_SERVICE_INSTANCE_ID", "TRACING_EXPORTER_PROTOCOL", "TRACING_SAMPLING_RATE")
	}
}

// pairs reads "k1<sep>v1,k2<sep>v2" into a map; an entry without sep is
// an error (envoy's envconfig refuses one in a map too).
func pairs(sep string, f func(*Settings) *map[string]string) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		m := map[string]string{}
		for _, e := range strings.Split(v, ",") {
			if strings.TrimSpace(e) == "" {
				continue
			}
			k, val, ok := strings.Cut(e, sep)
			if !ok || k == "" {
				return fmt.Errorf("%q is not key%svalue", e, sep)
			}
			m[k] = val
		}
		*f(s) = m
		return nil
	}
}

// nodeMetadata reads CONFIG_GRPC_XDS_NODE_METADATA as envoy's service
// does: entries split at commas, each at its first "=", the value
// possibly empty and holding more "=", the key possibly empty, nothing
// trimmed, empty entries skipped. An entry without "=", which envoy's
// service drops without a word (its own example, "key1:val1", among
// them), is refused instead.
func nodeMetadata(s *Settings, v string) error {
	m := map[string]string{}
	for _, e := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(e, "=")
		if !ok {
			if strings.TrimSpace(e) == "" {
				continue
			}
			return fmt.Errorf("entry %q has no '=' (envoy's service would leave it out of the node's metadata, silently); write key=value", e)
		}
		m[k] = val
	}
	s.XDS.NodeMetadata = m
	return nil
}

func intOrZero(f func(*Settings) *int) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		if strings.TrimSpace(v) == "" {
			*f(s) = 0
			return nil
		}
		return integer(f)(s, v)
	}
}

func ratio64(f func(*Settings) *float64) func(*Settings, string) error {
	return func(s *Settings, v string) error {
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || r < 0 || r > 1 {
			return errors.New("not a ratio between 0 and 1")
		}
		*f(s) = r
		return nil
	}
}

// boolNoEffect and intNoEffect accept a well-formed value that changes
// nothing, and refuse a malformed one, as envoy would.
func boolNoEffect() func(*Settings, string) error {
	return func(_ *Settings, v string) error {
		if _, err := strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			return errors.New("not a boolean (true or false)")
		}
		return errNoEffect
	}
}

func intNoEffect() func(*Settings, string) error {
	return func(_ *Settings, v string) error {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 0 {
			return errors.New("not an integer of 0 or more")
		}
		return errNoEffect
	}
}
