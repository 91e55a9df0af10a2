//go:build linux

package redisconn_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/redisconn"
	"github.com/ratekit/ratekit/internal/redistest"
)

// issuer is a certificate authority made for a test.
type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T, name string) *issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &issuer{cert, key}
}

// issue writes a server certificate for ips and names, and its key, into
// dir, and returns their paths.
func (ca *issuer) issue(t *testing.T, dir, base string, ips []net.IP, names ...string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: base},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: ips, DNSNames: names,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	writePEM(t, certPath, "CERTIFICATE", der)
	writePEM(t, keyPath, "EC PRIVATE KEY", kder)
	return certPath, keyPath
}

func (ca *issuer) write(t *testing.T, path string) {
	t.Helper()
	writePEM(t, path, "CERTIFICATE", ca.cert.Raw)
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestTLSVerifiesTheChain runs a real redis-server with TLS, presenting
// in turn a certificate from the configured CA for its address, one from
// that CA for another name, and one from a foreign CA for its address.
// REDIS_TLS_SKIP_HOSTNAME_VERIFICATION accepts the second and nothing
// else: it relaxes the name check, never the chain's.
func TestTLSVerifiesTheChain(t *testing.T) {
	redistest.Require(t)
	dir := t.TempDir()
	ours, foreign := newCA(t, "ours"), newCA(t, "foreign")
	caPath := filepath.Join(dir, "ca.crt")
	ours.write(t, caPath)
	loop := []net.IP{net.IPv4(127, 0, 0, 1)}
	right, rightKey := ours.issue(t, dir, "right", loop)
	other, otherKey := ours.issue(t, dir, "other", nil, "other.example")
	alien, alienKey := foreign.issue(t, dir, "alien", loop)

	tlsAddr, err := proctest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	_, tlsPort, _ := net.SplitHostPort(tlsAddr)
	rs := redistest.StartServer(t, "--tls-port", tlsPort, "--tls-cert-file", right, "--tls-key-file", rightKey,
		"--tls-ca-cert-file", caPath, "--tls-auth-clients", "no")
	plain := rs.Client(t)
	ctx := context.Background()

	for _, tc := range []struct {
		name, cert, key string
		skipHost        bool
		ok              bool
	}{
		{"the right certificate", right, rightKey, false, true},
		{"the right certificate, hostname option on", right, rightKey, true, true},
		{"another name", other, otherKey, false, false},
		{"another name, hostname option on", other, otherKey, true, true},
		{"a foreign CA", alien, alienKey, false, false},
		{"a foreign CA, hostname option on", alien, alienKey, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// both at once: a certificate without its key is refused
			if err := plain.Do(ctx, "CONFIG", "SET", "tls-cert-file", tc.cert, "tls-key-file", tc.key).Err(); err != nil {
				t.Fatal(err)
			}
			s, err := redisconn.Open(set(t, "REDIS_SOCKET_TYPE", "tcp", "REDIS_URL", tlsAddr, "REDIS_TLS", "true",
				"REDIS_TLS_CACERT", caPath, "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", strconv.FormatBool(tc.skipHost),
				"REDIS_TIMEOUT", "5s"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err = s.Client.Ping(pctx).Err()
			if tc.ok && err != nil {
				t.Fatalf("PING refused: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("PING answered: the certificate was accepted")
			}
		})
	}
}
