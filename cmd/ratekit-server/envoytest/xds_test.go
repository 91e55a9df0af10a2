package envoytest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/certtest"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/xdstest"
	"github.com/ratekit/ratekit/internal/redistest"
)

// TestCompareUnderEnvoyGateway starts both servers with Envoy Gateway's
// Deployment environment (its testdata/deployments/default.yaml, the
// addresses and files made here), configured over xDS by a
// go-control-plane server over mutual TLS serving snapshots of Envoy
// Gateway's translator's shape, and compares their answers over mutual
// TLS: the first snapshot, a new one, a broken one (both keep the last
// good one), and after the control plane restarts.
func TestCompareUnderEnvoyGateway(t *testing.T) {
	redistest.Require(t)
	dir := t.TempDir()
	ca := certtest.NewCA(t, "envoy-gateway")
	caFile, certFile, keyFile := certtest.Files(t, dir, ca, "envoy-ratelimit", "127.0.0.1")
	cpCert, cpKey := ca.Issue(t, "envoy-gateway", "envoy-gateway", "127.0.0.1")
	cpPair, err := tls.X509KeyPair(cpCert, cpKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cp := xdstest.Start(t, "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cpPair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	const node = "envoy-ratelimit"
	cp.Set(t, node, "v1", xdstest.EnvoyGateway(3, 4)...)

	clientCert, clientKey := ca.Issue(t, "envoy", "envoy")
	clientPair, err := tls.X509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	var clients [2]rlspb.RateLimitServiceClient
	for i, bin := range []string{bins.Envoy, bins.Ratekit} {
		rs := redistest.StartServer(t)
		env := map[string]string{
			"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_IGNOREDOTFILES": "true", "RUNTIME_WATCH_ROOT": "false",
			"LOG_LEVEL": "info", "USE_STATSD": "false",
			"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": cp.Addr, "CONFIG_GRPC_XDS_NODE_ID": node,
			"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": certFile, "GRPC_SERVER_TLS_KEY": keyFile, "GRPC_SERVER_TLS_CA_CERT": caFile,
			"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": certFile, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": keyFile,
			"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": caFile, "FORCE_START_WITHOUT_INITIAL_CONFIG": "true",
			"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": rs.Addr(),
			// answers, not outages, are compared
			"RATEKIT_TIMEOUT": "5s",
		}
		proc, err := proctest.Start([]string{"envoy", "ratekit"}[i], bin, env)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proc.Stop)
		cc, err := grpc.NewClient(proc.GRPC, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: pool, ServerName: "envoy-ratelimit", Certificates: []tls.Certificate{clientPair},
		})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		clients[i] = rlspb.NewRateLimitServiceClient(cc)
	}
	ask := func(r *rlspb.RateLimitRequest) exchanged {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		t0 := time.Now()
		er, eerr := clients[0].ShouldRateLimit(ctx, r)
		rr, rerr := clients[1].ShouldRateLimit(ctx, r)
		return exchanged{er, rr, eerr, rerr, time.Now().Unix() - t0.Unix()}
	}
	user := func(domain, id string) *rlspb.RateLimitRequest {
		return req(domain, desc(xdstest.Route, xdstest.Route, "rule-0-match-0", id))
	}
	cidr := func(domain, addr string) *rlspb.RateLimitRequest {
		return req(domain, desc(xdstest.Route, xdstest.Route, "masked_remote_address", addr, "rule-1-match-0", "GET"))
	}
	// until applies: both servers answer the first hit of a fresh user
	// with a limit of want
	until := func(step, domain string, want uint32) {
		t.Helper()
		for n, deadline := 0, time.Now().Add(60*time.Second); ; n++ {
			x := ask(user(domain, step+"-probe-"+proctest.Itoa(n)))
			if x.eerr == nil && x.rerr == nil && len(x.er.Statuses) == 1 && len(x.rr.Statuses) == 1 &&
				x.er.Statuses[0].GetCurrentLimit().GetRequestsPerUnit() == want && x.rr.Statuses[0].GetCurrentLimit().GetRequestsPerUnit() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not applied by both: envoy %s %v, ratekit %s %v", step, prototext.Format(x.er), x.eerr, prototext.Format(x.rr), x.rerr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	sequence := func(step string) {
		t.Helper()
		awaitWindow(10 * time.Second)
		for i := 0; i < 6; i++ {
			for _, domain := range []string{"default/eg/http", "default/eg/https"} {
				ask(user(domain, step)).check(t, step+" user "+domain)
				ask(cidr(domain, "10.0.0.0/8")).check(t, step+" cidr "+domain)
			}
		}
		ask(req("default/eg/none", desc("generic_key", "x"))).check(t, step+" unknown domain")
	}

	until("v1", "default/eg/http", 3)
	sequence("v1")

	cp.Set(t, node, "v2", xdstest.EnvoyGateway(5, 2)...)
	until("v2", "default/eg/http", 5)
	sequence("v2")

	cp.Set(t, node, "v3", append(xdstest.EnvoyGateway(7, 2), xdstest.Broken())...)
	waitNack := time.Now().Add(30 * time.Second)
	for !nackedBoth(cp) && time.Now().Before(waitNack) {
		time.Sleep(50 * time.Millisecond)
	}
	if !nackedBoth(cp) {
		t.Fatalf("the broken snapshot was not NACKed by both servers: %+v", cp.Replies())
	}
	sequence("broken")

	cp.Stop()
	sequence("control plane down")
	cp.Set(t, node, "v4", xdstest.EnvoyGateway(4, 2)...)
	cp.Restart(t)
	until("v4", "default/eg/http", 4)
	sequence("v4")
}

// nackedBoth: NACKs came on two streams, one per server.
func nackedBoth(cp *xdstest.ControlPlane) bool {
	streams := map[int64]bool{}
	for _, r := range cp.Replies() {
		if r.Error != "" {
			streams[r.Stream] = true
		}
	}
	return len(streams) >= 2
}
