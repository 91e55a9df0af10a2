package keyfuncs_test

import (
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
)

var (
	proxies = keyfuncs.TrustedProxies(
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("fd00::/8"),
	)
	allHeaders = keyfuncs.ProxyHeaders("Forwarded", "X-Forwarded-For", "X-Real-IP")
)

func TestIP(t *testing.T) {
	peerOnly := must(keyfuncs.IP())
	xff := must(keyfuncs.IP(proxies))
	all := must(keyfuncs.IP(proxies, allHeaders))
	realIP := must(keyfuncs.IP(proxies, keyfuncs.ProxyHeaders("X-Real-IP")))
	fwd := must(keyfuncs.IP(proxies, keyfuncs.ProxyHeaders("Forwarded")))
	v6At48 := must(keyfuncs.IP(keyfuncs.IPv6Prefix(48)))
	v6At128 := must(keyfuncs.IP(keyfuncs.IPv6Prefix(128)))
	mappedTrust := must(keyfuncs.IP(keyfuncs.TrustedProxies(netip.MustParsePrefix("::ffff:10.0.0.0/104"))))

	tests := []struct {
		name string
		fn   core.KeyFunc
		req  core.Request
		want string // "" means no identity
	}{
		// The socket peer.
		{"ipv4 peer", peerOnly, newRequest("203.0.113.7:1234"), "ip:203.0.113.7"},
		{"ipv4 peer without port", peerOnly, newRequest("203.0.113.7"), "ip:203.0.113.7"},
		{"ipv6 peer grouped by /64", peerOnly, newRequest("[2001:db8:1:2:3:4:5:6]:443"), "ip:2001:db8:1:2::/64"},
		{"ipv6 peer without port", peerOnly, newRequest("2001:db8:1:2:3:4:5:6"), "ip:2001:db8:1:2::/64"},
		{"ipv6 peer bracketed without port", peerOnly, newRequest("[2001:db8:1:2::9]"), "ip:2001:db8:1:2::/64"},
		{"ipv6 same /64 same identity", peerOnly, newRequest("[2001:db8:1:2:ffff::1]:1"), "ip:2001:db8:1:2::/64"},
		{"ipv6 peer grouped by /48", v6At48, newRequest("[2001:db8:1:2::1]:1"), "ip:2001:db8:1::/48"},
		{"ipv6 peer ungrouped", v6At128, newRequest("[2001:db8:1:2::1]:1"), "ip:2001:db8:1:2::1"},
		{"ipv4-mapped peer", peerOnly, newRequest("[::ffff:203.0.113.7]:1234"), "ip:203.0.113.7"},
		{"ipv4-mapped peer hex form", peerOnly, newRequest("[::ffff:cb00:7107]:1"), "ip:203.0.113.7"},
		{"ipv6 zone dropped", v6At128, newRequest("[fe80::1%eth0]:80"), "ip:fe80::1"},
		{"unix socket peer", peerOnly, newRequest("@"), ""},
		{"empty peer", peerOnly, newRequest(""), ""},
		{"hostname peer", peerOnly, newRequest("localhost:80"), ""},
		{"non-utf8 peer", peerOnly, newRequest("\xff\xfe:80"), ""},

		// Spoofing: an untrusted peer's headers are ignored.
		{"untrusted peer xff", all, newRequest("203.0.113.7:1", "X-Forwarded-For", "198.51.100.1"), "ip:203.0.113.7"},
		{"untrusted peer x-real-ip", all, newRequest("203.0.113.7:1", "X-Real-IP", "198.51.100.1"), "ip:203.0.113.7"},
		{"untrusted peer forwarded", all, newRequest("203.0.113.7:1", "Forwarded", "for=198.51.100.1"), "ip:203.0.113.7"},
		{"no trusted proxies xff", peerOnly, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1"), "ip:10.0.0.1"},
		{"untrusted ipv6 peer xff", all, newRequest("[2001:db8::1]:1", "X-Forwarded-For", "198.51.100.1"), "ip:2001:db8::/64"},

		// X-Forwarded-For behind a trusted proxy.
		{"xff one hop", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1"), "ip:198.51.100.1"},
		{"xff attacker prepends", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "1.1.1.1, 2.2.2.2, 198.51.100.1"), "ip:198.51.100.1"},
		{"xff attacker prepends trusted", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "10.9.9.9, 198.51.100.1"), "ip:198.51.100.1"},
		{"xff past trusted hops", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "1.1.1.1, 198.51.100.1, 10.0.0.3, 10.0.0.2"), "ip:198.51.100.1"},
		{"xff all trusted", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "10.0.0.3, 10.0.0.2"), "ip:10.0.0.3"},
		{"xff several lines", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "1.1.1.1", "X-Forwarded-For", "198.51.100.1, 10.0.0.2"), "ip:198.51.100.1"},
		{"xff several lines trusted last", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1", "X-Forwarded-For", "10.0.0.2"), "ip:198.51.100.1"},
		{"xff invalid entry stops walk", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1, garbage, 10.0.0.2"), "ip:10.0.0.2"},
		{"xff invalid only", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "unknown"), "ip:10.0.0.1"},
		{"xff empty line", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", ""), "ip:10.0.0.1"},
		{"xff empty elements skipped", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1,, ,\t, 10.0.0.2 ,"), "ip:198.51.100.1"},
		{"xff with port", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1:5555"), "ip:198.51.100.1"},
		{"xff ipv6", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "2001:db8:a:b:c::1"), "ip:2001:db8:a:b::/64"},
		{"xff ipv6 bracketed with port", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "[2001:db8:a:b::1]:443"), "ip:2001:db8:a:b::/64"},
		{"xff ipv6 bracketed", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "[2001:db8:a:b::1]"), "ip:2001:db8:a:b::/64"},
		{"xff ipv4-mapped", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "::ffff:198.51.100.1"), "ip:198.51.100.1"},
		{"xff ipv4-mapped trusted hop", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1, ::ffff:10.0.0.2"), "ip:198.51.100.1"},
		{"xff zone dropped", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "fe80::1%eth0"), "ip:fe80::/64"},
		{"xff trusted ipv6 proxy", xff, newRequest("[fd00::1]:1", "X-Forwarded-For", "198.51.100.1, fd00::2"), "ip:198.51.100.1"},
		{"xff non-utf8", xff, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1, \xff\xfe, 10.0.0.2"), "ip:10.0.0.2"},
		{"xff ignores forwarded by default", xff, newRequest("10.0.0.1:1", "Forwarded", "for=198.51.100.1"), "ip:10.0.0.1"},
		{"xff ignores x-real-ip by default", xff, newRequest("10.0.0.1:1", "X-Real-IP", "198.51.100.1"), "ip:10.0.0.1"},
		{"trusted peer ipv4-mapped", xff, newRequest("[::ffff:10.0.0.1]:1", "X-Forwarded-For", "198.51.100.1"), "ip:198.51.100.1"},
		{"trusted 4in6 prefix", mappedTrust, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1"), "ip:198.51.100.1"},

		// Forwarded behind a trusted proxy.
		{"fwd one element", fwd, newRequest("10.0.0.1:1", "Forwarded", "for=198.51.100.1"), "ip:198.51.100.1"},
		{"fwd params", fwd, newRequest("10.0.0.1:1", "Forwarded", "by=10.0.0.1;for=198.51.100.1;proto=https;host=example.com"), "ip:198.51.100.1"},
		{"fwd name case", fwd, newRequest("10.0.0.1:1", "Forwarded", "For=198.51.100.1"), "ip:198.51.100.1"},
		{"fwd quoted ipv4 port", fwd, newRequest("10.0.0.1:1", "Forwarded", `for="198.51.100.1:4711"`), "ip:198.51.100.1"},
		{"fwd quoted ipv6 port", fwd, newRequest("10.0.0.1:1", "Forwarded", `for="[2001:db8:cafe::17]:4711"`), "ip:2001:db8:cafe::/64"},
		{"fwd quoted ipv6", fwd, newRequest("10.0.0.1:1", "Forwarded", `for="[2001:db8:cafe::17]"`), "ip:2001:db8:cafe::/64"},
		{"fwd obfuscated port", fwd, newRequest("10.0.0.1:1", "Forwarded", `for="[2001:db8:cafe::17]:_x1"`), "ip:2001:db8:cafe::/64"},
		{"fwd escaped quote value", fwd, newRequest("10.0.0.1:1", "Forwarded", `for="\198.51.100.1"`), "ip:198.51.100.1"},
		{"fwd attacker prepends", fwd, newRequest("10.0.0.1:1", "Forwarded", "for=1.1.1.1, for=198.51.100.1"), "ip:198.51.100.1"},
		{"fwd past trusted hops", fwd, newRequest("10.0.0.1:1", "Forwarded", "for=1.1.1.1, for=198.51.100.1, for=10.0.0.2"), "ip:198.51.100.1"},
		{"fwd several lines", fwd, newRequest("10.0.0.1:1", "Forwarded", "for=1.1.1.1", "Forwarded", "for=198.51.100.1;proto=http"), "ip:198.51.100.1"},
		{"fwd quoted comma", fwd, newRequest("10.0.0.1:1", "Forwarded", `for=1.1.1.1, for=198.51.100.1;ext="a, for=2.2.2.2"`), "ip:198.51.100.1"},
		{"fwd escaped quote in ext", fwd, newRequest("10.0.0.1:1", "Forwarded", `for=1.1.1.1;ext="x\", for=2.2.2.2", for=198.51.100.1`), "ip:198.51.100.1"},
		{"fwd unterminated quote left", fwd, newRequest("10.0.0.1:1", "Forwarded", `for="1.1.1.1, for=198.51.100.1`), "ip:198.51.100.1"},
		{"fwd unknown", fwd, newRequest("10.0.0.1:1", "Forwarded", "for=unknown"), "ip:10.0.0.1"},
		{"fwd obfuscated", fwd, newRequest("10.0.0.1:1", "Forwarded", "for=198.51.100.1, for=_hidden, for=10.0.0.2"), "ip:10.0.0.2"},
		{"fwd no for", fwd, newRequest("10.0.0.1:1", "Forwarded", "proto=https"), "ip:10.0.0.1"},
		{"fwd duplicate for", fwd, newRequest("10.0.0.1:1", "Forwarded", "for=198.51.100.1;for=198.51.100.2"), "ip:10.0.0.1"},
		{"fwd unbracketed ipv6 with port", fwd, newRequest("10.0.0.1:1", "Forwarded", `for="2001:db8::1:80"`), "ip:2001:db8::/64"},
		{"fwd ipv6 bad port", fwd, newRequest("10.0.0.1:1", "Forwarded", `for="[2001:db8::1]:123456"`), "ip:10.0.0.1"},
		{"fwd ipv4 in brackets", fwd, newRequest("10.0.0.1:1", "Forwarded", `for="[198.51.100.1]"`), "ip:10.0.0.1"},
		{"fwd missing value", fwd, newRequest("10.0.0.1:1", "Forwarded", "for="), "ip:10.0.0.1"},
		{"fwd trailing semicolon", fwd, newRequest("10.0.0.1:1", "Forwarded", "for=198.51.100.1;"), "ip:198.51.100.1"},
		{"fwd garbage", fwd, newRequest("10.0.0.1:1", "Forwarded", "\"\"\"\\\\\\;;==,,"), "ip:10.0.0.1"},

		// X-Real-IP and other single-address headers.
		{"real-ip", realIP, newRequest("10.0.0.1:1", "X-Real-IP", "198.51.100.1"), "ip:198.51.100.1"},
		{"real-ip padded", realIP, newRequest("10.0.0.1:1", "X-Real-IP", " 198.51.100.1 "), "ip:198.51.100.1"},
		{"real-ip last line", realIP, newRequest("10.0.0.1:1", "X-Real-IP", "1.1.1.1", "X-Real-IP", "198.51.100.1"), "ip:198.51.100.1"},
		{"real-ip invalid", realIP, newRequest("10.0.0.1:1", "X-Real-IP", "1.1.1.1, 2.2.2.2"), "ip:10.0.0.1"},
		{"real-ip absent", realIP, newRequest("10.0.0.1:1"), "ip:10.0.0.1"},

		// Precedence: the first header present decides.
		{"precedence forwarded first", all, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.2", "Forwarded", "for=198.51.100.1"), "ip:198.51.100.1"},
		{"precedence forwarded invalid still decides", all, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.2", "Forwarded", "for=unknown"), "ip:10.0.0.1"},
		{"precedence falls to xff", all, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.2", "X-Real-IP", "198.51.100.3"), "ip:198.51.100.2"},
		{"precedence falls to real-ip", all, newRequest("10.0.0.1:1", "X-Real-IP", "198.51.100.3"), "ip:198.51.100.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := identity(t, tt.fn, tt.req), tt.want; got != want {
				t.Errorf("identity = %q, want %q", got, want)
			}
		})
	}
}

func TestIPNetHTTP(t *testing.T) {
	fn := must(keyfuncs.IP(proxies))
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:4567"
	r.Header.Add("X-Forwarded-For", "192.0.2.1, 198.51.100.9")
	r.Header.Add("X-Forwarded-For", "10.0.0.2")
	if got, want := identity(t, fn, adapter.HTTPRequest(r)), "ip:198.51.100.9"; got != want {
		t.Errorf("identity = %q, want %q", got, want)
	}
}

// TestIPHostileHeaders checks that the walk reads only the end of a header
// and stops after a bounded number of hops, whatever the client sends.
func TestIPHostileHeaders(t *testing.T) {
	fn := must(keyfuncs.IP(proxies, allHeaders))
	xffOnly := must(keyfuncs.IP(proxies))
	fwdOnly := must(keyfuncs.IP(proxies, keyfuncs.ProxyHeaders("Forwarded")))
	many := func(elem string, n int) string { return strings.Repeat(elem+", ", n) }
	trustedHops := func(n int) string {
		hops := make([]string, n)
		for i := range hops {
			hops[i] = "10.0.0.2"
		}
		return strings.Join(hops, ", ")
	}
	lines := func(name, value string, n int) *fakeRequest {
		r := newRequest("10.0.0.1:1")
		for range n {
			r.header.Add(name, value)
		}
		return r
	}
	withLine := func(r *fakeRequest, name, value string) *fakeRequest { r.header.Add(name, value); return r }
	emptyLines := func(n int) *fakeRequest {
		r := newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1")
		for range n {
			r.header.Add("X-Forwarded-For", "")
		}
		return r
	}

	tests := []struct {
		name string
		fn   core.KeyFunc
		req  core.Request
		want string
	}{
		{"xff 100000 hops", xffOnly, newRequest("10.0.0.1:1", "X-Forwarded-For", many("1.1.1.1", 100000)+"198.51.100.1"), "ip:198.51.100.1"},
		{"xff 1 MiB entry left", xffOnly, newRequest("10.0.0.1:1", "X-Forwarded-For", strings.Repeat("9", 1<<20)+", 198.51.100.1"), "ip:198.51.100.1"},
		{"xff 1 MiB entry right", xffOnly, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1, "+strings.Repeat("9", 1<<20)), "ip:10.0.0.1"},
		{"xff 1 MiB of spaces", xffOnly, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1,"+strings.Repeat(" ", 1<<20)), "ip:10.0.0.1"},
		{"xff 1 MiB of commas", xffOnly, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1"+strings.Repeat(",", 1<<20)), "ip:10.0.0.1"},
		{"xff 31 trusted hops", xffOnly, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1, "+trustedHops(31)), "ip:198.51.100.1"},
		{"xff 32 trusted hops", xffOnly, newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1, "+trustedHops(32)), "ip:10.0.0.2"},
		{"xff 10000 lines", xffOnly, withLine(lines("X-Forwarded-For", "1.1.1.1", 10000), "X-Forwarded-For", "198.51.100.1"), "ip:198.51.100.1"},
		{"xff 100 empty lines", xffOnly, emptyLines(100), "ip:198.51.100.1"},
		{"xff 10000 empty lines", xffOnly, emptyLines(10000), "ip:10.0.0.1"},
		{"xff 100000 trusted lines", xffOnly, lines("X-Forwarded-For", "10.0.0.2", 100000), "ip:10.0.0.2"},
		{"fwd 100000 elements", fwdOnly, newRequest("10.0.0.1:1", "Forwarded", many("for=1.1.1.1", 100000)+"for=198.51.100.1"), "ip:198.51.100.1"},
		{"fwd 1 MiB quoted string", fwdOnly, newRequest("10.0.0.1:1", "Forwarded", `for="`+strings.Repeat(",", 1<<20)+`", for=198.51.100.1`), "ip:198.51.100.1"},
		{"fwd 1 MiB of backslashes", fwdOnly, newRequest("10.0.0.1:1", "Forwarded", strings.Repeat(`\"`, 1<<19)+`, for=198.51.100.1`), "ip:198.51.100.1"},
		{"fwd 1 MiB element right", fwdOnly, newRequest("10.0.0.1:1", "Forwarded", `for=198.51.100.1, for=198.51.100.2;ext="`+strings.Repeat("x", 1<<20)+`"`), "ip:10.0.0.1"},
		{"real-ip 1 MiB", fn, newRequest("10.0.0.1:1", "X-Real-IP", strings.Repeat("1", 1<<20)), "ip:10.0.0.1"},
		{"non-utf8 everywhere", fn, newRequest("10.0.0.1:1", "Forwarded", "\xff\xfe\xfd", "X-Forwarded-For", "\xc0\x80", "X-Real-IP", "\xed\xa0\x80"), "ip:10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := identity(t, tt.fn, tt.req), tt.want; got != want {
				t.Errorf("identity = %q, want %q", got, want)
			}
		})
	}
}

// TestIPBoundedWork checks that the longest walk a client can cause costs
// no more allocations than the shortest.
func TestIPBoundedWork(t *testing.T) {
	fn := must(keyfuncs.IP(proxies, allHeaders))
	for _, r := range []core.Request{
		newRequest("10.0.0.1:1", "Forwarded", strings.Repeat("for=10.0.0.2, ", 1<<16)),
		newRequest("10.0.0.1:1", "X-Forwarded-For", strings.Repeat("10.0.0.2, ", 1<<16)),
		newRequest("10.0.0.1:1", "X-Forwarded-For", strings.Repeat(",", 1<<20)),
	} {
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := fn(r); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > 1 {
			t.Errorf("%v allocations per request, want at most 1", allocs)
		}
	}
}

func BenchmarkIP(b *testing.B) {
	fn := must(keyfuncs.IP(proxies, allHeaders))
	for _, bm := range []struct {
		name string
		req  core.Request
		want string
	}{
		{"peer", newRequest("203.0.113.7:1234"), "ip:203.0.113.7"},
		{"xff", newRequest("10.0.0.1:1", "X-Forwarded-For", "198.51.100.1, 10.0.0.2"), "ip:198.51.100.1"},
		{"xff-hostile", newRequest("10.0.0.1:1", "X-Forwarded-For", strings.Repeat("10.0.0.2, ", 1<<16)), "ip:10.0.0.2"},
		{"forwarded-hostile", newRequest("10.0.0.1:1", "Forwarded", strings.Repeat(`for=10.0.0.2;x="\"\\", `, 1<<14)), "ip:10.0.0.2"},
	} {
		b.Run(bm.name, func(b *testing.B) {
			if got := identity(b, fn, bm.req); got != bm.want {
				b.Fatalf("identity = %q, want %q", got, bm.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				_, _ = fn(bm.req)
			}
		})
	}
}

func TestIPOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    []keyfuncs.IPOption
		wantErr bool
	}{
		{"none", nil, false},
		{"trusted", []keyfuncs.IPOption{proxies}, false},
		{"invalid prefix", []keyfuncs.IPOption{keyfuncs.TrustedProxies(netip.Prefix{})}, true},
		{"ipv6 prefix 1", []keyfuncs.IPOption{keyfuncs.IPv6Prefix(1)}, false},
		{"ipv6 prefix 128", []keyfuncs.IPOption{keyfuncs.IPv6Prefix(128)}, false},
		{"ipv6 prefix 0", []keyfuncs.IPOption{keyfuncs.IPv6Prefix(0)}, true},
		{"ipv6 prefix 129", []keyfuncs.IPOption{keyfuncs.IPv6Prefix(129)}, true},
		{"headers custom", []keyfuncs.IPOption{keyfuncs.ProxyHeaders("CF-Connecting-IP")}, false},
		{"headers empty", []keyfuncs.IPOption{keyfuncs.ProxyHeaders()}, true},
		{"headers invalid name", []keyfuncs.IPOption{keyfuncs.ProxyHeaders("X Real IP")}, true},
		{"headers duplicate", []keyfuncs.IPOption{keyfuncs.ProxyHeaders("forwarded", "Forwarded")}, true},
		{"nil option", []keyfuncs.IPOption{nil}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, err := keyfuncs.IP(tt.opts...)
			if got, want := err != nil, tt.wantErr; got != want {
				t.Fatalf("error = %v, want error: %v", err, want)
			}
			if got, want := fn == nil, tt.wantErr; got != want {
				t.Errorf("nil function = %v, want %v", got, want)
			}
		})
	}
}

func TestIPCustomSingleHeader(t *testing.T) {
	fn := must(keyfuncs.IP(proxies, keyfuncs.ProxyHeaders("CF-Connecting-IP", "X-Forwarded-For")))
	r := newRequest("10.0.0.1:1", "Cf-Connecting-Ip", "2001:db8::7", "X-Forwarded-For", "198.51.100.1")
	if got, want := identity(t, fn, r), "ip:2001:db8::/64"; got != want {
		t.Errorf("identity = %q, want %q", got, want)
	}
}

func TestParsePrefixes(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{" , ,", nil, false},
		{"10.0.0.0/8", []string{"10.0.0.0/8"}, false},
		{"10.0.0.0/8, 192.168.1.7,fd00::/8", []string{"10.0.0.0/8", "192.168.1.7/32", "fd00::/8"}, false},
		{"2001:db8::1", []string{"2001:db8::1/128"}, false},
		{"10.0.0.0/33", nil, true},
		{"10.0.0.0/8,bogus", nil, true},
		{"fe80::1%eth0", nil, true},
		{"fe80::/64%eth0", nil, true},
		{"10.0.0.0/8;", nil, true},
	}
	for _, tt := range tests {
		got, err := keyfuncs.ParsePrefixes(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParsePrefixes(%q) error = %v, want error: %v", tt.in, err, tt.wantErr)
			continue
		}
		var strs []string
		for _, p := range got {
			strs = append(strs, p.String())
		}
		if !slices.Equal(strs, tt.want) {
			t.Errorf("ParsePrefixes(%q) = %q, want %q", tt.in, strs, tt.want)
		}
	}
}

func TestTrustedProxiesUnmasked(t *testing.T) {
	// 10.1.2.3/8 is the same prefix as 10.0.0.0/8.
	fn := must(keyfuncs.IP(keyfuncs.TrustedProxies(netip.MustParsePrefix("10.1.2.3/8"))))
	r := newRequest("10.200.0.1:1", "X-Forwarded-For", "198.51.100.1")
	if got, want := identity(t, fn, r), "ip:198.51.100.1"; got != want {
		t.Errorf("identity = %q, want %q", got, want)
	}
}
