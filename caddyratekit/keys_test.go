package caddyratekit_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/golang-jwt/jwt/v5"
)

// keysOf returns the Redis keys of miniredis, sorted.
func keysOf(mr *miniredis.Miniredis) []string {
	keys := mr.Keys()
	slices.Sort(keys)
	return keys
}

// Each key source gives the identity the library's key functions give,
// and the Redis key holds it.
func TestKeySources(t *testing.T) {
	secret := "s3cret-for-tests"
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pemFile := filepath.Join(t.TempDir(), "jwt.pem")
	if err := os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RATEKIT_TEST_JWT_SECRET", secret)
	t.Setenv("RATEKIT_TEST_JWT_PEM", pemFile)

	claims := jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
	hs, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	ed, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "mallory", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte("another secret"))
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name     string
		keys     string
		clientIP string
		header   map[string]string
		want     string // the Redis key; "" for none (the rule skipped)
	}{
		{"ip", `{"source":"ip"}`, "203.0.113.9", nil, "ratekit:r:{ip:203.0.113.9}"},
		{"ip is Caddy's client IP, never X-Forwarded-For", `{"source":"ip"}`, "203.0.113.9", map[string]string{"X-Forwarded-For": "192.0.2.66"}, "ratekit:r:{ip:203.0.113.9}"},
		{"ipv6 grouped by /64", `{"source":"ip"}`, "2001:db8:1:2:3:4:5:6", nil, "ratekit:r:{ip:2001:db8:1:2::/64}"},
		{"ipv6 by /48", `{"source":"ip","ipv6_prefix":48}`, "2001:db8:1:2:3:4:5:6", nil, "ratekit:r:{ip:2001:db8:1::/48}"},
		{"ipv4-mapped ipv6 is ipv4", `{"source":"ip"}`, "::ffff:203.0.113.9", nil, "ratekit:r:{ip:203.0.113.9}"},
		{"the peer without Caddy's variable", `{"source":"ip"}`, "", nil, "ratekit:r:{ip:192.0.2.1}"}, // httptest's RemoteAddr
		{"header", `{"source":"header","header":"X-Tenant"}`, "", map[string]string{"X-Tenant": "acme"}, "ratekit:r:{header:X-Tenant:acme}"},
		{"header absent", `{"source":"header","header":"X-Tenant"}`, "", nil, ""},
		{"apikey", `{"source":"apikey"}`, "", map[string]string{"X-API-Key": "k-123"}, "ratekit:r:{apikey:"},
		{"apikey by auth scheme", `{"source":"apikey","auth_scheme":"ApiKey"}`, "", map[string]string{"Authorization": "ApiKey k-123"}, "ratekit:r:{apikey:"},
		{"jwt hmac", `{"source":"jwt","secret":"{env.RATEKIT_TEST_JWT_SECRET}"}`, "", map[string]string{"Authorization": "Bearer " + hs}, "ratekit:r:{user:alice}"},
		{"jwt forged", `{"source":"jwt","secret":"{env.RATEKIT_TEST_JWT_SECRET}"}`, "", map[string]string{"Authorization": "Bearer " + forged}, ""},
		{"jwt forged, then ip", `{"source":"jwt","secret":"{env.RATEKIT_TEST_JWT_SECRET}"},{"source":"ip"}`, "203.0.113.9", map[string]string{"Authorization": "Bearer " + forged}, "ratekit:r:{ip:203.0.113.9}"},
		{"jwt ed25519", `{"source":"jwt","public_key_file":"{env.RATEKIT_TEST_JWT_PEM}"}`, "", map[string]string{"Authorization": "Bearer " + ed}, "ratekit:r:{user:alice}"},
		{"jwt ed25519 refuses an hmac token", `{"source":"jwt","public_key_file":"{env.RATEKIT_TEST_JWT_PEM}"}`, "", map[string]string{"Authorization": "Bearer " + hs}, ""},
		{"placeholder", `{"source":"placeholder","value":"{http.request.header.X-User}"}`, "", map[string]string{"X-User": "bob"}, "ratekit:r:{placeholder:bob}"},
		{"placeholder empty", `{"source":"placeholder","value":"{http.request.header.X-User}"}`, "", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mr, url := redisURL(t)
			h := fromJSON(t, handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"keys":[`+c.keys+`]}`, ""))
			provision(t, h)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			for k, v := range c.header {
				r.Header.Set(k, v)
			}
			a := serve(t, h, r, c.clientIP)
			if a.status != http.StatusOK {
				t.Fatalf("status %d (%v)", a.status, a.err)
			}
			keys := keysOf(mr)
			switch {
			case c.want == "" && len(keys) != 0:
				t.Errorf("Redis keys %q, want none: the rule should find no identity", keys)
			case c.want != "" && (len(keys) != 1 || !strings.HasPrefix(keys[0], c.want)):
				t.Errorf("Redis keys %q, want one starting %q", keys, c.want)
			}
			if v := c.header["X-API-Key"]; v != "" && strings.Contains(strings.Join(keys, " "), v) {
				t.Errorf("the raw API key is in Redis: %q", keys)
			}
		})
	}
}

func TestKeyProvisionErrors(t *testing.T) {
	_, url := redisURL(t)
	for _, c := range []struct{ keys, want string }{
		{`{"source":"jwt","secret":"{env.RATEKIT_TEST_UNSET}"}`, "secret"},
		{`{"source":"jwt","public_key_file":"/nonexistent/key.pem"}`, "no such file"},
		{`{"source":"jwt","secret":"x","algorithms":["RS256"]}`, "RS256"},
		{`{"source":"apikey","hash_secret":"{env.RATEKIT_TEST_UNSET}"}`, "hash_secret"},
	} {
		h := fromJSON(t, handlerJSON(url, `{"name":"r","limit":5,"period":60000000000,"keys":[`+c.keys+`]}`, ""))
		err := tryProvision(t, h)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("keys %s: error %v, want one mentioning %q", c.keys, err, c.want)
		}
	}
}
