package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/service"
	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/internal/tickctx"
	"github.com/ratekit/ratekit/keyfuncs"
)

// The forward-auth door: GET /check, asked by nginx (auth_request),
// Traefik (forwardAuth) and Caddy (forward_auth) before each request they
// pass on. Its query names the domain and the descriptors:
//
//	/check?domain=D&K1=V1&K2=V2...              one descriptor, entries in query order
//	...&descriptor&K3=V3...                     descriptor starts another one
//	...&key=K&value=V                           an entry whose key is a reserved word
//	...&key=K&value_from=H                      V is request header H (its last line)
//	...&key=K&ip_from=H                         V is the client's address in header H, a
//	                                            forwarded list read from the right past
//	                                            RATEKIT_TRUSTED_PROXIES (IPv6 by /64)
//	...&hits_addend=N&deny_status=S             the request's hits; the status of a denial
//
// The descriptors are decided by the one Service, as over gRPC. The answer
// is 204 when allowed, 429 (or deny_status) when not, with the library's
// rate-limit headers on both and Retry-After on a denial.

// Bounds of one /check request: a gateway's query is written by its
// operator, but header values come from clients.
const (
	maxCheckQuery       = 8 << 10
	maxCheckDescriptors = 16
	maxCheckEntries     = 64 // in all descriptors together
	maxCheckKey         = 256
	maxCheckValue       = 4 << 10
	maxCheckHeaderName  = 128
)

// source is where an entry's value comes from.
type source uint8

const (
	literal    source = iota // the query's value
	fromHeader               // a request header's last line, whole
	fromIP                   // the client's address in a forwarded list
)

// checkEntry is one entry of a descriptor, as the query states it.
type checkEntry struct {
	key   string
	value string // the value, or the header's name (canonical) when from a header
	src   source
}

// checkQuery is a parsed /check query.
type checkQuery struct {
	domain      string
	hits        uint32
	denyStatus  int // 0: 429
	descriptors [][]checkEntry
}

var (
	errCheckSyntax = errors.New("bad /check query")
	errCheckTooBig = errors.New("/check query too long")
)

func checkErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errCheckSyntax}, a...)...)
}

// parseCheck reads a raw /check query. Its errors wrap errCheckSyntax or
// errCheckTooBig, and never quote a value, which a client may have written.
func parseCheck(raw string) (checkQuery, error) {
	var c checkParser
	if len(raw) > maxCheckQuery {
		return c.q, fmt.Errorf("%w: %d bytes; at most %d", errCheckTooBig, len(raw), maxCheckQuery)
	}
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		if err := c.pair(part); err != nil {
			return c.q, err
		}
	}
	if c.pending {
		return c.q, c.notFollowed()
	}
	if err := c.endDescriptor(); err != nil {
		return c.q, err
	}
	if c.q.domain == "" || len(c.q.descriptors) == 0 {
		return c.q, checkErr("want domain=D and at least one descriptor entry")
	}
	return c.q, nil
}

// checkParser is parseCheck's state as it reads a query's pairs in order.
type checkParser struct {
	q                  checkQuery
	cur                []checkEntry // the descriptor being read
	pendingKey         string
	pending            bool // a key= waits for its value
	seenHits, seenDeny bool
	entries            int // in all descriptors
	separators         int // descriptor pairs read
}

// pair reads one pair of the query, percent-encoded: one of the reserved
// names, or an entry of the descriptor being read.
func (c *checkParser) pair(part string) error {
	k, v, hasEq := strings.Cut(part, "=")
	name, err1 := url.QueryUnescape(k)
	val, err2 := url.QueryUnescape(v)
	if err1 != nil || err2 != nil {
		return checkErr("a pair that is not percent-encoded")
	}
	if c.pending && name != "value" && name != "value_from" && name != "ip_from" {
		return c.notFollowed()
	}
	switch name {
	case "domain":
		return c.domain(val)
	case "hits_addend":
		return c.hitsAddend(val)
	case "deny_status":
		return c.denyStatus(val)
	case "descriptor":
		return c.descriptor(val)
	case "key":
		return c.key(val, hasEq)
	case "value", "value_from", "ip_from":
		return c.value(name, val)
	}
	if !hasEq {
		return checkErr("a pair without =")
	}
	if name == "" {
		return checkErr("an entry with an empty key")
	}
	return c.add(checkEntry{key: name, value: val})
}

// notFollowed is the error of a key= whose value does not follow it.
func (c *checkParser) notFollowed() error {
	return checkErr("key=%s is not followed by value=, value_from= or ip_from=", c.pendingKey)
}

// domain reads domain=, given once and not empty.
func (c *checkParser) domain(val string) error {
	if c.q.domain != "" {
		return checkErr("domain given twice")
	}
	if val == "" {
		return checkErr("an empty domain")
	}
	c.q.domain = val
	return nil
}

// hitsAddend reads hits_addend=, given once.
func (c *checkParser) hitsAddend(val string) error {
	n, err := strconv.ParseUint(val, 10, 32)
	if c.seenHits || err != nil {
		return checkErr("hits_addend must be given once, a number from 0 to %d", uint32(1<<32-1))
	}
	c.q.hits, c.seenHits = uint32(n), true
	return nil
}

// denyStatus reads deny_status=, given once.
func (c *checkParser) denyStatus(val string) error {
	n, err := strconv.Atoi(val)
	if c.seenDeny || err != nil || n < 400 || n > 599 {
		return checkErr("deny_status must be given once, a status from 400 to 599")
	}
	c.q.denyStatus, c.seenDeny = n, true
	return nil
}

// descriptor reads descriptor, which ends the descriptor being read.
func (c *checkParser) descriptor(val string) error {
	if val != "" {
		return checkErr("descriptor takes no value")
	}
	if err := c.endDescriptor(); err != nil {
		return err
	}
	c.separators++
	return nil
}

// key reads key=, whose value the next pair gives.
func (c *checkParser) key(val string, hasEq bool) error {
	if !hasEq || val == "" {
		return checkErr("an empty key=")
	}
	c.pendingKey, c.pending = val, true
	return nil
}

// value reads the value of the pending key=: the value itself (value=),
// or the name of the header it comes from (value_from= and ip_from=).
func (c *checkParser) value(name, val string) error {
	if !c.pending {
		return checkErr("%s= without a key= before it", name)
	}
	c.pending = false
	e := checkEntry{key: c.pendingKey, value: val}
	if name != "value" {
		if len(val) > maxCheckHeaderName || !httpguts.ValidHeaderFieldName(val) {
			return checkErr("%s= wants a header name", name)
		}
		e.value = http.CanonicalHeaderKey(val)
		e.src = fromHeader
		if name == "ip_from" {
			e.src = fromIP
		}
	}
	return c.add(e)
}

// endDescriptor ends the descriptor being read: one with no entries is
// an error once a descriptor pair has been read, and dropped before.
func (c *checkParser) endDescriptor() error {
	if len(c.cur) == 0 {
		if c.separators > 0 {
			return checkErr("a descriptor with no entries")
		}
		return nil
	}
	if len(c.q.descriptors) == maxCheckDescriptors {
		return checkErr("more than %d descriptors", maxCheckDescriptors)
	}
	c.q.descriptors = append(c.q.descriptors, c.cur)
	c.cur = nil
	return nil
}

// add adds entry e to the descriptor being read.
func (c *checkParser) add(e checkEntry) error {
	if len(e.key) > maxCheckKey {
		return checkErr("a key of %d bytes; at most %d", len(e.key), maxCheckKey)
	}
	if len(e.value) > maxCheckValue {
		return checkErr("a value of %d bytes; at most %d", len(e.value), maxCheckValue)
	}
	if c.entries == maxCheckEntries {
		return checkErr("more than %d entries", maxCheckEntries)
	}
	c.entries++
	c.cur = append(c.cur, e)
	return nil
}

// request builds the RateLimitRequest of q for a request with header h:
// values from headers are read now, and a descriptor whose value_from
// header the request lacks (or has empty) is left out, as envoy leaves out
// a descriptor whose request_headers action finds no header.
func (q *checkQuery) request(h http.Header, ipKey core.KeyFunc) (*rlspb.RateLimitRequest, error) {
	req := &rlspb.RateLimitRequest{Domain: q.domain, HitsAddend: q.hits}
next:
	for _, d := range q.descriptors {
		out := &rlv3.RateLimitDescriptor{Entries: make([]*rlv3.RateLimitDescriptor_Entry, len(d))}
		for i, e := range d {
			v := e.value
			if e.src != literal {
				var ok bool
				var err error
				if v, ok, err = headerValue(h, e, ipKey); err != nil {
					return nil, err
				}
				if !ok {
					continue next
				}
			}
			out.Entries[i] = &rlv3.RateLimitDescriptor_Entry{Key: e.key, Value: v}
		}
		req.Descriptors = append(req.Descriptors, out)
	}
	return req, nil
}

// headerValue reads an entry's value from its header: for value_from, the
// last line, the one a gateway that adds a line rather than replacing one
// wrote; for ip_from, the client's address in every line, read from the
// right. It reports false when a value_from header is absent or empty; an
// ip_from header must be there, since a gateway always knows the client's
// address: without it the gateway is misconfigured, and letting its
// requests through unlimited would hide that.
func headerValue(h http.Header, e checkEntry, ipKey core.KeyFunc) (string, bool, error) {
	var v string
	if lines := h[e.value]; len(lines) > 0 {
		v = strings.TrimSpace(lines[len(lines)-1])
	}
	if v == "" {
		if e.src == fromIP {
			return "", false, checkErr("no %s header, which ip_from= reads", e.value)
		}
		return "", false, nil
	}
	if e.src == fromIP {
		return clientAddr(ipKey, h[e.value])
	}
	if len(v) > maxCheckValue {
		return "", false, checkErr("%s holds %d bytes; at most %d", e.value, len(v), maxCheckValue)
	}
	return v, true, nil
}

// forwarded is the core.Request view of a forwarded address list for the
// library's IP key function: its last entry, the address the nearest
// proxy (the gateway) wrote, stands as the socket peer, and the entries
// before it as the X-Forwarded-For header, which the key function walks
// from the right past the trusted proxies.
type forwarded struct {
	peer  string
	lines []string
}

func (f *forwarded) Context() context.Context { return context.Background() }
func (f *forwarded) Method() string           { return "" }
func (f *forwarded) Path() string             { return "" }
func (f *forwarded) Route() string            { return "" }
func (f *forwarded) Header(name string) string {
	if v := f.HeaderValues(name); len(v) > 0 {
		return v[0]
	}
	return ""
}
func (f *forwarded) HeaderValues(name string) []string {
	if name != "X-Forwarded-For" {
		return nil
	}
	return f.lines
}
func (f *forwarded) Query(string) string { return "" }
func (f *forwarded) RemoteAddr() string  { return f.peer }

// newIPKey returns the key function of ip_from=: the library's client IP
// (IPv4-mapped addresses as IPv4, zones dropped, IPv6 by /64), past the
// trusted proxies.
func newIPKey(trusted []netip.Prefix) (core.KeyFunc, error) {
	if len(trusted) == 0 {
		return keyfuncs.IP()
	}
	return keyfuncs.IP(keyfuncs.TrustedProxies(trusted...))
}

// clientAddr returns the client's address from a forwarded list's lines
// (the last line's last entry first), as ipKey finds it.
func clientAddr(ipKey core.KeyFunc, ls []string) (string, bool, error) {
	last := strings.TrimRight(ls[len(ls)-1], " \t")
	rest, peer := "", last
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		rest, peer = last[:i], last[i+1:]
	}
	f := &forwarded{peer: strings.TrimSpace(peer), lines: ls[: len(ls)-1 : len(ls)-1]}
	if strings.TrimSpace(rest) != "" {
		f.lines = append(f.lines, rest)
	}
	id, err := ipKey(f)
	if err != nil {
		return "", false, checkErr("the forwarded address list does not end with an IP address")
	}
	return strings.TrimPrefix(id, "ip:"), true, nil
}

// deniedBodies holds the body of a denial for each status from 400 to
// 599, as the library's middlewares write it.
var deniedBodies = func() (b [200][]byte) {
	for i := range b {
		b[i] = adapter.Problem(400+i, "The request exceeds a rate limit; retry after the number of seconds in Retry-After.")
	}
	return b
}()

// checkFailed answers a check that the service could not decide: 400 for
// a request it refuses, 503 before a configuration is loaded, 500 for a
// failure. When the gateway gave up or its connection broke, it answers
// nothing: net/http ends the request's context when a read of the
// connection fails, a half-close among such failures, while the gateway
// may still read, and returning without a status would answer 200, which
// lets the request through undecided. Closing the connection answers
// nothing, and the gateway does as when a replica fails (Caddy asks the
// next one).
func checkFailed(w http.ResponseWriter, r *http.Request, err error, log *slog.Logger) {
	switch {
	case errors.Is(err, service.ErrBadRequest):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, service.ErrNoConfig):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case tickctx.Expired(r.Context()) != nil:
		log.Debug("/check: the gateway's connection ended before the decision", "error", err)
		panic(http.ErrAbortHandler)
	default:
		log.Warn("/check failed", "error", err)
		http.Error(w, "The rate limiter failed.", http.StatusInternalServerError)
	}
}

// checkHandler serves /check over svc.
func checkHandler(svc *service.Service, ipKey core.KeyFunc, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := parseCheck(r.URL.RawQuery)
		if err != nil {
			log.Debug("/check: bad query", "error", err)
			code := http.StatusBadRequest
			if errors.Is(err, errCheckTooBig) {
				code = http.StatusRequestURITooLong
			}
			http.Error(w, err.Error(), code)
			return
		}
		req, err := q.request(r.Header, ipKey)
		if err != nil {
			log.Debug("/check: bad header", "error", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(req.Descriptors) == 0 {
			// every descriptor named a header the request lacks: nothing
			// to limit, as envoy sends no request then
			w.WriteHeader(http.StatusNoContent)
			return
		}
		resp, dec, err := svc.Decide(r.Context(), req)
		if err != nil {
			checkFailed(w, r, err, log)
			return
		}
		hs := adapter.NewHeaders(dec, adapter.HeadersBoth, adapter.DefaultIETFDraft)
		hs.SetHTTP(w.Header())
		for _, h := range resp.GetResponseHeadersToAdd() {
			w.Header().Set(h.GetKey(), h.GetValue())
		}
		if resp.GetOverallCode() == rlspb.RateLimitResponse_OK {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		status := q.denyStatus
		if status == 0 {
			status = http.StatusTooManyRequests
		}
		w.Header().Set("Content-Type", adapter.ProblemContentType)
		w.WriteHeader(status)
		_, _ = w.Write(deniedBodies[status-400])
	}
}
