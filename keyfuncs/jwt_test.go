package keyfuncs_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
)

var hmacSecret = []byte("0123456789abcdef0123456789abcdef")

var testKeys = sync.OnceValue(func() (k struct {
	rsa     *rsa.PrivateKey
	rsaPEM  []byte
	ecdsa   *ecdsa.PrivateKey
	ed25519 ed25519.PrivateKey
}) {
	var err error
	if k.rsa, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		panic(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
	if err != nil {
		panic(err)
	}
	k.rsaPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if k.ecdsa, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	if _, k.ed25519, err = ed25519.GenerateKey(rand.Reader); err != nil {
		panic(err)
	}
	return k
})

// claims returns valid claims for user "42", changed by the given
// name-value pairs; a nil value deletes the claim.
func claims(pairs ...any) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{
		"sub": "42",
		"iat": now.Unix(),
		"nbf": now.Unix(),
		"exp": now.Add(time.Hour).Unix(),
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		name := pairs[i].(string)
		if pairs[i+1] == nil {
			delete(c, name)
			continue
		}
		c[name] = pairs[i+1]
	}
	return c
}

func sign(t testing.TB, m jwt.SigningMethod, key any, c jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bearer(token string) *fakeRequest {
	return newRequest("203.0.113.7:1", "Authorization", "Bearer "+token)
}

func TestJWT(t *testing.T) {
	k := testKeys()
	hs := must(keyfuncs.JWTHMAC(hmacSecret))
	hsNoLeeway := must(keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Leeway(0)))
	hsExpOptional := must(keyfuncs.JWTHMAC(hmacSecret, keyfuncs.ExpirationOptional()))
	hsUID := must(keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Claim("uid")))
	hsIssAud := must(keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Issuer("https://auth.example"), keyfuncs.Audience("api", "web")))
	hs512 := must(keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Algorithms("HS512")))
	rs := must(keyfuncs.JWTPublicKey(&k.rsa.PublicKey))
	ps := must(keyfuncs.JWTPublicKey(&k.rsa.PublicKey, keyfuncs.Algorithms("PS256")))
	es := must(keyfuncs.JWTPublicKey(&k.ecdsa.PublicKey))
	ed := must(keyfuncs.JWTPublicKey(k.ed25519.Public()))
	// A careless key function that hands out the PEM whatever the algorithm.
	naive := must(keyfuncs.JWT(func(*jwt.Token) (any, error) { return k.rsaPEM, nil }, keyfuncs.Algorithms("RS256")))
	naivePub := must(keyfuncs.JWT(func(*jwt.Token) (any, error) { return &k.rsa.PublicKey, nil }, keyfuncs.Algorithms("RS256", "ES256")))
	failing := must(keyfuncs.JWT(func(*jwt.Token) (any, error) { return nil, errors.New("no key") }, keyfuncs.Algorithms("HS256")))

	now := time.Now()
	hs256 := func(c jwt.MapClaims) string { return sign(t, jwt.SigningMethodHS256, hmacSecret, c) }
	valid := hs256(claims())
	parts := strings.Split(valid, ".")
	forgedPayload := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"admin","exp":9999999999}`)) + "." + parts[2]
	none := sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims())
	noneEmptySig := strings.Join(strings.Split(none, ".")[:2], ".") + "."
	padding := strings.Repeat("x", keyfuncs.MaxTokenLen)
	oversized := hs256(claims("pad", padding))
	justFits := hs256(claims("pad", padding[:keyfuncs.MaxTokenLen*3/4-200]))

	tests := []struct {
		name string
		fn   core.KeyFunc
		req  core.Request
		want string // "" means no identity
	}{
		{"hs256 valid", hs, bearer(valid), "user:42"},
		{"scheme case-insensitive", hs, newRequest("", "Authorization", "bearer "+valid), "user:42"},
		{"scheme upper case", hs, newRequest("", "Authorization", "BEARER "+valid), "user:42"},
		{"extra whitespace", hs, newRequest("", "Authorization", "Bearer \t "+valid+"  "), "user:42"},
		{"no header", hs, newRequest(""), ""},
		{"empty bearer", hs, newRequest("", "Authorization", "Bearer "), ""},
		{"scheme only", hs, newRequest("", "Authorization", "Bearer"), ""},
		{"no space", hs, newRequest("", "Authorization", "Bearer"+valid), ""},
		{"basic scheme", hs, newRequest("", "Authorization", "Basic dXNlcjpwYXNz"), ""},
		{"two segments", hs, bearer(parts[0] + "." + parts[1]), ""},
		{"four segments", hs, bearer(valid + ".x"), ""},
		{"garbage", hs, bearer("\xff\xfe.\x00.\"{"), ""},
		{"wrong signature", hs, bearer(sign(t, jwt.SigningMethodHS256, []byte("another secret of enough length!"), claims())), ""},
		{"forged payload", hs, bearer(forgedPayload), ""},
		{"truncated signature", hs, bearer(valid[:len(valid)-2]), ""},
		{"alg none", hs, bearer(none), ""},
		{"alg none empty signature", hs, bearer(noneEmptySig), ""},
		{"alg none to rsa", rs, bearer(none), ""},
		{"hs256 signed with rsa public key", rs, bearer(sign(t, jwt.SigningMethodHS256, k.rsaPEM, claims())), ""},
		{"hs256 signed with rsa public key naive keyfunc", naive, bearer(sign(t, jwt.SigningMethodHS256, k.rsaPEM, claims())), ""},
		{"hs256 to rsa public key object", naivePub, bearer(sign(t, jwt.SigningMethodHS256, k.rsaPEM, claims())), ""},
		{"hs512 not allowed", hs, bearer(sign(t, jwt.SigningMethodHS512, hmacSecret, claims())), ""},
		{"hs512 allowed", hs512, bearer(sign(t, jwt.SigningMethodHS512, hmacSecret, claims())), "user:42"},
		{"hs256 not allowed by hs512", hs512, bearer(valid), ""},
		{"key function fails", failing, bearer(valid), ""},
		{"rs256 valid", rs, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, claims())), "user:42"},
		{"rs256 naive keyfunc", naivePub, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, claims())), "user:42"},
		{"rs256 to hmac", hs, bearer(sign(t, jwt.SigningMethodRS256, k.rsa, claims())), ""},
		{"ps256 not allowed by default", rs, bearer(sign(t, jwt.SigningMethodPS256, k.rsa, claims())), ""},
		{"ps256 allowed", ps, bearer(sign(t, jwt.SigningMethodPS256, k.rsa, claims())), "user:42"},
		{"es256 valid", es, bearer(sign(t, jwt.SigningMethodES256, k.ecdsa, claims())), "user:42"},
		{"es256 to rsa", naivePub, bearer(sign(t, jwt.SigningMethodES256, k.ecdsa, claims())), ""},
		{"eddsa valid", ed, bearer(sign(t, jwt.SigningMethodEdDSA, k.ed25519, claims())), "user:42"},
		{"expired", hs, bearer(hs256(claims("exp", now.Add(-time.Hour).Unix()))), ""},
		{"expired within leeway", hs, bearer(hs256(claims("exp", now.Add(-10*time.Second).Unix()))), "user:42"},
		{"expired without leeway", hsNoLeeway, bearer(hs256(claims("exp", now.Add(-10*time.Second).Unix()))), ""},
		{"exp not a number", hs, bearer(hs256(claims("exp", "tomorrow"))), ""},
		{"no exp", hs, bearer(hs256(claims("exp", nil))), ""},
		{"no exp optional", hsExpOptional, bearer(hs256(claims("exp", nil))), "user:42"},
		{"expired optional", hsExpOptional, bearer(hs256(claims("exp", now.Add(-time.Hour).Unix()))), ""},
		{"nbf in the future", hs, bearer(hs256(claims("nbf", now.Add(time.Hour).Unix()))), ""},
		{"nbf within leeway", hs, bearer(hs256(claims("nbf", now.Add(10*time.Second).Unix()))), "user:42"},
		{"iat in the future", hs, bearer(hs256(claims("iat", now.Add(time.Hour).Unix()))), ""},
		{"missing claim", hs, bearer(hs256(claims("sub", nil))), ""},
		{"empty claim", hs, bearer(hs256(claims("sub", ""))), ""},
		{"claim number", hsUID, bearer(hs256(claims("uid", 42))), "user:42"},
		{"claim number exponent", hsUID, bearer(hs256(claims("uid", 1e21))), "user:1000000000000000000000"},
		{"claim number fraction", hsUID, bearer(hs256(claims("uid", 12.5))), "user:12.5"},
		{"claim number big", hsUID, bearer(hs256(claims("uid", jsonNumber("123456789012345678901234567890")))), "user:123456789012345678901234567890"},
		{"claim number exponent spelling", hsUID, bearer(hs256(claims("uid", jsonNumber("4.2E1")))), "user:42"},
		{"claim number negative zero", hsUID, bearer(hs256(claims("uid", jsonNumber("-0")))), "user:0"},
		{"claim number overflow", hsUID, bearer(hs256(claims("uid", jsonNumber("1e999")))), ""},
		{"claim bool", hsUID, bearer(hs256(claims("uid", true))), ""},
		{"claim object", hsUID, bearer(hs256(claims("uid", map[string]any{"id": 1}))), ""},
		{"claim array", hsUID, bearer(hs256(claims("uid", []string{"1"}))), ""},
		{"claim missing", hsUID, bearer(valid), ""},
		{"issuer and audience", hsIssAud, bearer(hs256(claims("iss", "https://auth.example", "aud", "web"))), "user:42"},
		{"audience list", hsIssAud, bearer(hs256(claims("iss", "https://auth.example", "aud", []string{"x", "api"}))), "user:42"},
		{"wrong issuer", hsIssAud, bearer(hs256(claims("iss", "https://evil.example", "aud", "web"))), ""},
		{"missing issuer", hsIssAud, bearer(hs256(claims("aud", "web"))), ""},
		{"wrong audience", hsIssAud, bearer(hs256(claims("iss", "https://auth.example", "aud", "other"))), ""},
		{"missing audience", hsIssAud, bearer(hs256(claims("iss", "https://auth.example"))), ""},
		{"oversized token", hs, bearer(oversized), ""},
		{"oversized header", hs, newRequest("", "Authorization", "Bearer "+strings.Repeat(" ", 1<<20)+valid), ""},
		{"token just under the cap", hs, bearer(justFits), "user:42"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := identity(t, tt.fn, tt.req), tt.want; got != want {
				t.Errorf("identity = %q, want %q", got, want)
			}
		})
	}
	if len(justFits) > keyfuncs.MaxTokenLen || len(oversized) <= keyfuncs.MaxTokenLen {
		t.Fatalf("size fixtures wrong: %d and %d bytes", len(justFits), len(oversized))
	}
}

type jsonNumber string

func (n jsonNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }

func TestJWTErrors(t *testing.T) {
	hs := must(keyfuncs.JWTHMAC(hmacSecret))
	expired := sign(t, jwt.SigningMethodHS256, hmacSecret, claims("exp", time.Now().Add(-time.Hour).Unix()))
	_, err := hs(bearer(expired))
	if !errors.Is(err, core.ErrNoIdentity) || !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("error %q wraps neither core.ErrNoIdentity nor jwt.ErrTokenExpired", err)
	}
	_, err = hs(bearer(sign(t, jwt.SigningMethodHS256, []byte("x"), claims())))
	if !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		t.Errorf("error %q does not wrap jwt.ErrTokenSignatureInvalid", err)
	}
}

func TestJWTConfig(t *testing.T) {
	k := testKeys()
	kf := func(*jwt.Token) (any, error) { return hmacSecret, nil }
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		build   func() (core.KeyFunc, error)
		wantErr bool
	}{
		{"jwt hs256", func() (core.KeyFunc, error) { return keyfuncs.JWT(kf, keyfuncs.Algorithms("HS256")) }, false},
		{"jwt asymmetric mix", func() (core.KeyFunc, error) { return keyfuncs.JWT(kf, keyfuncs.Algorithms("RS256", "ES256", "EdDSA")) }, false},
		{"jwt nil keyfunc", func() (core.KeyFunc, error) { return keyfuncs.JWT(nil, keyfuncs.Algorithms("HS256")) }, true},
		{"jwt no algorithms", func() (core.KeyFunc, error) { return keyfuncs.JWT(kf) }, true},
		{"jwt empty algorithms", func() (core.KeyFunc, error) { return keyfuncs.JWT(kf, keyfuncs.Algorithms()) }, true},
		{"jwt none", func() (core.KeyFunc, error) { return keyfuncs.JWT(kf, keyfuncs.Algorithms("none")) }, true},
		{"jwt None", func() (core.KeyFunc, error) { return keyfuncs.JWT(kf, keyfuncs.Algorithms("HS256", "None")) }, true},
		{"jwt hs rs mix", func() (core.KeyFunc, error) { return keyfuncs.JWT(kf, keyfuncs.Algorithms("HS256", "RS256")) }, true},
		{"jwt unknown", func() (core.KeyFunc, error) { return keyfuncs.JWT(kf, keyfuncs.Algorithms("hs256")) }, true},
		{"jwt nil option", func() (core.KeyFunc, error) { return keyfuncs.JWT(kf, keyfuncs.Algorithms("HS256"), nil) }, true},
		{"hmac", func() (core.KeyFunc, error) { return keyfuncs.JWTHMAC(hmacSecret) }, false},
		{"hmac all", func() (core.KeyFunc, error) {
			return keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Algorithms("HS256", "HS384", "HS512"))
		}, false},
		{"hmac empty secret", func() (core.KeyFunc, error) { return keyfuncs.JWTHMAC(nil) }, true},
		{"hmac rs256", func() (core.KeyFunc, error) { return keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Algorithms("RS256")) }, true},
		{"rsa", func() (core.KeyFunc, error) { return keyfuncs.JWTPublicKey(&k.rsa.PublicKey) }, false},
		{"rsa all", func() (core.KeyFunc, error) {
			return keyfuncs.JWTPublicKey(&k.rsa.PublicKey, keyfuncs.Algorithms("RS256", "RS512", "PS384"))
		}, false},
		{"rsa hs256", func() (core.KeyFunc, error) {
			return keyfuncs.JWTPublicKey(&k.rsa.PublicKey, keyfuncs.Algorithms("HS256"))
		}, true},
		{"rsa private key", func() (core.KeyFunc, error) { return keyfuncs.JWTPublicKey(k.rsa) }, true},
		{"rsa nil", func() (core.KeyFunc, error) { return keyfuncs.JWTPublicKey((*rsa.PublicKey)(nil)) }, true},
		{"ecdsa es384 on p-256", func() (core.KeyFunc, error) {
			return keyfuncs.JWTPublicKey(&k.ecdsa.PublicKey, keyfuncs.Algorithms("ES384"))
		}, true},
		{"ecdsa p-224", func() (core.KeyFunc, error) { return keyfuncs.JWTPublicKey(&p224.PublicKey) }, true},
		{"ed25519 short", func() (core.KeyFunc, error) { return keyfuncs.JWTPublicKey(ed25519.PublicKey{1, 2}) }, true},
		{"pem bytes", func() (core.KeyFunc, error) { return keyfuncs.JWTPublicKey(k.rsaPEM) }, true},
		{"nil key", func() (core.KeyFunc, error) { return keyfuncs.JWTPublicKey(nil) }, true},
		{"negative leeway", func() (core.KeyFunc, error) { return keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Leeway(-time.Second)) }, true},
		{"empty issuer", func() (core.KeyFunc, error) { return keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Issuer("")) }, true},
		{"no audience", func() (core.KeyFunc, error) { return keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Audience()) }, true},
		{"empty audience", func() (core.KeyFunc, error) { return keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Audience("a", "")) }, true},
		{"empty claim", func() (core.KeyFunc, error) { return keyfuncs.JWTHMAC(hmacSecret, keyfuncs.Claim("")) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, err := tt.build()
			if got, want := err != nil, tt.wantErr; got != want {
				t.Fatalf("error = %v, want error: %v", err, want)
			}
			if got, want := fn == nil, tt.wantErr; got != want {
				t.Errorf("nil function = %v, want %v", got, want)
			}
		})
	}
}

func TestJWTSecretCopied(t *testing.T) {
	secret := []byte("a secret that the caller reuses")
	fn := must(keyfuncs.JWTHMAC(secret))
	token := sign(t, jwt.SigningMethodHS256, secret, claims())
	secret[0] ^= 0xff
	if got, want := identity(t, fn, bearer(token)), "user:42"; got != want {
		t.Errorf("identity = %q, want %q", got, want)
	}
}

func TestJWTConcurrent(t *testing.T) {
	fn := must(keyfuncs.JWTHMAC(hmacSecret))
	good := bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claims()))
	bad := bearer(sign(t, jwt.SigningMethodHS256, hmacSecret, claims("exp", int64(1))))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 200 {
				if i%2 == 0 {
					if id, err := fn(good); err != nil || id != "user:42" {
						t.Errorf("identity = %q, %v", id, err)
						return
					}
				} else if _, err := fn(bad); err == nil {
					t.Error("expired token accepted")
					return
				}
			}
		})
	}
	wg.Wait()
}

type ctxKey struct{}

type userID struct{ n int }

func (u *userID) String() string { return "u" + string(rune('0'+u.n)) }

func TestContextUser(t *testing.T) {
	withValue := func(v any) *fakeRequest {
		r := newRequest("203.0.113.7:1")
		r.ctx = context.WithValue(context.Background(), ctxKey{}, v)
		return r
	}
	fromFunc := keyfuncs.ContextUser(func(ctx context.Context) (string, bool) {
		s, ok := ctx.Value(ctxKey{}).(string)
		return s, ok
	})
	fromValue := keyfuncs.ContextUserValue(ctxKey{})

	tests := []struct {
		name string
		fn   core.KeyFunc
		req  core.Request
		want string
	}{
		{"func", fromFunc, withValue("alice"), "user:alice"},
		{"func empty", fromFunc, withValue(""), ""},
		{"func missing", fromFunc, newRequest(""), ""},
		{"value string", fromValue, withValue("alice"), "user:alice"},
		{"value int", fromValue, withValue(42), "user:42"},
		{"value int64", fromValue, withValue(int64(-7)), "user:-7"},
		{"value uint64", fromValue, withValue(uint64(1 << 63)), "user:9223372036854775808"},
		{"value stringer", fromValue, withValue(&userID{3}), "user:u3"},
		{"value nil stringer", fromValue, withValue((*userID)(nil)), ""},
		{"value float", fromValue, withValue(1.5), ""},
		{"value missing", fromValue, newRequest(""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := identity(t, tt.fn, tt.req), tt.want; got != want {
				t.Errorf("identity = %q, want %q", got, want)
			}
		})
	}

	_, err := keyfuncs.ContextUser(nil)(newRequest(""))
	if err == nil || errors.Is(err, core.ErrNoIdentity) {
		t.Errorf("ContextUser(nil) error = %v, want a configuration error", err)
	}
}

func BenchmarkJWT(b *testing.B) {
	fn := must(keyfuncs.JWTHMAC(hmacSecret))
	r := bearer(sign(b, jwt.SigningMethodHS256, hmacSecret, claims()))
	if got := identity(b, fn, r); got != "user:42" {
		b.Fatalf("identity = %q", got)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = fn(r)
	}
}
