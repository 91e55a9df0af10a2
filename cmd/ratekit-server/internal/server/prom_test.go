package server

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
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

// TestResponseTimeInMilliseconds: with PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS
// the response time histogram observes milliseconds under its name and
// buckets. Each call includes a round trip to Redis over TCP, which takes
// more than 5 microseconds: in milliseconds, none is within the first
// bucket, 0.005 (in seconds, every call faster than 5 ms would be).
func TestResponseTimeInMilliseconds(t *testing.T) {
	s, err := New(testSettings(t, "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "true"), discard)
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
	cc, err := grpc.NewClient(s.Addrs()[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}}
	const calls = 20
	for range calls {
		if _, err := rlspb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, req, grpc.WaitForReady(true)); err != nil {
			t.Fatal(err)
		}
	}
	_, body := get(t, s.Addrs()[3], "/metrics")
	for _, line := range []string{
		`ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="0.005"} 0`,
		`ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"} ` + strconv.Itoa(calls),
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("no %q in\n%s", line, body)
		}
	}
}
