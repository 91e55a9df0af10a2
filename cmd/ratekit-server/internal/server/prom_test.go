package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPrometheusMapperFile: with PROMETHEUS_MAPPER_YAML the series on
// /metrics are the mapping's.
func TestPrometheusMapperFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.yaml")
	mapping := "mappings:\n  - match: \"ratelimit.service.config_load_success\"\n    name: \"eg_config_loads\"\n    match_metric_type: counter\n"
	if err := os.WriteFile(path, []byte(mapping), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(testSettings(t, "PROMETHEUS_MAPPER_YAML", path), discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-done
	}()
	if c, body := get(t, s.Addrs()[3], "/metrics"); c != 200 || !strings.Contains(body, "eg_config_loads 1") || strings.Contains(body, "ratelimit_service_config_load_success") {
		t.Fatalf("/metrics: %d\n%s", c, body)
	}
}
