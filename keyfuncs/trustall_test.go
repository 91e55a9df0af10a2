package keyfuncs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ratekit/ratekit/keyfuncs"
)

// Trusted prefixes that together hold every address of a family are
// refused, with an error that says what to do: every client could then
// pick its own identity. TrustAnyPeer says so explicitly, and is taken.
func TestTrustedProxiesEveryone(t *testing.T) {
	for _, tt := range []struct {
		prefixes string
		everyone bool
	}{
		{"0.0.0.0/0", true},
		{"::/0", true},
		{"10.0.0.0/8, ::/0", true},
		{"0.0.0.0/1, 128.0.0.0/1", true},
		{"128.0.0.0/1, 10.0.0.0/8, 0.0.0.0/1", true},
		{"::ffff:0.0.0.0/96", true}, // the IPv4-mapped form of 0.0.0.0/0
		{"0.0.0.0/2, 64.0.0.0/2, 128.0.0.0/1", true},
		{"0.0.0.0/1, 0.0.0.0/2, 128.0.0.0/2, 192.0.0.0/2", true},
		{"::/1, 8000::/1", true},
		{"255.255.255.255/32, 0.0.0.0/1, 128.0.0.0/2, 192.0.0.0/3, 224.0.0.0/3", true},
		{"", false},
		{"10.0.0.0/8, 192.168.0.0/16, fd00::/8", false},
		{"0.0.0.0/1", false},
		{"0.0.0.0/1, 128.0.0.0/2, 224.0.0.0/3", false}, // 192.0.0.0/3 is missing
		{"::/1", false},
		{"0.0.0.0/1, 8000::/1", false}, // half of each family
	} {
		p, err := keyfuncs.ParsePrefixes(tt.prefixes)
		if err != nil {
			t.Fatal(err)
		}
		_, err = keyfuncs.IP(keyfuncs.TrustedProxies(p...))
		if got := errors.Is(err, keyfuncs.ErrTrustsEveryone); got != tt.everyone {
			t.Errorf("TrustedProxies(%s): %v, want ErrTrustsEveryone: %v", tt.prefixes, err, tt.everyone)
		}
		if err != nil && !strings.Contains(err.Error(), "TrustAnyPeer") {
			t.Errorf("TrustedProxies(%s): %v, which does not say how to mean it", tt.prefixes, err)
		}
		if _, err := keyfuncs.IP(keyfuncs.TrustedProxies(p...), keyfuncs.TrustAnyPeer()); err != nil {
			t.Errorf("TrustedProxies(%s) with TrustAnyPeer: %v", tt.prefixes, err)
		}
	}
}

// TrustAnyPeer reads the forwarding header of every peer: the attack it
// enables, a client that names its own address.
func TestTrustAnyPeer(t *testing.T) {
	fn := must(keyfuncs.IP(keyfuncs.TrustAnyPeer()))
	for _, peer := range []string{"203.0.113.7:1", "[2001:db8::1]:1"} {
		r := newRequest(peer, "X-Forwarded-For", "198.51.100.9")
		if got, want := identity(t, fn, r), "ip:198.51.100.9"; got != want {
			t.Errorf("from %s: identity %q, want %q", peer, got, want)
		}
	}
	if got, want := identity(t, must(keyfuncs.IP()), newRequest("203.0.113.7:1", "X-Forwarded-For", "198.51.100.9")), "ip:203.0.113.7"; got != want {
		t.Errorf("without it: identity %q, want %q", got, want)
	}
}
