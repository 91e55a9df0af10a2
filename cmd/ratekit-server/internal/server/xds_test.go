package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/certtest"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/xdstest"
)

// waitFor polls cond until it holds, or fails the test after a generous
// deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func acked(cp *xdstest.ControlPlane, version string) bool {
	for _, r := range cp.Replies() {
		if r.Version == version && r.Error == "" {
			return true
		}
	}
	return false
}

func nacked(cp *xdstest.ControlPlane, substr string) bool {
	for _, r := range cp.Replies() {
		if r.Error != "" && strings.Contains(r.Error, substr) {
			return true
		}
	}
	return false
}

// TestConfigurationOverXDS runs the server with Envoy Gateway's settings
// against a control plane over mutual TLS: a snapshot is applied and
// ACKed, a new one replaces it, a broken one is NACKed with its reason
// while the last good one keeps answering, and after the control plane
// restarts the server keeps answering and takes the next snapshot.
func TestConfigurationOverXDS(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "envoy-gateway-ca")
	caFile, certFile, keyFile := certtest.Files(t, dir, ca, "envoy-ratelimit", "127.0.0.1")
	cpCert, cpKey := ca.Issue(t, "envoy-gateway", "envoy-gateway", "127.0.0.1")
	pair, err := tls.X509KeyPair(cpCert, cpKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cp := xdstest.Start(t, "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	const node = "envoy-ratelimit"
	cp.Set(t, node, "v1", xdstest.EnvoyGateway(2, 3)...)

	s, err := New(testSettings(t,
		"CONFIG_TYPE", "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL", cp.Addr, "CONFIG_GRPC_XDS_NODE_ID", node,
		"GRPC_SERVER_USE_TLS", "true", "GRPC_SERVER_TLS_CERT", certFile, "GRPC_SERVER_TLS_KEY", keyFile, "GRPC_SERVER_TLS_CA_CERT", caFile,
		"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", certFile, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", keyFile,
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", caFile, "FORCE_START_WITHOUT_INITIAL_CONFIG", "true",
		"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "50ms", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "50ms", "XDS_CLIENT_BACKOFF_MAX_INTERVAL", "200ms",
	), discard)
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

	cc, err := grpc.NewClient(s.Addrs()[1], grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "envoy-ratelimit"})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rls := rlspb.NewRateLimitServiceClient(cc)
	// user asks for one hit of a user's limit, as Envoy sends it: the
	// route's generic_key, then the header's value
	user := func(domain, id string) rlspb.RateLimitResponse_Code {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := rls.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: domain, Descriptors: []*rlcommon.RateLimitDescriptor{
			descriptor(xdstest.Route, xdstest.Route, "rule-0-match-0", id),
		}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.OverallCode
	}
	count := func(domain, id string) int {
		for n := 1; n < 100; n++ {
			if user(domain, id) == rlspb.RateLimitResponse_OVER_LIMIT {
				return n - 1
			}
		}
		return -1
	}
	// limitOf counts the hits a fresh user is allowed; a count that a
	// minute's end cut in two is taken again with another user (a
	// minute cannot end twice within the few calls of a count)
	limitOf := func(domain, id string) int {
		first := count(domain, id)
		if again := count(domain, id+"-again"); again == first {
			return first
		}
		return count(domain, id+"-third")
	}
	waitFor(t, "v1 ACKed", func() bool { return acked(cp, "v1") })
	if n := limitOf("default/eg/http", "alice"); n != 2 {
		t.Fatalf("v1: %d hits allowed, want 2", n)
	}
	if n := limitOf("default/eg/https", "alice"); n != 4 {
		t.Fatalf("v1, second listener: %d hits allowed, want 4", n)
	}

	cp.Set(t, node, "v2", xdstest.EnvoyGateway(5, 3)...)
	waitFor(t, "v2 ACKed", func() bool { return acked(cp, "v2") })
	if n := limitOf("default/eg/http", "bob"); n != 5 {
		t.Fatalf("v2: %d hits allowed, want 5", n)
	}
	// the live page names each domain's resource and the version in use,
	// and by default shows the offenders (alice, bob) only hashed
	_, body := get(t, s.Addrs()[2], "/ratekit/status.json")
	if !strings.Contains(body, `"default/eg/http"`) || !strings.Contains(body, "xDS RateLimitConfig") || !strings.Contains(body, ", version v2") {
		t.Errorf("the live page's domains at v2:\n%s", body)
	}
	if !strings.Contains(body, `"identity": "`) || strings.Contains(body, "alice") || strings.Contains(body, "bob") {
		t.Errorf("the live page's offenders, hashed by default:\n%s", body)
	}

	cp.Set(t, node, "v3", append(xdstest.EnvoyGateway(7, 3), xdstest.Broken())...)
	waitFor(t, "v3 NACKed", func() bool { return nacked(cp, "default/eg/broken") })
	if acked(cp, "v3") {
		t.Fatal("the broken snapshot was ACKed")
	}
	if n := limitOf("default/eg/http", "carol"); n != 5 {
		t.Fatalf("after a broken snapshot: %d hits allowed, want v2's 5", n)
	}
	if got := s.stats.ConfigLoadError.Value(); got < 1 {
		t.Fatalf("config_load_error %d", got)
	}

	streams := cp.Streams()
	cp.Stop()
	if n := limitOf("default/eg/http", "dave"); n != 5 {
		t.Fatalf("control plane down: %d hits allowed, want v2's 5", n)
	}
	cp.Set(t, node, "v4", xdstest.EnvoyGateway(4, 3)...)
	cp.Restart(t)
	waitFor(t, "a new stream", func() bool { return cp.Streams() > streams })
	waitFor(t, "v4 ACKed", func() bool { return acked(cp, "v4") })
	if n := limitOf("default/eg/http", "erin"); n != 4 {
		t.Fatalf("after the restart: %d hits allowed, want v4's 4", n)
	}
}
