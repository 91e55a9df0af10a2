package keyfuncs_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/netip"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/keyfuncs"
)

// checkIPIdentity fails unless id is a well-formed IP identity: "ip:" and a
// zone-free, unmapped address, or an IPv6 /64 prefix in its masked form.
func checkIPIdentity(t *testing.T, id string) {
	t.Helper()
	s, ok := strings.CutPrefix(id, "ip:")
	if !ok {
		t.Fatalf("identity %q lacks the ip: kind", id)
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Bits() != keyfuncs.DefaultIPv6Prefix || !p.Addr().Is6() || p.Addr().Is4In6() || p != p.Masked() || p.String() != s {
			t.Fatalf("identity %q is not a masked IPv6 /64", id)
		}
		return
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() || a.String() != s {
		t.Fatalf("identity %q is not a canonical IPv4 address", id)
	}
}

func FuzzXForwardedFor(f *testing.F) {
	for _, seed := range [][2]string{
		{"198.51.100.1", ""},
		{"1.1.1.1, 198.51.100.1, 10.0.0.2", "10.0.0.3"},
		{"[2001:db8::1]:80, ::ffff:10.0.0.2", "fd00::1"},
		{"198.51.100.1:443,, ,unknown", "fe80::1%eth0"},
		{strings.Repeat("10.0.0.2,", 40), "\xff\xfe"},
	} {
		f.Add(seed[0], seed[1])
	}
	fn := must(keyfuncs.IP(proxies))
	f.Fuzz(func(t *testing.T, line1, line2 string) {
		// An untrusted peer's header is ignored.
		r := newRequest("203.0.113.7:1", "X-Forwarded-For", line1, "X-Forwarded-For", line2)
		if got, want := identity(t, fn, r), "ip:203.0.113.7"; got != want {
			t.Fatalf("untrusted peer: identity = %q, want %q", got, want)
		}
		// A trusted peer's header gives a well-formed identity.
		r = newRequest("10.0.0.1:1", "X-Forwarded-For", line1, "X-Forwarded-For", line2)
		checkIPIdentity(t, identity(t, fn, r))
		// Whatever a client writes, it cannot displace the address that a
		// trusted proxy appends, on the same line or on a line of its own.
		r = newRequest("10.0.0.1:1", "X-Forwarded-For", line1+", 198.51.100.7")
		if got, want := identity(t, fn, r), "ip:198.51.100.7"; got != want {
			t.Fatalf("appended hop: identity = %q, want %q", got, want)
		}
		r = newRequest("10.0.0.1:1", "X-Forwarded-For", line1, "X-Forwarded-For", line2, "X-Forwarded-For", "198.51.100.7, 10.0.0.2")
		if got, want := identity(t, fn, r), "ip:198.51.100.7"; got != want {
			t.Fatalf("appended line: identity = %q, want %q", got, want)
		}
	})
}

func FuzzForwarded(f *testing.F) {
	for _, seed := range [][2]string{
		{"for=198.51.100.1", ""},
		{`for=1.1.1.1;proto=https, For="[2001:db8:cafe::17]:4711"`, "for=10.0.0.2;by=10.0.0.1"},
		{`for="\"x\\", for=_hidden;ext="a,b"`, "for=unknown"},
		{`for="198.51.100.1:_port";host=example.com`, `for="`},
		{strings.Repeat(`for=10.0.0.2, `, 40), "\xff;=\"\\"},
	} {
		f.Add(seed[0], seed[1])
	}
	fn := must(keyfuncs.IP(proxies, keyfuncs.ProxyHeaders("Forwarded")))
	f.Fuzz(func(t *testing.T, line1, line2 string) {
		r := newRequest("203.0.113.7:1", "Forwarded", line1, "Forwarded", line2)
		if got, want := identity(t, fn, r), "ip:203.0.113.7"; got != want {
			t.Fatalf("untrusted peer: identity = %q, want %q", got, want)
		}
		r = newRequest("10.0.0.1:1", "Forwarded", line1, "Forwarded", line2)
		checkIPIdentity(t, identity(t, fn, r))
		r = newRequest("10.0.0.1:1", "Forwarded", line1+", for=198.51.100.7;proto=https")
		if got, want := identity(t, fn, r), "ip:198.51.100.7"; got != want {
			t.Fatalf("appended element: identity = %q, want %q", got, want)
		}
		r = newRequest("10.0.0.1:1", "Forwarded", line1, "Forwarded", line2, "Forwarded", `for="198.51.100.7:1234", for=10.0.0.2`)
		if got, want := identity(t, fn, r), "ip:198.51.100.7"; got != want {
			t.Fatalf("appended line: identity = %q, want %q", got, want)
		}
	})
}

func FuzzRemoteAddr(f *testing.F) {
	for _, seed := range []string{
		"203.0.113.7:1234", "203.0.113.7", "[2001:db8::1]:443", "2001:db8::1", "[::ffff:10.0.0.1]",
		"[fe80::1%eth0]:80", "@", "", "[]", "[1.2.3.4]", "1.2.3.4:", "\xff",
	} {
		f.Add(seed)
	}
	peer := must(keyfuncs.IP())
	realIP := must(keyfuncs.IP(proxies, keyfuncs.ProxyHeaders("X-Real-IP")))
	f.Fuzz(func(t *testing.T, addr string) {
		id := identity(t, peer, newRequest(addr))
		if id != "" {
			checkIPIdentity(t, id)
		}
		// Where the standard library reads an address and port, so must IP.
		if ap, err := netip.ParseAddrPort(addr); err == nil && len(addr) <= 128 {
			a := ap.Addr().Unmap().WithZone("")
			want := "ip:" + a.String()
			if a.Is6() {
				want = "ip:" + netip.PrefixFrom(a, 64).Masked().String()
			}
			if id != want {
				t.Fatalf("identity = %q, want %q", id, want)
			}
		}
		// As X-Real-IP from a trusted proxy: the address, or the proxy.
		id = identity(t, realIP, newRequest("10.0.0.1:1", "X-Real-IP", addr))
		checkIPIdentity(t, id)
	})
}

func FuzzAPIKey(f *testing.F) {
	for _, seed := range []string{rawKey, "", " \t", "\xff\x00", "apikey:", strings.Repeat("k", keyfuncs.MaxAPIKeyLen+1)} {
		f.Add(seed)
	}
	fn := must(keyfuncs.APIKey(keyfuncs.HashSecret(apiSecret), keyfuncs.FromHeader("X-API-Key"), keyfuncs.FromAuthScheme("ApiKey")))
	f.Fuzz(func(t *testing.T, key string) {
		want := ""
		if trimmed := strings.Trim(key, " \t"); trimmed != "" && len(key) <= keyfuncs.MaxAPIKeyLen {
			want = hmacID(apiSecret, trimmed)
		}
		for _, r := range []*fakeRequest{
			newRequest("", "X-API-Key", key),
			newRequest("", "Authorization", "ApiKey "+key),
		} {
			id := identity(t, fn, r)
			if id != want {
				t.Fatalf("identity = %q, want %q", id, want)
			}
			if len(key) >= 8 && strings.Contains(strings.TrimPrefix(id, "apikey:"), key) {
				t.Fatalf("identity %q contains the raw key", id)
			}
		}
	})
}

// fuzzToken is an HS256 token signed with fuzzSecret for user "42",
// expiring in 2100.
const (
	fuzzSecret = "fuzz secret"
	fuzzToken  = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjQxMDI0NDQ4MDAsInN1YiI6IjQyIn0.lBnhCrMzfbtMzcHsGpVxVNlYOVpVd4Bsp9CH0tx_l4w"
)

func TestFuzzTokenValid(t *testing.T) {
	fn := must(keyfuncs.JWTHMAC([]byte(fuzzSecret)))
	if got, want := identity(t, fn, bearer(fuzzToken)), "user:42"; got != want {
		t.Errorf("identity = %q, want %q", got, want)
	}
}

func FuzzJWT(f *testing.F) {
	f.Add(fuzzToken)
	f.Add("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJleHAiOjQxMDI0NDQ4MDAsInN1YiI6IjQyIn0.")
	f.Add("a.b.c")
	f.Add("")
	f.Add("\xff.\xfe.\xfd")
	secret := []byte(fuzzSecret)
	fn := must(keyfuncs.JWTHMAC(secret))
	f.Fuzz(func(t *testing.T, token string) {
		id := identity(t, fn, bearer(token))
		if id == "" {
			return
		}
		// An identity needs a token that really carries the secret's
		// signature, checked here without the jwt package.
		parts := strings.Split(strings.Trim(token, " \t"), ".")
		if len(parts) != 3 {
			t.Fatalf("identity %q from a token of %d parts", id, len(parts))
		}
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil {
			t.Fatalf("identity %q from a token with an undecodable signature", id)
		}
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(parts[0] + "." + parts[1]))
		if !bytes.Equal(sig, m.Sum(nil)) {
			t.Fatalf("identity %q from a token that the secret did not sign", id)
		}
		if !strings.HasPrefix(id, "user:") || len(token) > keyfuncs.MaxTokenLen+16 {
			t.Fatalf("identity %q from a token of %d bytes", id, len(token))
		}
	})
}
