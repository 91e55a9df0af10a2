package keyfuncs_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
)

var errBroken = errors.New("store unreachable")

func constant(id string, err error) core.KeyFunc {
	return func(core.Request) (string, error) { return id, err }
}

var noIdentity = constant("", fmt.Errorf("nothing here: %w", core.ErrNoIdentity))

func TestFirst(t *testing.T) {
	user := must(keyfuncs.JWTHMAC(hmacSecret))
	apiKey := must(keyfuncs.APIKey())
	clientIP := must(keyfuncs.IP())
	chain := keyfuncs.First(user, apiKey, clientIP)
	token := sign(t, jwt.SigningMethodHS256, hmacSecret, claims())
	forged := sign(t, jwt.SigningMethodHS256, []byte("guessed"), claims("sub", "victim"))

	tests := []struct {
		name string
		fn   core.KeyFunc
		req  core.Request
		want string
	}{
		{"user first", chain, newRequest("203.0.113.7:1", "Authorization", "Bearer "+token, "X-API-Key", rawKey), "user:42"},
		{"api key second", chain, newRequest("203.0.113.7:1", "X-API-Key", rawKey), sha256ID(rawKey)},
		{"ip last", chain, newRequest("203.0.113.7:1"), "ip:203.0.113.7"},
		{"forged token falls to ip", chain, newRequest("203.0.113.7:1", "Authorization", "Bearer "+forged), "ip:203.0.113.7"},
		{"nothing at all", chain, newRequest("@"), ""},
		{"empty identity skipped", keyfuncs.First(constant("", nil), constant("b", nil)), newRequest(""), "b"},
		{"no identity skipped", keyfuncs.First(noIdentity, constant("b", nil)), newRequest(""), "b"},
		{"all empty", keyfuncs.First(constant("", nil)), newRequest(""), ""},
		{"no functions", keyfuncs.First(), newRequest(""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := identity(t, tt.fn, tt.req), tt.want; got != want {
				t.Errorf("identity = %q, want %q", got, want)
			}
		})
	}
}

func TestFirstErrors(t *testing.T) {
	_, err := keyfuncs.First(noIdentity, constant("", errBroken), constant("c", nil))(newRequest(""))
	if !errors.Is(err, errBroken) {
		t.Errorf("error = %v, want %v", err, errBroken)
	}
	user := must(keyfuncs.JWTHMAC(hmacSecret))
	expired := sign(t, jwt.SigningMethodHS256, hmacSecret, claims("exp", int64(1)))
	_, err = keyfuncs.First(user, noIdentity)(bearer(expired))
	if !errors.Is(err, core.ErrNoIdentity) || !errors.Is(err, jwt.ErrTokenExpired) {
		t.Errorf("error = %v, want the first function's error", err)
	}
	_, err = keyfuncs.First(constant("a", nil), nil)(newRequest(""))
	if err == nil || errors.Is(err, core.ErrNoIdentity) {
		t.Errorf("nil function: error = %v, want a configuration error", err)
	}
}

func TestJoin(t *testing.T) {
	clientIP := must(keyfuncs.IP())
	tenant := must(keyfuncs.Header("X-Tenant-ID"))
	route := func(pattern string) *fakeRequest {
		r := newRequest("203.0.113.7:1", "X-Tenant-ID", "acme")
		r.route = pattern
		return r
	}

	tests := []struct {
		name string
		fn   core.KeyFunc
		req  core.Request
		want string
	}{
		{"route and ip", keyfuncs.Join(keyfuncs.Route(), clientIP), route("/login"), "route:/login|ip:203.0.113.7"},
		{"tenant and ip", keyfuncs.Join(tenant, clientIP), route(""), "header:X-Tenant-Id:acme|ip:203.0.113.7"},
		{"one part", keyfuncs.Join(clientIP), route(""), "ip:203.0.113.7"},
		{"missing part", keyfuncs.Join(keyfuncs.Route(), clientIP), route(""), ""},
		{"empty part", keyfuncs.Join(constant("a", nil), constant("", nil)), route(""), ""},
		{"escaped bar", keyfuncs.Join(constant("a|b", nil), constant("c", nil)), route(""), `a\|b|c`},
		{"escaped backslash", keyfuncs.Join(constant(`a\`, nil), constant("|c", nil)), route(""), `a\\|\|c`},
		{"no functions", keyfuncs.Join(), route(""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := identity(t, tt.fn, tt.req), tt.want; got != want {
				t.Errorf("identity = %q, want %q", got, want)
			}
		})
	}
}

// TestJoinInjective checks that parts that contain the separator cannot
// produce another combination's identity.
func TestJoinInjective(t *testing.T) {
	pairs := [][2]string{
		{"a|b", "c"}, {"a", "b|c"}, {`a\`, "b"}, {"a", `\b`}, {`a\|`, "b"}, {"a", `|b`}, {`a\`, `|b`}, {`a\|b`, ""},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		if p[1] == "" {
			continue
		}
		id, err := keyfuncs.Join(constant(p[0], nil), constant(p[1], nil))(newRequest(""))
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[id]; ok {
			t.Errorf("%q and %q both give %q", prev, p, id)
		}
		seen[id] = p
	}
	_, err := keyfuncs.Join(constant("a", nil), nil)(newRequest(""))
	if err == nil || errors.Is(err, core.ErrNoIdentity) {
		t.Errorf("nil function: error = %v, want a configuration error", err)
	}
	_, err = keyfuncs.Join(constant("a", nil), constant("", errBroken))(newRequest(""))
	if !errors.Is(err, errBroken) {
		t.Errorf("error = %v, want %v", err, errBroken)
	}
}

func TestRoute(t *testing.T) {
	fn := keyfuncs.Route()
	r := httptest.NewRequest("GET", "/users/42", nil)
	tests := []struct {
		name string
		req  core.Request
		want string
	}{
		{"pattern", adapter.HTTPRequestWithRoute(r, "/users/{id}"), "route:/users/{id}"},
		{"gin style", adapter.HTTPRequestWithRoute(r, "/users/:id"), "route:/users/:id"},
		{"no pattern, never the path", adapter.HTTPRequest(r), ""},
	}
	for _, tt := range tests {
		if got, want := identity(t, fn, tt.req), tt.want; got != want {
			t.Errorf("%s: identity = %q, want %q", tt.name, got, want)
		}
	}
}

func TestHeader(t *testing.T) {
	fn := must(keyfuncs.Header("x-tenant-id"))
	tests := []struct {
		name string
		req  core.Request
		want string
	}{
		{"value", newRequest("", "X-Tenant-ID", "acme"), "header:X-Tenant-Id:acme"},
		{"trimmed", newRequest("", "X-Tenant-ID", "  acme\t"), "header:X-Tenant-Id:acme"},
		{"first line", newRequest("", "X-Tenant-ID", "acme", "X-Tenant-ID", "evil"), "header:X-Tenant-Id:acme"},
		{"missing", newRequest(""), ""},
		{"blank", newRequest("", "X-Tenant-ID", " "), ""},
		{"at cap", newRequest("", "X-Tenant-ID", strings.Repeat("t", keyfuncs.MaxHeaderValueLen)), "header:X-Tenant-Id:" + strings.Repeat("t", keyfuncs.MaxHeaderValueLen)},
		{"over cap", newRequest("", "X-Tenant-ID", strings.Repeat("t", keyfuncs.MaxHeaderValueLen+1)), ""},
		{"1 MiB", newRequest("", "X-Tenant-ID", strings.Repeat("t", 1<<20)), ""},
	}
	for _, tt := range tests {
		if got, want := identity(t, fn, tt.req), tt.want; got != want {
			t.Errorf("%s: identity = %q, want %q", tt.name, got, want)
		}
	}
	for _, name := range []string{"", "X Tenant", "X-Tenant:", "X-Ténant"} {
		if _, err := keyfuncs.Header(name); err == nil {
			t.Errorf("Header(%q) accepted", name)
		}
	}
}

func TestStatic(t *testing.T) {
	if got, want := identity(t, keyfuncs.Static("global"), newRequest("")), "static:global"; got != want {
		t.Errorf("identity = %q, want %q", got, want)
	}
}

// TestKindsNeverCollide checks that each kind of identity carries its own
// prefix, so that equal values of different kinds stay apart.
func TestKindsNeverCollide(t *testing.T) {
	r := newRequest("10.0.0.1:1", "X-Value", "10.0.0.1", "X-API-Key", "10.0.0.1")
	r.route = "10.0.0.1"
	fns := map[string]core.KeyFunc{
		"ip:":     must(keyfuncs.IP()),
		"apikey:": must(keyfuncs.APIKey()),
		"header:": must(keyfuncs.Header("X-Value")),
		"route:":  keyfuncs.Route(),
		"static:": keyfuncs.Static("10.0.0.1"),
	}
	seen := map[string]bool{}
	for prefix, fn := range fns {
		id := identity(t, fn, r)
		if !strings.HasPrefix(id, prefix) {
			t.Errorf("identity %q lacks kind %q", id, prefix)
		}
		if seen[id] {
			t.Errorf("identity %q produced twice", id)
		}
		seen[id] = true
	}
}
