package keyfuncs_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
)

func TestJWTClaim(t *testing.T) {
	k := testKeys()
	hs := must(keyfuncs.JWTClaimHMAC(hmacSecret, "plan"))
	hsIss := must(keyfuncs.JWTClaimHMAC(hmacSecret, "plan", keyfuncs.Issuer("https://auth.example")))
	ed := must(keyfuncs.JWTClaimPublicKey(k.ed25519.Public(), "plan"))
	custom := must(keyfuncs.JWTClaim(func(*jwt.Token) (any, error) { return hmacSecret, nil }, "plan", keyfuncs.Algorithms("HS384")))

	hs256 := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, hmacSecret, c) }
	valid := hs256(claims("plan", "pro"))
	parts := strings.Split(valid, ".")
	now := time.Now()
	tests := []struct {
		name string
		fn   func(core.Request) string
		req  core.Request
		want string
	}{
		{"valid", hs, bearer(valid), "pro"},
		{"no header", hs, newRequest("203.0.113.7:1"), ""},
		{"no plan claim", hs, bearer(hs256(claims())), ""},
		{"empty plan", hs, bearer(hs256(claims("plan", ""))), ""},
		{"number plan", hs, bearer(hs256(claims("plan", 7))), ""},
		{"list plan", hs, bearer(hs256(claims("plan", []string{"pro"}))), ""},
		{"object plan", hs, bearer(hs256(claims("plan", map[string]string{"name": "pro"}))), ""},
		{"other secret", hs, bearer(sign(t, jwt.SigningMethodHS256, []byte("another secret, not ours"), claims("plan", "pro"))), ""},
		{"forged payload", hs, bearer(parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"42","plan":"enterprise","exp":9999999999}`)) + "." + parts[2]), ""},
		{"alg none", hs, bearer(sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims("plan", "pro"))), ""},
		{"expired", hs, bearer(hs256(claims("plan", "pro", "exp", now.Add(-time.Hour).Unix()))), ""},
		{"no exp", hs, bearer(hs256(claims("plan", "pro", "exp", nil))), ""},
		{"not yet valid", hs, bearer(hs256(claims("plan", "pro", "nbf", now.Add(time.Hour).Unix()))), ""},
		{"oversized", hs, bearer(hs256(claims("plan", "pro", "pad", strings.Repeat("x", keyfuncs.MaxTokenLen)))), ""},
		{"issuer checked", hsIss, bearer(valid), ""},
		{"issuer matches", hsIss, bearer(hs256(claims("plan", "pro", "iss", "https://auth.example"))), "pro"},
		{"ed25519", ed, bearer(sign(t, jwt.SigningMethodEdDSA, k.ed25519, claims("plan", "team"))), "team"},
		{"ed25519 key, HMAC token", ed, bearer(valid), ""},
		{"custom key function", custom, bearer(sign(t, jwt.SigningMethodHS384, hmacSecret, claims("plan", "pro"))), "pro"},
		{"custom key function, other algorithm", custom, bearer(valid), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fn(tt.req); got != tt.want {
				t.Fatalf("plan = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestJWTClaimConfig(t *testing.T) {
	k := testKeys()
	tests := []struct {
		name string
		make func() (func(core.Request) string, error)
		want string
	}{
		{"empty claim", func() (func(core.Request) string, error) { return keyfuncs.JWTClaimHMAC(hmacSecret, "") }, "empty claim"},
		{"user claim option", func() (func(core.Request) string, error) {
			return keyfuncs.JWTClaimHMAC(hmacSecret, "plan", keyfuncs.Claim("uid"))
		}, "Claim option"},
		{"empty secret", func() (func(core.Request) string, error) { return keyfuncs.JWTClaimHMAC(nil, "plan") }, "non-empty secret"},
		{"public-key algorithm", func() (func(core.Request) string, error) {
			return keyfuncs.JWTClaimHMAC(hmacSecret, "plan", keyfuncs.Algorithms("RS256"))
		}, "does not match"},
		{"nil key function", func() (func(core.Request) string, error) { return keyfuncs.JWTClaim(nil, "plan") }, "key function"},
		{"no algorithms", func() (func(core.Request) string, error) {
			return keyfuncs.JWTClaim(func(*jwt.Token) (any, error) { return hmacSecret, nil }, "plan")
		}, "Algorithms"},
		{"unsupported key", func() (func(core.Request) string, error) { return keyfuncs.JWTClaimPublicKey("a string", "plan") }, "unsupported key"},
		{"wrong curve algorithm", func() (func(core.Request) string, error) {
			return keyfuncs.JWTClaimPublicKey(&k.ecdsa.PublicKey, "plan", keyfuncs.Algorithms("ES384"))
		}, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, err := tt.make()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one that says %q", err, tt.want)
			}
			if fn != nil {
				t.Fatal("a reader returned along with an error")
			}
		})
	}
}

// TestJWTClaimPlanLimits checks a plan claim end to end: under a Limiter,
// a pro token gets the pro limit; no token, a token without a plan, an
// unknown plan and a forged pro token get the rule's default limit.
func TestJWTClaimPlanLimits(t *testing.T) {
	store := must(memorystore.New())
	defer store.Close()
	lim := must(core.NewLimiter(store))
	defer lim.Close()
	plan := must(keyfuncs.JWTClaimHMAC(hmacSecret, "plan"))
	pro := core.PerMinute(5)
	limitOf := must(keyfuncs.PlanLimits(plan, map[string]core.Limit{"pro": pro}))
	ip := must(keyfuncs.IP())
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(2), LimitOf: limitOf, Key: ip}}
	if _, err := core.NewRuleSet(rules); err != nil {
		t.Fatal(err)
	}

	hs256 := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, hmacSecret, c) }
	tests := []struct {
		name    string
		auth    string
		allowed int // requests allowed before the first denial
	}{
		{"pro token", "Bearer " + hs256(claims("plan", "pro")), 5},
		{"no token", "", 2},
		{"no plan claim", "Bearer " + hs256(claims()), 2},
		{"unknown plan", "Bearer " + hs256(claims("plan", "platinum")), 2},
		{"forged pro token", "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("not the server's secret"), claims("plan", "pro")), 2},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// a client address of its own, so each case starts with a full quota
			req := newRequest(fmt.Sprintf("198.51.100.%d:1", i+1), "Authorization", tt.auth)
			for n := 1; n <= tt.allowed+1; n++ {
				d, err := lim.Check(context.Background(), req, rules)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := d.Allowed, n <= tt.allowed; got != want {
					t.Fatalf("request %d: allowed = %v, want %v", n, got, want)
				}
				if got, want := d.Results[0].Limit.Rate, tt.allowed; got != want {
					t.Fatalf("request %d: limit rate = %d, want %d", n, got, want)
				}
			}
		})
	}
}

func BenchmarkJWTClaim(b *testing.B) {
	plan := must(keyfuncs.JWTClaimHMAC(hmacSecret, "plan"))
	r := bearer(sign(b, jwt.SigningMethodHS256, hmacSecret, claims("plan", "pro")))
	if got := plan(r); got != "pro" {
		b.Fatalf("plan = %q", got)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = plan(r)
	}
}
