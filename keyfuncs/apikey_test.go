package keyfuncs_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
)

const rawKey = "sk_live_QuYvWzRpLmNoKsTx"

var apiSecret = []byte("server-side pepper")

func sha256ID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "apikey:" + hex.EncodeToString(sum[:16])
}

func hmacID(secret []byte, key string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(key))
	return "apikey:" + hex.EncodeToString(m.Sum(nil)[:16])
}

func withQuery(r *fakeRequest, name, value string) *fakeRequest {
	r.query = url.Values{name: {value}}
	return r
}

func TestAPIKey(t *testing.T) {
	plain := must(keyfuncs.APIKey())
	peppered := must(keyfuncs.APIKey(keyfuncs.HashSecret(apiSecret)))
	sources := must(keyfuncs.APIKey(keyfuncs.FromAuthScheme("ApiKey"), keyfuncs.FromHeader("X-Key"), keyfuncs.FromQuery("api_key")))
	bearerKey := must(keyfuncs.APIKey(keyfuncs.FromAuthScheme("Bearer")))
	long := strings.Repeat("k", keyfuncs.MaxAPIKeyLen)

	tests := []struct {
		name string
		fn   core.KeyFunc
		req  core.Request
		want string // "" means no identity
	}{
		{"default header", plain, newRequest("", "X-API-Key", rawKey), sha256ID(rawKey)},
		{"header name case", plain, newRequest("", "x-api-key", rawKey), sha256ID(rawKey)},
		{"header trimmed", plain, newRequest("", "X-API-Key", " \t"+rawKey+" "), sha256ID(rawKey)},
		{"header first line", plain, newRequest("", "X-API-Key", rawKey, "X-API-Key", "other"), sha256ID(rawKey)},
		{"no key", plain, newRequest(""), ""},
		{"blank key", plain, newRequest("", "X-API-Key", "  "), ""},
		{"key at cap", plain, newRequest("", "X-API-Key", long), sha256ID(long)},
		{"key over cap", plain, newRequest("", "X-API-Key", long+"k"), ""},
		{"key 1 MiB", plain, newRequest("", "X-API-Key", strings.Repeat("k", 1<<20)), ""},
		{"non-utf8 key", plain, newRequest("", "X-API-Key", "\xff\xfe\x00"), sha256ID("\xff\xfe\x00")},
		{"hmac", peppered, newRequest("", "X-API-Key", rawKey), hmacID(apiSecret, rawKey)},
		{"auth scheme", sources, newRequest("", "Authorization", "ApiKey "+rawKey), sha256ID(rawKey)},
		{"auth scheme case", sources, newRequest("", "Authorization", "APIKEY "+rawKey), sha256ID(rawKey)},
		{"auth scheme kelvin sign", sources, newRequest("", "Authorization", "Api\u212aey "+rawKey), ""},
		{"auth other scheme", sources, newRequest("", "Authorization", "Bearer "+rawKey), ""},
		{"auth other scheme then header", sources, newRequest("", "Authorization", "Basic abc", "X-Key", rawKey), sha256ID(rawKey)},
		{"auth huge other scheme then header", sources, newRequest("", "Authorization", "Bearer "+strings.Repeat("a", 1<<20), "X-Key", rawKey), sha256ID(rawKey)},
		{"auth huge", sources, newRequest("", "Authorization", "ApiKey "+strings.Repeat("a", 1<<20), "X-Key", rawKey), ""},
		{"auth scheme empty", sources, newRequest("", "Authorization", "ApiKey "), ""},
		{"auth first wins", sources, newRequest("", "Authorization", "ApiKey "+rawKey, "X-Key", "other"), sha256ID(rawKey)},
		{"second source", sources, newRequest("", "X-Key", rawKey), sha256ID(rawKey)},
		{"query", sources, withQuery(newRequest(""), "api_key", rawKey), sha256ID(rawKey)},
		{"query over cap", sources, withQuery(newRequest(""), "api_key", long+"k"), ""},
		{"default header not read", sources, newRequest("", "X-API-Key", rawKey), ""},
		{"bearer as api key", bearerKey, newRequest("", "Authorization", "Bearer "+rawKey), sha256ID(rawKey)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := identity(t, tt.fn, tt.req)
			if want := tt.want; got != want {
				t.Errorf("identity = %q, want %q", got, want)
			}
			if strings.Contains(got, rawKey) || strings.Contains(got, long) {
				t.Errorf("identity %q contains the raw key", got)
			}
		})
	}
}

// TestAPIKeyNeverRaw checks that no identity's digest, and no error,
// contains the raw key, whatever the source.
func TestAPIKeyNeverRaw(t *testing.T) {
	fn := must(keyfuncs.APIKey(keyfuncs.FromHeader("X-API-Key"), keyfuncs.FromAuthScheme("ApiKey"), keyfuncs.FromQuery("key")))
	secret := must(keyfuncs.APIKey(keyfuncs.HashSecret(apiSecret), keyfuncs.FromHeader("X-API-Key"), keyfuncs.FromAuthScheme("ApiKey"), keyfuncs.FromQuery("key")))
	keys := []string{rawKey, "0123456789abcdef", "apikey:", strings.Repeat("Z", keyfuncs.MaxAPIKeyLen), strings.Repeat("Z", keyfuncs.MaxAPIKeyLen+1)}
	for _, key := range keys {
		for _, r := range []core.Request{
			newRequest("", "X-API-Key", key),
			newRequest("", "Authorization", "ApiKey "+key),
			withQuery(newRequest(""), "key", key),
		} {
			for _, f := range []core.KeyFunc{fn, secret} {
				id, err := f(r)
				digest := strings.TrimPrefix(id, "apikey:")
				if strings.Contains(digest, key) || err != nil && strings.Contains(err.Error(), key) {
					t.Errorf("key %.20q: identity %q, error %v", key, id, err)
				}
			}
		}
	}
}

func TestAPIKeyNetHTTP(t *testing.T) {
	fn := must(keyfuncs.APIKey(keyfuncs.FromQuery("api_key")))
	r := httptest.NewRequest("GET", "/?api_key="+url.QueryEscape(rawKey), nil)
	if got, want := identity(t, fn, adapter.HTTPRequest(r)), sha256ID(rawKey); got != want {
		t.Errorf("identity = %q, want %q", got, want)
	}
}

func TestAPIKeyConfig(t *testing.T) {
	tests := []struct {
		name    string
		opts    []keyfuncs.APIKeyOption
		wantErr bool
	}{
		{"default", nil, false},
		{"all sources", []keyfuncs.APIKeyOption{keyfuncs.FromHeader("X-Key"), keyfuncs.FromAuthScheme("Token"), keyfuncs.FromQuery("k")}, false},
		{"empty header", []keyfuncs.APIKeyOption{keyfuncs.FromHeader("")}, true},
		{"invalid header", []keyfuncs.APIKeyOption{keyfuncs.FromHeader("X-Key:")}, true},
		{"empty scheme", []keyfuncs.APIKeyOption{keyfuncs.FromAuthScheme("")}, true},
		{"scheme with space", []keyfuncs.APIKeyOption{keyfuncs.FromAuthScheme("Api Key")}, true},
		{"empty query", []keyfuncs.APIKeyOption{keyfuncs.FromQuery("")}, true},
		{"empty secret", []keyfuncs.APIKeyOption{keyfuncs.HashSecret(nil)}, true},
		{"nil option", []keyfuncs.APIKeyOption{nil}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, err := keyfuncs.APIKey(tt.opts...)
			if got, want := err != nil, tt.wantErr; got != want {
				t.Fatalf("error = %v, want error: %v", err, want)
			}
			if got, want := fn == nil, tt.wantErr; got != want {
				t.Errorf("nil function = %v, want %v", got, want)
			}
		})
	}
}

func TestAPIKeySecretCopied(t *testing.T) {
	secret := []byte("pepper")
	fn := must(keyfuncs.APIKey(keyfuncs.HashSecret(secret)))
	secret[0] = 'P'
	if got, want := identity(t, fn, newRequest("", "X-API-Key", rawKey)), hmacID([]byte("pepper"), rawKey); got != want {
		t.Errorf("identity = %q, want %q", got, want)
	}
}

func BenchmarkAPIKey(b *testing.B) {
	for _, bm := range []struct {
		name string
		opts []keyfuncs.APIKeyOption
	}{
		{"sha256", nil},
		{"hmac", []keyfuncs.APIKeyOption{keyfuncs.HashSecret(apiSecret)}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			fn := must(keyfuncs.APIKey(bm.opts...))
			r := newRequest("", "X-API-Key", rawKey)
			if got := identity(b, fn, r); !strings.HasPrefix(got, "apikey:") {
				b.Fatalf("identity = %q", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				_, _ = fn(r)
			}
		})
	}
}
