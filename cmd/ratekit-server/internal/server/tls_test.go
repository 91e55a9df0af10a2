package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/certtest"
)

// TestGRPCOverMutualTLS: with GRPC_SERVER_USE_TLS and
// GRPC_CLIENT_TLS_CACERT a client with its CA's certificate is answered,
// one without a certificate or with another CA's is refused, and a
// certificate rotated in its files is what the next connection sees.
func TestGRPCOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	caFile, certFile, keyFile := certtest.Files(t, dir, ca, "ratelimit.test")
	s, err := New(testSettings(t, "GRPC_SERVER_USE_TLS", "true", "GRPC_SERVER_TLS_CERT", certFile, "GRPC_SERVER_TLS_KEY", keyFile,
		"GRPC_CLIENT_TLS_CACERT", caFile, "GRPC_CLIENT_TLS_SAN", "envoy.test"), discard)
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
	addr := s.Addrs()[1]
	call := func(cert, key []byte) (*x509.Certificate, error) {
		pool := x509.NewCertPool()
		pool.AddCert(ca.Cert)
		conf := &tls.Config{RootCAs: pool, ServerName: "ratelimit.test"}
		if cert != nil {
			pair, err := tls.X509KeyPair(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			conf.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		}
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(conf)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var p peer.Peer
		resp, err := rlspb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, &rlspb.RateLimitRequest{
			Domain: "d", Descriptors: []*rlcommon.RateLimitDescriptor{descriptor("k", "v")},
		}, grpc.Peer(&p))
		if err != nil {
			return nil, err
		}
		if resp.OverallCode == rlspb.RateLimitResponse_UNKNOWN {
			t.Fatalf("answer %v", resp)
		}
		return p.AuthInfo.(credentials.TLSInfo).State.PeerCertificates[0], nil
	}
	good, goodKey := ca.Issue(t, "envoy", "envoy.test")
	first, err := call(good, goodKey)
	if err != nil {
		t.Fatalf("a client of the CA: %v", err)
	}
	if _, err := call(nil, nil); err == nil {
		t.Fatal("a client without a certificate was answered")
	}
	other := certtest.NewCA(t, "another")
	if _, err := call(other.Issue(t, "envoy", "envoy.test")); err == nil {
		t.Fatal("a client of another CA was answered")
	}
	if _, err := call(ca.Issue(t, "envoy", "other.test")); err == nil {
		t.Fatal("a client without GRPC_CLIENT_TLS_SAN's name was answered")
	}
	c, k := ca.Issue(t, "rotated", "ratelimit.test")
	certtest.Write(t, dir, "tls.key", k)
	certtest.Write(t, dir, "tls.crt", c)
	rotated, err := call(good, goodKey)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Subject.CommonName != "rotated" || first.Subject.CommonName == "rotated" {
		t.Fatalf("served %q then %q", first.Subject.CommonName, rotated.Subject.CommonName)
	}
}

func descriptor(kv ...string) *rlcommon.RateLimitDescriptor {
	d := &rlcommon.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}
