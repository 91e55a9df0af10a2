package keyfuncs

import (
	"net/netip"
	"testing"
)

// FuzzCovers checks covers against a count of the /8 blocks that some
// prefix holds, for lists of IPv4 prefixes no longer than /8 (so that
// holding every /8 is holding every address), mixed with IPv6 prefixes,
// which never cover IPv4.
func FuzzCovers(f *testing.F) {
	f.Add([]byte{0, 0})                  // 0.0.0.0/0
	f.Add([]byte{0, 1, 128, 1})          // two halves
	f.Add([]byte{0, 1, 128, 2, 224, 3})  // a gap at 192.0.0.0/3
	f.Add([]byte{0, 1, 128, 2, 192, 10}) // an IPv6 prefix among them
	f.Fuzz(func(t *testing.T, data []byte) {
		var ps []netip.Prefix
		for i := 0; i+1 < len(data) && len(ps) < 16; i += 2 {
			if data[i+1] >= 9 { // an IPv6 prefix
				p, _ := netip.AddrFrom16([16]byte{data[i]}).Prefix(int(data[i+1] % 9))
				ps = append(ps, p)
				continue
			}
			p, _ := netip.AddrFrom4([4]byte{data[i]}).Prefix(int(data[i+1]))
			ps = append(ps, p)
		}
		want := true
		for block := range 256 {
			a := netip.AddrFrom4([4]byte{byte(block), 255, 255, 255})
			held := false
			for _, p := range ps {
				held = held || (p.Addr().Is4() && p.Contains(a) && p.Contains(netip.AddrFrom4([4]byte{byte(block)})))
			}
			want = want && held
		}
		if got := covers(ps, netip.IPv4Unspecified()); got != want {
			t.Fatalf("covers(%v) = %v, want %v", ps, got, want)
		}
	})
}
