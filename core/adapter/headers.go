package adapter

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unsafe"

	"github.com/ratekit/ratekit/core"
)

// HeaderStyle selects which rate-limit header fields a response carries.
// The zero value is [HeadersBoth].
type HeaderStyle uint8

const (
	// HeadersBoth writes the legacy X-RateLimit-* fields and the IETF
	// RateLimit-Policy and RateLimit fields. The default: old clients read
	// the first, new ones the second, at the cost of about 100 bytes.
	HeadersBoth HeaderStyle = iota
	// HeadersLegacy writes only X-RateLimit-Limit, X-RateLimit-Remaining
	// and X-RateLimit-Reset.
	HeadersLegacy
	// HeadersIETF writes only RateLimit-Policy and RateLimit, in the syntax
	// of the chosen [IETFDraft].
	HeadersIETF
	// HeadersNone writes no rate-limit fields. Retry-After is still written
	// on a denial: it is part of HTTP itself, not of a rate-limit convention.
	HeadersNone

	numHeaderStyles = iota
)

var headerStyleNames = [numHeaderStyles]string{"both", "legacy", "ietf", "none"}

// String returns "both", "legacy", "ietf" or "none".
func (s HeaderStyle) String() string {
	if s < numHeaderStyles {
		return headerStyleNames[s]
	}
	return "headerstyle(" + strconv.Itoa(int(s)) + ")"
}

func (s HeaderStyle) legacy() bool { return s == HeadersBoth || s == HeadersLegacy }
func (s HeaderStyle) ietf() bool   { return s == HeadersBoth || s == HeadersIETF }

// IETFDraft selects the revision of the IETF draft
// draft-ietf-httpapi-ratelimit-headers whose syntax the RateLimit-Policy and
// RateLimit fields follow. The draft is still moving; each supported
// revision keeps its own writer, so upgrading ratekit never changes the
// fields a deployment sends unless it asks for a newer revision. The zero
// value is [DefaultIETFDraft].
type IETFDraft uint8

const (
	// IETFDraft10 is the syntax of revisions -10 and -11 (and -08 and -09
	// before them): two lists of structured-field items named by the quoted
	// policy name,
	//
	//	RateLimit-Policy: "default";q=100;w=60
	//	RateLimit: "default";r=42;t=30
	IETFDraft10 IETFDraft = 10

	// DefaultIETFDraft is the revision used when none is chosen.
	DefaultIETFDraft = IETFDraft10
)

// Validate returns nil if d is the zero value or a supported revision.
func (d IETFDraft) Validate() error {
	switch d {
	case 0, IETFDraft10:
		return nil
	}
	return fmt.Errorf("ratekit: unsupported IETF draft revision %d (want %d)", d, IETFDraft10)
}

// Header field names, in the canonical form that [http.Header] keys take
// ("X-Ratelimit-Limit" is how net/http spells X-RateLimit-Limit; field
// names are case-insensitive on the wire).
const (
	// HeaderLimit is the limiting rule's capacity: how many units an
	// identity may spend at once when its quota is full.
	HeaderLimit = "X-Ratelimit-Limit"
	// HeaderRemaining is how many units the limiting rule still allows
	// right now.
	HeaderRemaining = "X-Ratelimit-Remaining"
	// HeaderReset is the number of seconds, rounded up, until the limiting
	// rule's quota is full again if nothing more is spent: a delta, never a
	// timestamp.
	HeaderReset = "X-Ratelimit-Reset"
	// HeaderPolicy lists every applied rule's quota policy.
	HeaderPolicy = "Ratelimit-Policy"
	// HeaderRateLimit lists every applied rule's current state.
	HeaderRateLimit = "Ratelimit"
	// HeaderRetryAfter is the number of seconds, rounded up and at least
	// 1, after which a denied request could be allowed.
	HeaderRetryAfter = "Retry-After"
)

// maxHeaders is the most fields one response carries: three legacy, two
// IETF, Retry-After.
const maxHeaders = 6

// headerTextSize is the room a Headers keeps inline for its values' text:
// enough for a few rules; the text of more takes one allocation of its own.
const headerTextSize = 240

// Header is one header field.
type Header struct {
	Name, Value string
}

// Headers holds the rate-limit header fields of one response, computed once
// by [NewHeaders] and copied by an adapter into its framework's response
// with [Headers.SetHTTP] or [Headers.Set]. The zero value holds no field.
//
// A Headers is a plain value that keeps its values' text inline, so that
// computing one allocates nothing, and copying it into an [http.Header]
// allocates once for all its fields.
type Headers struct {
	n     int
	names [maxHeaders]string
	ends  [maxHeaders]int // where each value ends in the text
	small [headerTextSize]byte
	large []byte // the text, when it outgrew small
	// spare, when not nil, is where SetHTTP puts the values, once: the
	// middleware's memory for the request
	spare *httpValues
}

// Len returns how many fields h holds.
func (h *Headers) Len() int { return h.n }

// At returns the i-th field, 0 ≤ i < h.Len(), in the order they should be
// written. Its value is a fresh string.
func (h *Headers) At(i int) Header {
	return Header{Name: h.names[:h.n][i], Value: string(h.value(h.text(), i))}
}

// Get returns the value of the named field, or "". Names are compared
// exactly, in the canonical form of the Header* constants.
func (h *Headers) Get(name string) string {
	for i, n := range h.names[:h.n] {
		if n == name {
			return string(h.value(h.text(), i))
		}
	}
	return ""
}

// text returns the values, back to back.
func (h *Headers) text() []byte {
	if h.large != nil {
		return h.large
	}
	if h.n == 0 {
		return nil
	}
	return h.small[:h.ends[h.n-1]]
}

// value returns the i-th value within text.
func (h *Headers) value(text []byte, i int) []byte {
	start := 0
	if i > 0 {
		start = h.ends[i-1]
	}
	return text[start:h.ends[i]]
}

// mark ends the field name, whose value ends at end of the text.
func (h *Headers) mark(name string, end int) {
	h.names[h.n] = name
	h.ends[h.n] = end
	h.n++
}

// finish stores the text of the values marked. text is copied: it may live
// on its builder's stack.
func (h *Headers) finish(text []byte) {
	if len(text) <= len(h.small) {
		copy(h.small[:], text)
		return
	}
	h.large = append([]byte(nil), text...)
}

// httpValues holds, in one allocation, the values that SetHTTP puts in an
// http.Header and the text they point into.
type httpValues struct {
	vals [maxHeaders]string
	text [headerTextSize]byte
}

// SetHTTP sets every field in dst. Fields that an outer middleware has
// already set are merged with h's, so that stacked middlewares describe all
// their rules, as one middleware with all of them would: the IETF lists
// gain h's items after the outer ones, the X-RateLimit-* fields keep the
// limiting rule with the smaller share of its capacity left (h's on a tie),
// and Retry-After the longer wait. Unless it merges, SetHTTP allocates once
// however many fields there are.
func (h *Headers) SetHTTP(dst http.Header) {
	if h.n == 0 {
		return
	}
	if dst[HeaderLimit] != nil || dst[HeaderPolicy] != nil || dst[HeaderRetryAfter] != nil {
		m := h.merge(func(name string) string {
			if v := dst[name]; len(v) > 0 {
				return v[0]
			}
			return ""
		})
		h = &m
	}
	text := h.text()
	var vals []string
	if len(text) <= headerTextSize {
		// One block holds the strings and their bytes, which nothing
		// writes to once copied: the spare one, used only once for that.
		b := h.spare
		if b == nil {
			b = new(httpValues)
		}
		h.spare = nil
		copy(b.text[:], text)
		vals = b.vals[:h.n]
		start := 0
		for i, end := range h.ends[:h.n] {
			if end > start {
				vals[i] = unsafe.String(&b.text[start], end-start)
			}
			start = end
		}
	} else {
		all := string(text)
		vals = make([]string, h.n)
		start := 0
		for i, end := range h.ends[:h.n] {
			vals[i] = all[start:end]
			start = end
		}
	}
	for i, name := range h.names[:h.n] {
		dst[name] = vals[i : i+1 : i+1]
	}
}

// ResponseHeader is the header of a response being written, for frameworks
// whose headers are not an [http.Header], such as Fiber's.
type ResponseHeader interface {
	// Get returns the value of the named field, or "" if it is not set.
	Get(name string) string
	// Set sets the named field, replacing any value it had.
	Set(name, value string)
}

// Set sets every field in dst, merged with those an outer middleware has
// already set as [Headers.SetHTTP] merges them. Unless it merges, it
// allocates once.
func (h *Headers) Set(dst ResponseHeader) {
	if h.n == 0 {
		return
	}
	if dst.Get(HeaderLimit) != "" || dst.Get(HeaderPolicy) != "" || dst.Get(HeaderRetryAfter) != "" {
		m := h.merge(dst.Get)
		h = &m
	}
	text := h.text()
	var all string
	if b := h.spare; b != nil && len(text) <= headerTextSize {
		// the spare block, once, as SetHTTP uses it
		h.spare = nil
		n := copy(b.text[:], text)
		all = unsafe.String(&b.text[0], n)
	} else {
		all = string(text)
	}
	start := 0
	for i, end := range h.ends[:h.n] {
		dst.Set(h.names[i], all[start:end])
		start = end
	}
}

// merge returns the fields to write over a response whose header already
// holds the fields that get reports.
func (h *Headers) merge(get func(name string) string) Headers {
	text := h.text()
	keepLegacy := false
	if limit, remaining := get(HeaderLimit), get(HeaderRemaining); limit != "" && remaining != "" {
		ol, err1 := strconv.ParseInt(limit, 10, 64)
		or, err2 := strconv.ParseInt(remaining, 10, 64)
		nl, err3 := strconv.ParseInt(h.Get(HeaderLimit), 10, 64)
		nr, err4 := strconv.ParseInt(h.Get(HeaderRemaining), 10, 64)
		// or/ol < nr/nl, without division; all are below 2^31
		keepLegacy = err1 == nil && err2 == nil && err3 == nil && err4 == nil && or*nl < nr*ol
	}
	var m Headers
	var arr [headerTextSize]byte
	buf := arr[:0]
	for i, name := range h.names[:h.n] {
		v := h.value(text, i)
		switch name {
		case HeaderLimit, HeaderRemaining, HeaderReset:
			if keepLegacy {
				continue
			}
		case HeaderPolicy, HeaderRateLimit:
			if outer := get(name); outer != "" {
				buf = append(buf, outer...)
				buf = append(buf, ", "...)
			}
		case HeaderRetryAfter:
			outer, err := strconv.ParseInt(get(name), 10, 64)
			if ours, _ := strconv.ParseInt(string(v), 10, 64); err == nil && outer > ours {
				continue
			}
		}
		buf = append(buf, v...)
		m.mark(name, len(buf))
	}
	m.finish(buf)
	return m
}

// NewHeaders computes the header fields that describe d:
//
//   - X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset describe
//     the limiting rule ([core.Decision].Limiting) alone: its capacity
//     ([core.Limit.Capacity]: Burst for GCRA, Rate for the window algorithms),
//     the units it has left, and its ResetAfter in whole seconds, rounded
//     up.
//   - RateLimit-Policy has one item per applied rule, in rule order:
//     "name";q=<capacity>;w=<window>. For the window algorithms w is the
//     Period; for GCRA it is how long an empty bucket takes to refill to
//     its capacity (Burst × Period / Rate), so q/w is always the sustained
//     rate and w is the Period whenever Burst equals Rate. w is in whole
//     seconds, rounded up: a limit of 5 per 500ms reads q=5;w=1.
//   - RateLimit has one item per applied rule, in rule order:
//     "name";r=<remaining>;t=<ResetAfter in whole seconds, rounded up>.
//   - Retry-After, on a denial only, is the limiting rule's RetryAfter in
//     whole seconds, rounded up and never below 1. It is omitted when the
//     request's cost exceeds the limit's capacity ([core.Result.Never]): no wait
//     would help, and a client that obeyed it would retry for ever.
//
// The first three follow style; Retry-After is written whatever the style.
// For a rule "default" of 100 per minute with 42 units left and the quota
// full again in 30s, [HeadersBoth] gives
//
//	X-RateLimit-Limit: 100
//	X-RateLimit-Remaining: 42
//	X-RateLimit-Reset: 30
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=30
//
// A decision in which no rule applied has no fields. Rule names appear in
// the IETF fields as structured-field strings: '"' and '\' are escaped, and
// any byte outside printable ASCII, which such strings cannot hold, is
// written as '?' (middlewares reject such names when IETF fields are on).
// An unsupported draft is treated as [DefaultIETFDraft]. NewHeaders
// allocates nothing unless the values outgrow the room a Headers keeps
// inline (about four rules).
func NewHeaders(d core.Decision, style HeaderStyle, draft IETFDraft) Headers {
	var h Headers
	if d.Limiting < 0 || d.Limiting >= len(d.Results) {
		return h
	}
	lim := d.Results[d.Limiting]
	var arr [headerTextSize]byte
	buf := arr[:0]
	if style.legacy() {
		buf = strconv.AppendInt(buf, int64(lim.Limit.Capacity()), 10)
		h.mark(HeaderLimit, len(buf))
		buf = strconv.AppendInt(buf, int64(lim.Remaining), 10)
		h.mark(HeaderRemaining, len(buf))
		buf = strconv.AppendInt(buf, ceilSeconds(lim.ResetAfter), 10)
		h.mark(HeaderReset, len(buf))
	}
	if style.ietf() {
		// draft-10 and -11; later revisions get their own case here.
		for i, r := range d.Results {
			if i > 0 {
				buf = append(buf, ", "...)
			}
			buf = appendSFString(buf, r.Rule)
			buf = append(buf, ";q="...)
			buf = strconv.AppendInt(buf, int64(r.Limit.Capacity()), 10)
			buf = append(buf, ";w="...)
			buf = strconv.AppendInt(buf, policyWindow(r.Limit), 10)
		}
		h.mark(HeaderPolicy, len(buf))
		for i, r := range d.Results {
			if i > 0 {
				buf = append(buf, ", "...)
			}
			buf = appendSFString(buf, r.Rule)
			buf = append(buf, ";r="...)
			buf = strconv.AppendInt(buf, int64(r.Remaining), 10)
			buf = append(buf, ";t="...)
			buf = strconv.AppendInt(buf, ceilSeconds(r.ResetAfter), 10)
		}
		h.mark(HeaderRateLimit, len(buf))
	}
	if !d.Allowed && !lim.Allowed && !lim.Never() {
		buf = strconv.AppendInt(buf, RetryAfterSeconds(lim.RetryAfter), 10)
		h.mark(HeaderRetryAfter, len(buf))
	}
	h.finish(buf)
	return h
}

// RetryAfterSeconds returns d as a Retry-After value: whole seconds,
// rounded up, and never below 1.
func RetryAfterSeconds(d time.Duration) int64 { return max(1, ceilSeconds(d)) }

// retryAfterHeaders returns headers holding only Retry-After, for a denial
// that no rule's numbers describe (the store was unavailable).
func retryAfterHeaders(retry time.Duration) Headers {
	var h Headers
	if retry > 0 {
		var arr [20]byte
		buf := strconv.AppendInt(arr[:0], RetryAfterSeconds(retry), 10)
		h.mark(HeaderRetryAfter, len(buf))
		h.finish(buf)
	}
	return h
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d ≤ 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// policyWindow returns the w parameter of l's quota policy, in seconds: the
// Period for the window algorithms, the time an empty GCRA bucket takes to
// refill to its burst otherwise; rounded up, at least 1.
func policyWindow(l core.Limit) int64 {
	w := l.Period
	if l.Algorithm == core.GCRA {
		w = gcraInterval(l) * time.Duration(l.Burst)
	}
	return max(1, ceilSeconds(w))
}

// gcraInterval returns the spacing of a GCRA limit's units: period / rate,
// rounded up to the µs, as core's scripts space them.
func gcraInterval(l core.Limit) time.Duration {
	us := l.Period.Microseconds()
	return time.Duration((us+int64(l.Rate)-1)/int64(l.Rate)) * time.Microsecond
}

// appendSFString appends s as a structured-field string (RFC 8941 §3.3.3).
func appendSFString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			buf = append(buf, '\\', c)
		case c < 0x20 || c > 0x7e:
			buf = append(buf, '?')
		default:
			buf = append(buf, c)
		}
	}
	return append(buf, '"')
}

// validSFString reports whether s can be written as a structured-field
// string unchanged but for escapes: printable ASCII only.
func validSFString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
