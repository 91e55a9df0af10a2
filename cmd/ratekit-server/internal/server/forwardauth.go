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
	var q checkQuery
	if len(raw) > maxCheckQuery {
		return q, fmt.Errorf("%w: %d bytes; at most %d", errCheckTooBig, len(raw), maxCheckQuery)
	}
	var (
		cur                    []checkEntry
		pendingKey             string
		pending                bool // a key= waits for its value
		seenHits, seenDeny     bool
		entries, separatorSeen int
	)
	end := func() error {
		if len(cur) == 0 {
			if separatorSeen > 0 {
				return checkErr("a descriptor with no entries")
			}
			return nil
		}
		if len(q.descriptors) == maxCheckDescriptors {
			return checkErr("more than %d descriptors", maxCheckDescriptors)
		}
		q.descriptors = append(q.descriptors, cur)
		cur = nil
		return nil
	}
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, hasEq := strings.Cut(part, "=")
		name, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return q, checkErr("a pair that is not percent-encoded")
		}
		if pending {
			if name != "value" && name != "value_from" && name != "ip_from" {
				return q, checkErr("key=%s is not followed by value=, value_from= or ip_from=", pendingKey)
			}
		}
		switch name {
		case "domain":
			if q.domain != "" {
				return q, checkErr("domain given twice")
			}
			if val == "" {
				return q, checkErr("an empty domain")
			}
			q.domain = val
			continue
		case "hits_addend":
			n, err := strconv.ParseUint(val, 10, 32)
			if seenHits || err != nil {
				return q, checkErr("hits_addend must be given once, a number from 0 to %d", uint32(1<<32-1))
			}
			q.hits, seenHits = uint32(n), true
			continue
		case "deny_status":
			n, err := strconv.Atoi(val)
			if seenDeny || err != nil || n < 400 || n > 599 {
				return q, checkErr("deny_status must be given once, a status from 400 to 599")
			}
			q.denyStatus, seenDeny = n, true
			continue
		case "descriptor":
			if val != "" {
				return q, checkErr("descriptor takes no value")
			}
			if err := end(); err != nil {
				return q, err
			}
			separatorSeen++
			continue
		case "key":
			if !hasEq || val == "" {
				return q, checkErr("an empty key=")
			}
			pendingKey, pending = val, true
			continue
		case "value", "value_from", "ip_from":
			if !pending {
				return q, checkErr("%s= without a key= before it", name)
			}
			pending = false
			e := checkEntry{key: pendingKey, value: val}
			if name != "value" {
				if len(val) > maxCheckHeaderName || !httpguts.ValidHeaderFieldName(val) {
					return q, checkErr("%s= wants a header name", name)
				}
				e.value = http.CanonicalHeaderKey(val)
				e.src = fromHeader
				if name == "ip_from" {
					e.src = fromIP
				}
			}
			if err := addEntry(&cur, &entries, e); err != nil {
				return q, err
			}
			continue
		}
		if !hasEq {
			return q, checkErr("a pair without =")
		}
		if name == "" {
			return q, checkErr("an entry with an empty key")
		}
		if err := addEntry(&cur, &entries, checkEntry{key: name, value: val}); err != nil {
			return q, err
		}
	}
	if pending {
		return q, checkErr("key=%s is not followed by value=, value_from= or ip_from=", pendingKey)
	}
	if err := end(); err != nil {
		return q, err
	}
	if q.domain == "" || len(q.descriptors) == 0 {
		return q, checkErr("want domain=D and at least one descriptor entry")
	}
	return q, nil
}

func addEntry(cur *[]checkEntry, entries *int, e checkEntry) error {
	if len(e.key) > maxCheckKey {
		return checkErr("a key of %d bytes; at most %d", len(e.key), maxCheckKey)
	}
	if len(e.value) > maxCheckValue {
		return checkErr("a value of %d bytes; at most %d", len(e.value), maxCheckValue)
	}
	if *entries == maxCheckEntries {
		return checkErr("more than %d entries", maxCheckEntries)
	}
	*entries++
	*cur = append(*cur, e)
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
		switch {
		case err == nil:
		case errors.Is(err, service.ErrBadRequest):
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		case errors.Is(err, service.ErrNoConfig):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		case r.Context().Err() != nil:
			return // the gateway gave up
		default:
			log.Warn("/check failed", "error", err)
			http.Error(w, "The rate limiter failed.", http.StatusInternalServerError)
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
