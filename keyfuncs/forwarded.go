package keyfuncs

import (
	"net/netip"
	"strings"
)

// This file parses RFC 7239 Forwarded header lines from the right, so that
// the elements that trusted proxies appended are read first and whatever a
// client wrote further left is never parsed.

// splitForwarded splits the last element off a Forwarded line: at the last
// comma that is not inside a quoted string. Scanning from the right, the
// first quote met closes a quoted string; inside one, a quote preceded by an
// odd number of backslashes is escaped and any other quote opens the string.
// Malformed input yields malformed elements, which the element parser
// rejects.
func splitForwarded(line string) (rest, elem string, more bool) {
	inQuote := false
	for i := len(line) - 1; i >= 0; i-- {
		switch line[i] {
		case '"':
			if !inQuote {
				inQuote = true
				continue
			}
			backslashes := 0
			for j := i - 1; j >= 0 && line[j] == '\\'; j-- {
				backslashes++
			}
			if backslashes%2 == 0 {
				inQuote = false
			}
		case ',':
			if !inQuote {
				return line[:i], line[i+1:], true
			}
		}
	}
	return "", line, false
}

// parseForwardedElement returns the address in the element's "for"
// parameter, such as `for=192.0.2.60;proto=https;by=203.0.113.43`. An element
// without exactly one "for", with a malformed pair, or whose node is not an
// IP address ("unknown", "_hidden") yields false.
func parseForwardedElement(elem string) (netip.Addr, bool) {
	var node string
	found := false
	s := elem
	for {
		if s = trimOWS(s); s == "" {
			break
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return netip.Addr{}, false
		}
		name := trimOWS(s[:eq])
		if !isToken(name) {
			return netip.Addr{}, false
		}
		s = trimOWS(s[eq+1:])
		isFor := equalFoldASCII(name, "for")
		var val string
		if s != "" && s[0] == '"' {
			n, escapes := quotedLen(s)
			if n < 0 {
				return netip.Addr{}, false
			}
			val, s = s[1:n-1], s[n:]
			if escapes && isFor {
				val = unescape(val)
			}
		} else {
			end := strings.IndexByte(s, ';')
			if end < 0 {
				end = len(s)
			}
			val, s = trimOWS(s[:end]), s[end:]
			if val == "" || strings.IndexByte(val, '"') >= 0 {
				return netip.Addr{}, false
			}
		}
		if isFor {
			if found {
				return netip.Addr{}, false // RFC 7239: a parameter occurs at most once per element
			}
			node, found = val, true
		}
		if s = trimOWS(s); s == "" {
			break
		}
		if s[0] != ';' {
			return netip.Addr{}, false
		}
		s = s[1:]
	}
	if !found {
		return netip.Addr{}, false
	}
	return parseNode(node)
}

// quotedLen returns the length of the quoted string at the start of s,
// quotes included, or -1 when it is unterminated, and whether it contains
// quoted pairs ("\x").
func quotedLen(s string) (n int, escapes bool) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			escapes = true
			i++ // the escaped byte, which may be a quote
		case '"':
			return i + 1, escapes
		}
	}
	return -1, false
}

// unescape removes the backslashes of quoted pairs from the inside of a
// well-formed quoted string.
func unescape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parseNode parses an RFC 7239 node: an IPv4 address or a bracketed IPv6
// address, each with an optional port ("192.0.2.43:47011",
// "[2001:db8:cafe::17]:4711"). A bare IPv6 address is accepted too, since some
// proxies write one.
func parseNode(v string) (netip.Addr, bool) {
	if v == "" || len(v) > maxAddrLen {
		return netip.Addr{}, false
	}
	if v[0] == '[' {
		end := strings.IndexByte(v, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(v[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		if rest := v[end+1:]; rest != "" && (rest[0] != ':' || !isNodePort(rest[1:])) {
			return netip.Addr{}, false
		}
		return normalize(a), true
	}
	if strings.Count(v, ":") != 1 {
		a, err := netip.ParseAddr(v) // IPv4, or bare IPv6
		if err != nil {
			return netip.Addr{}, false
		}
		return normalize(a), true
	}
	host, port, _ := strings.Cut(v, ":")
	a, err := netip.ParseAddr(host)
	if err != nil || !a.Is4() || !isNodePort(port) {
		return netip.Addr{}, false
	}
	return a, true
}

// isNodePort reports whether s is an RFC 7239 node-port: up to five digits,
// or an obfuscated port such as "_abc".
func isNodePort(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '_' {
		if len(s) == 1 {
			return false
		}
		for i := 1; i < len(s); i++ {
			b := s[i]
			if !('a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b == '.' || b == '_' || b == '-') {
				return false
			}
		}
		return true
	}
	if len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
