package settings_test

import (
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
		{[]string{"CONFIG_TYPE", "GRPC_XDS_SOTW"}, "CONFIG_TYPE"},
		{[]string{"REDIS_PERSECOND", "true"}, "a second Redis"},
		{[]string{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "CREATE"}, "REDIS_POOL_ON_EMPTY_BEHAVIOR"},
		{[]string{"TRACING_ENABLED", "true"}, "tracing"},
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
