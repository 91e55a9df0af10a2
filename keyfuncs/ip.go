package keyfuncs

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ratekit/ratekit/core"
)

// Names of the forwarding headers that [ProxyHeaders] understands.
const (
	// HeaderXForwardedFor is the de facto standard list of addresses, one
	// appended by each proxy: "X-Forwarded-For: client, proxy1, proxy2".
	HeaderXForwardedFor = "X-Forwarded-For"
	// HeaderForwarded is the RFC 7239 list of elements, one appended by each
	// proxy: "Forwarded: for=192.0.2.60;proto=https, for=\"[2001:db8::17]\"".
	HeaderForwarded = "Forwarded"
	// HeaderXRealIP holds the single client address that a proxy such as
	// nginx sets.
	HeaderXRealIP = "X-Real-IP"
)

// Bounds on the work that [IP] does for one request.
const (
	// MaxForwardedBytes is how many bytes of one forwarding header IP reads,
	// counted from the end of its last line backwards and summed over lines
	// (each line costs one byte more than its length). The hops that trusted
	// proxies append are at the end, so the bytes beyond the budget are
	// never looked at: a client cannot make the walk slower by sending more.
	MaxForwardedBytes = 4096
	// MaxForwardedHops is how many addresses IP walks past, from the right,
	// in one forwarding header.
	MaxForwardedHops = 32
)

// DefaultIPv6Prefix is the prefix length by which [IP] groups IPv6 clients
// unless [IPv6Prefix] says otherwise.
const DefaultIPv6Prefix = 64

// maxAddrLen bounds the length of a single address as it may appear in a
// peer address or a header, with port, brackets and zone.
const maxAddrLen = 128

// IPOption configures [IP].
type IPOption func(*ipConfig) error

type headerKind uint8

const (
	kindXForwardedFor headerKind = iota
	kindForwarded
	kindSingle
)

type proxyHeader struct {
	name string
	kind headerKind
}

type ipConfig struct {
	trusted []netip.Prefix
	anyPeer bool // TrustAnyPeer
	v6Bits  int
	headers []proxyHeader
}

// ErrTrustsEveryone is returned, wrapped, by [IP] when the prefixes of
// [TrustedProxies] together hold every IPv4 or every IPv6 address, such as
// 0.0.0.0/0 or ::/0, without [TrustAnyPeer].
var ErrTrustsEveryone = errors.New("keyfuncs: the trusted proxies hold every address")

// TrustedProxies lists the address prefixes of the proxies in front of the
// application. Forwarding headers are read only when the socket peer is
// inside one of them, and the walk through a header moves past hops inside
// them. Calls accumulate. IPv4-mapped IPv6 prefixes such as
// ::ffff:10.0.0.0/104 are treated as their IPv4 equivalents.
//
// Default: none, so every forwarding header is ignored and the identity is
// the socket peer. This prevents the classic bypass in which a client sends
// "X-Forwarded-For: <random address>" with each request and so is never
// limited, or sends a victim's address to exhaust the victim's limit.
//
// List only proxies that append to, or overwrite, the headers chosen with
// [ProxyHeaders]. Prefixes that together hold every IPv4 or every IPv6
// address (0.0.0.0/0, ::/0, 0.0.0.0/1 with 128.0.0.0/1, ...) would trust
// every client, so [IP] refuses them with an error wrapping
// [ErrTrustsEveryone], unless [TrustAnyPeer] says that every peer is a
// proxy.
func TrustedProxies(prefixes ...netip.Prefix) IPOption {
	return func(c *ipConfig) error {
		for _, p := range prefixes {
			if !p.IsValid() {
				return fmt.Errorf("keyfuncs: invalid trusted proxy prefix %q", p)
			}
			if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
			}
			c.trusted = append(c.trusted, p.Masked())
		}
		return nil
	}
}

// TrustAnyPeer trusts every socket peer as a proxy, of either family: the
// forwarding headers of every request are read, and [TrustedProxies] may
// hold every address.
//
// It enables the attack that trusted proxies exist to prevent: anyone who
// can connect to the application itself, not through a proxy, writes the
// forwarding header, and so picks the address it is limited by. A client
// that sends a new address with each request is never limited; one that
// sends a victim's address spends the victim's quota. Say it only when
// nothing but the proxies can reach the application's port (a private
// network behind a load balancer whose addresses are not known in
// advance), and make sure the proxies overwrite, or append to, the
// headers chosen with [ProxyHeaders].
//
// Default: off, and a trusted prefix list that holds every address is an
// error.
func TrustAnyPeer() IPOption {
	return func(c *ipConfig) error {
		c.anyPeer = true
		return nil
	}
}

// trustsEveryone returns an error wrapping ErrTrustsEveryone when the
// trusted prefixes hold every address of a family and TrustAnyPeer was not
// said.
func (c *ipConfig) trustsEveryone() error {
	if c.anyPeer {
		return nil
	}
	for _, family := range []struct {
		name  string
		first netip.Addr
	}{{"IPv4", netip.IPv4Unspecified()}, {"IPv6", netip.IPv6Unspecified()}} {
		if covers(c.trusted, family.first) {
			return fmt.Errorf("%w of %s: any client could name its own address in a forwarding header; "+
				"trust the prefixes of the proxies alone, or say TrustAnyPeer if nothing but proxies can reach the application",
				ErrTrustsEveryone, family.name)
		}
	}
	return nil
}

// covers reports whether the prefixes of first's family in ps together
// hold every address of that family, first being its first address.
func covers(ps []netip.Prefix, first netip.Addr) bool {
	var own []netip.Prefix
	for _, p := range ps {
		if p.Addr().BitLen() == first.BitLen() {
			own = append(own, p)
		}
	}
	slices.SortFunc(own, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	next := first // the first address not yet covered
	for _, p := range own {
		if p.Addr().Compare(next) > 0 {
			return false // a gap
		}
		last := lastAddr(p)
		if last.Compare(next) < 0 {
			continue // within what is covered
		}
		if next = last.Next(); !next.IsValid() {
			return true // the family's last address
		}
	}
	return false
}

// lastAddr returns the last address of the masked prefix p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// ParsePrefixes parses a comma-separated list of CIDR prefixes, such as the
// value of a TRUSTED_PROXIES setting: "10.0.0.0/8, 192.168.1.7, fd00::/8".
// A bare address stands for itself (/32 or /128). Blank entries are skipped,
// so "" yields no prefixes.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if strings.Contains(entry, "/") {
			p, err := netip.ParsePrefix(entry)
			if err != nil {
				return nil, fmt.Errorf("keyfuncs: parse prefix %q: %w", entry, err)
			}
			out = append(out, p)
			continue
		}
		a, err := netip.ParseAddr(entry)
		if err != nil {
			return nil, fmt.Errorf("keyfuncs: parse prefix %q: %w", entry, err)
		}
		if a.Zone() != "" {
			return nil, fmt.Errorf("keyfuncs: parse prefix %q: zones are not allowed", entry)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// IPv6Prefix sets the prefix length, from 1 to 128, by which IPv6 clients are
// grouped: all addresses in one prefix share one identity, written as the
// masked prefix ("ip:2001:db8:1:2::/64"). 128 keeps single addresses
// ("ip:2001:db8::1").
//
// Default: 64 ([DefaultIPv6Prefix]). A host usually receives a whole /64, so
// limiting single addresses would let it rotate through 2^64 of them and
// never be limited.
func IPv6Prefix(bits int) IPOption {
	return func(c *ipConfig) error {
		if bits < 1 || bits > 128 {
			return fmt.Errorf("keyfuncs: IPv6 prefix length %d out of range [1, 128]", bits)
		}
		c.v6Bits = bits
		return nil
	}
}

// ProxyHeaders names the forwarding headers that [IP] reads when the peer is
// a trusted proxy, in order of precedence: the first of them that the
// request carries decides the client address, and the rest are ignored.
// [HeaderXForwardedFor] and [HeaderForwarded] are lists walked from the
// right; any other name, such as [HeaderXRealIP], CF-Connecting-IP or
// True-Client-IP, holds a single address (of several lines, the last
// counts).
//
// Default: X-Forwarded-For only. Name only headers that every trusted proxy
// appends to or overwrites: a header that a proxy passes through unchanged
// is written by the client, who then chooses its own identity. For example,
// behind nginx that sets only X-Forwarded-For, trusting Forwarded would let
// any client pick its address with "Forwarded: for=…".
func ProxyHeaders(names ...string) IPOption {
	return func(c *ipConfig) error {
		if len(names) == 0 {
			return errors.New("keyfuncs: ProxyHeaders needs at least one header name")
		}
		hs := make([]proxyHeader, 0, len(names))
		for _, n := range names {
			if !isToken(n) {
				return fmt.Errorf("keyfuncs: invalid header name %q", n)
			}
			kind := kindSingle
			switch {
			case strings.EqualFold(n, HeaderXForwardedFor):
				kind = kindXForwardedFor
			case strings.EqualFold(n, HeaderForwarded):
				kind = kindForwarded
			}
			for _, h := range hs {
				if strings.EqualFold(h.name, n) {
					return fmt.Errorf("keyfuncs: header %q named twice", n)
				}
			}
			hs = append(hs, proxyHeader{name: n, kind: kind})
		}
		c.headers = hs
		return nil
	}
}

var (
	errNoPeerAddr = fmt.Errorf("keyfuncs: peer address is not an IP address: %w", core.ErrNoIdentity)
	errNilOption  = errors.New("keyfuncs: nil option")
)

// IP returns a key function whose identity is the client's IP address:
// "ip:203.0.113.7", or for IPv6 the client's prefix, "ip:2001:db8:1:2::/64".
//
// The client is the socket peer, unless the peer is inside [TrustedProxies].
// Then the forwarding headers chosen with [ProxyHeaders] are read, and the
// client is the first address, walking from the right, that is not a trusted
// proxy; addresses further left were written by the client or by proxies
// nobody vouches for, and are never looked at. When the walk meets an entry
// that is not an IP address ("unknown", an obfuscated identifier, garbage)
// or reaches [MaxForwardedHops] or [MaxForwardedBytes], or when every entry
// is trusted, the last trusted address reached stands for the client.
//
// IPv4-mapped IPv6 addresses (::ffff:203.0.113.7) are reported as IPv4, and
// IPv6 zones are dropped, so neither gives a client a second identity. A
// peer that is not an IP address (a Unix socket, say) yields an error
// wrapping [core.ErrNoIdentity].
func IP(opts ...IPOption) (core.KeyFunc, error) {
	c := &ipConfig{
		v6Bits:  DefaultIPv6Prefix,
		headers: []proxyHeader{{name: HeaderXForwardedFor, kind: kindXForwardedFor}},
	}
	for _, o := range opts {
		if o == nil {
			return nil, errNilOption
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if err := c.trustsEveryone(); err != nil {
		return nil, err
	}
	return c.keyFunc, nil
}

func (c *ipConfig) keyFunc(r core.Request) (string, error) {
	a, ok := c.clientIP(r)
	if !ok {
		return "", errNoPeerAddr
	}
	return c.identity(a), nil
}

// clientIP returns the normalised client address, or false when the peer
// address is unusable.
func (c *ipConfig) clientIP(r core.Request) (netip.Addr, bool) {
	peer, ok := parseAddr(r.RemoteAddr())
	if !ok {
		return netip.Addr{}, false
	}
	if !c.isTrusted(peer) {
		return peer, true
	}
	for _, h := range c.headers {
		lines := r.HeaderValues(h.name)
		if len(lines) == 0 {
			continue
		}
		switch h.kind {
		case kindXForwardedFor:
			return c.walk(lines, peer, splitXForwardedFor, parseAddr), true
		case kindForwarded:
			return c.walk(lines, peer, splitForwarded, parseForwardedElement), true
		default:
			if v := lines[len(lines)-1]; len(v) <= MaxForwardedBytes {
				if a, ok := parseAddr(trimOWS(v)); ok {
					return a, true
				}
			}
			return peer, true
		}
	}
	return peer, true
}

func (c *ipConfig) isTrusted(a netip.Addr) bool {
	if c.anyPeer {
		return true
	}
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// identity formats a normalised address as an identity.
func (c *ipConfig) identity(a netip.Addr) string {
	buf := make([]byte, 0, 64)
	buf = append(buf, "ip:"...)
	if a.Is6() && c.v6Bits < 128 {
		p, _ := a.Prefix(c.v6Bits) // cannot fail: 1 <= v6Bits <= 128
		buf = p.AppendTo(buf)
	} else {
		buf = a.AppendTo(buf)
	}
	return string(buf)
}

// splitFunc splits the last element off a list header line. It returns the
// rest of the line before the element's separator, the element, and whether
// a separator was found.
type splitFunc func(line string) (rest, elem string, more bool)

// walk walks the header lines from the right, past trusted hops, within the
// byte and hop budgets, and returns the client address. cur starts as the
// (trusted) peer.
func (c *ipConfig) walk(lines []string, cur netip.Addr, split splitFunc, parse func(string) (netip.Addr, bool)) netip.Addr {
	budget, hops := MaxForwardedBytes, 0
	for i := len(lines) - 1; i >= 0; i-- {
		budget-- // a line costs at least one byte, so empty lines are bounded too
		if budget <= 0 {
			return cur
		}
		line, cut := lines[i], false
		if len(line) > budget {
			line, cut = line[len(line)-budget:], true
		}
		budget -= len(line)
		for {
			rest, elem, more := split(line)
			if !more && cut {
				return cur // the leftmost element was cut by the budget
			}
			if elem = trimOWS(elem); elem != "" {
				if hops++; hops > MaxForwardedHops {
					return cur
				}
				a, ok := parse(elem)
				if !ok {
					return cur
				}
				if !c.isTrusted(a) {
					return a
				}
				cur = a
			}
			if !more {
				break
			}
			line = rest
		}
	}
	return cur
}

// splitXForwardedFor splits at the last comma.
func splitXForwardedFor(line string) (rest, elem string, more bool) {
	i := strings.LastIndexByte(line, ',')
	if i < 0 {
		return "", line, false
	}
	return line[:i], line[i+1:], true
}

// parseAddr parses an address as it appears in a peer address or a
// forwarding header: "203.0.113.7", "203.0.113.7:443", "2001:db8::1",
// "[2001:db8::1]" or "[2001:db8::1]:443". The result is normalised: IPv4-mapped
// addresses are unmapped and zones dropped.
func parseAddr(s string) (netip.Addr, bool) {
	if s == "" || len(s) > maxAddrLen {
		return netip.Addr{}, false
	}
	// Pick the one parser that fits the shape: a failed parse allocates its
	// error, and valid addresses should cost nothing.
	var (
		a   netip.Addr
		err error
	)
	switch {
	case s[0] == '[' && s[len(s)-1] == ']':
		a, err = netip.ParseAddr(s[1 : len(s)-1])
		if err == nil && !a.Is6() {
			return netip.Addr{}, false
		}
	case s[0] == '[' || strings.Count(s, ":") == 1:
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return normalize(a), true
}

func normalize(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// trimOWS trims optional whitespace (spaces and horizontal tabs).
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// isToken reports whether s is a non-empty RFC 9110 token, as header names
// and authentication schemes are.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTChar(s[i]) {
			return false
		}
	}
	return true
}

func isTChar(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}
