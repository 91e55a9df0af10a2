package redisconn_test

import (
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/redisconn"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/settings"
)

func set(t *testing.T, kv ...string) settings.Settings {
	t.Helper()
	m := map[string]string{"RUNTIME_SUBDIRECTORY": "x"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	s, _, err := settings.Load(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOpen(t *testing.T) {
	mr := miniredis.RunT(t)
	for _, tc := range []struct {
		kv   []string
		want string // the client's type, or an error's text
	}{
		{[]string{"REDIS_SOCKET_TYPE", "tcp", "REDIS_URL", mr.Addr(), "REDIS_AUTH", "u:p"}, "*redis.Client"},
		{[]string{"REDIS_TYPE", "CLUSTER", "REDIS_URL", "127.0.0.1:1,127.0.0.1:2"}, "*redis.ClusterClient"},
		{[]string{"REDIS_TYPE", "SENTINEL", "REDIS_URL", "mymaster,127.0.0.1:1"}, "*redis.Client"},
		{[]string{"REDIS_TYPE", "SENTINEL", "REDIS_URL", "127.0.0.1:1"}, "the master's name and then the Sentinels"},
		{[]string{"REDIS_TLS", "true", "REDIS_TLS_CACERT", "/nonexistent"}, "REDIS_TLS_CACERT"},
	} {
		s, err := redisconn.Open(set(t, tc.kv...))
		if err != nil {
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: %v, want %q", tc.kv, err, tc.want)
			}
			continue
		}
		got := ""
		switch c := s.Client.(type) {
		case *redis.Client:
			got = "*redis.Client"
			if o := c.Options(); !o.ContextTimeoutEnabled || o.MaxRetries > 0 {
				t.Errorf("%v: ContextTimeoutEnabled %v, MaxRetries %d", tc.kv, o.ContextTimeoutEnabled, o.MaxRetries)
			}
		case *redis.ClusterClient:
			got = "*redis.ClusterClient"
		}
		if got != tc.want {
			t.Errorf("%v: client %s, want %s", tc.kv, got, tc.want)
		}
		s.Close()
	}
}
