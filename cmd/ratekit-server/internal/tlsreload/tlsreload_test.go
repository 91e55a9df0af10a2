package tlsreload_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/certtest"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/tlsreload"
)

// serve accepts connections with conf, and on each completed handshake
// writes one byte.
func serve(t *testing.T, conf *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = c.Write([]byte{1})
				}
			}()
		}
	}()
	return lis.Addr().String()
}

// dial connects with conf and returns the server's certificate, or the
// error of the handshake or of the first read (where TLS 1.3 reports a
// refused client certificate).
func dial(addr string, conf *tls.Config) (*x509.Certificate, error) {
	c, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.Read(make([]byte, 1)); err != nil {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0], nil
}

func clientConf(t *testing.T, ca *certtest.CA, cert, key []byte) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	c := &tls.Config{RootCAs: pool, ServerName: "ratelimit.test"}
	if cert != nil {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		// presented whatever CAs the server names, as a client that
		// does not look would
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return c
}

func TestRotationReachesTheNextConnection(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	_, certFile, keyFile := certtest.Files(t, dir, ca, "ratelimit.test")
	conf, err := tlsreload.Server(tlsreload.Files{Cert: certFile, Key: keyFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, conf)
	first, err := dial(addr, clientConf(t, ca, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	again, err := dial(addr, clientConf(t, ca, nil, nil))
	if err != nil || again.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("unchanged files, another certificate: %v %v", again, err)
	}
	// Kubernetes swaps the files; a half-written pair (new certificate,
	// old key) keeps the old one served until the key follows
	c, k := ca.Issue(t, "rotated", "ratelimit.test")
	certtest.Write(t, dir, "tls.crt", c)
	half, err := dial(addr, clientConf(t, ca, nil, nil))
	if err != nil || half.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("a certificate without its key: %v %v", half, err)
	}
	certtest.Write(t, dir, "tls.key", k)
	rotated, err := dial(addr, clientConf(t, ca, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Subject.CommonName != "rotated" {
		t.Fatalf("after the rotation the server presents %q", rotated.Subject.CommonName)
	}
}

func TestClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "ca")
	caFile, certFile, keyFile := certtest.Files(t, dir, ca, "ratelimit.test")
	other := certtest.NewCA(t, "another")
	for _, tc := range []struct {
		name    string
		san     string
		client  func() (cert, key []byte)
		refused string
	}{
		{"no certificate", "", func() ([]byte, []byte) { return nil, nil }, "certificate required"},
		{"another CA's", "", func() ([]byte, []byte) { return other.Issue(t, "x", "envoy.test") }, "unknown certificate authority"},
		{"its CA's", "", func() ([]byte, []byte) { return ca.Issue(t, "x", "envoy.test") }, ""},
		{"its CA's, the SAN asked for", "envoy.test", func() ([]byte, []byte) { return ca.Issue(t, "x", "envoy.test") }, ""},
		{"its CA's, another SAN", "gateway.test", func() ([]byte, []byte) { return ca.Issue(t, "x", "envoy.test") }, "bad certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := tlsreload.Server(tlsreload.Files{Cert: certFile, Key: keyFile, CA: caFile, SAN: tc.san}, nil)
			if err != nil {
				t.Fatal(err)
			}
			addr := serve(t, conf)
			cert, key := tc.client()
			_, err = dial(addr, clientConf(t, ca, cert, key))
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("error %v, want one saying %q", err, tc.refused)
			}
		})
	}
}

func TestMissingFiles(t *testing.T) {
	if _, err := tlsreload.Server(tlsreload.Files{Cert: "x"}, nil); !errors.Is(err, tlsreload.ErrNoFiles) {
		t.Fatal(err)
	}
	if _, err := tlsreload.Server(tlsreload.Files{Cert: "/nonexistent/c", Key: "/nonexistent/k"}, nil); err == nil {
		t.Fatal("missing files accepted")
	}
}
