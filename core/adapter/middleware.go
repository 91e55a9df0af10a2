package adapter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ratekit/ratekit/core"
	"net/http"
	"slices"
	"time"
)

// ProblemContentType is the media type of the bodies a [Middleware] answers
// with (RFC 9457 problem details).
const ProblemContentType = "application/problem+json"

// NoIdentityPolicy says what a [Middleware] does with a request for which a
// rule's key function finds no identity (its error wraps [core.ErrNoIdentity]).
// The zero value is [NoIdentityNext].
type NoIdentityPolicy uint8

const (
	// NoIdentityNext skips the rule for that request, as if its Skip had
	// reported true: the middleware's other rules still apply, then the
	// next handler runs. The default. A rule that limits signed-in users by
	// their user ID thus leaves anonymous requests to the middleware's
	// other rules, such as a per-IP limit; to limit them by another
	// identity instead, give the rule a chain such as
	// keyfuncs.First(user, ip), which moves on to its next extractor.
	NoIdentityNext NoIdentityPolicy = iota
	// NoIdentity401 answers 401 Unauthorized, for routes that only
	// identified clients may use.
	NoIdentity401

	numNoIdentityPolicies = iota
)

// Config is the framework-neutral part of a middleware's
// configuration. Each adapter fills it from its own options; its zero value
// is the default of every field.
type Config struct {
	// Headers selects the rate-limit header fields; [HeadersBoth] by
	// default.
	Headers HeaderStyle
	// Draft selects the syntax of the IETF fields; [DefaultIETFDraft] by
	// default.
	Draft IETFDraft
	// FailClosedStatus is the status of the answer when the store is
	// unavailable and the Limiter fails closed: 503 Service Unavailable by
	// default. Any 4xx or 5xx status is accepted; 429 tells clients to slow
	// down rather than that the service is down.
	FailClosedStatus int
	// NoIdentity says what to do when a rule finds no identity;
	// [NoIdentityNext] by default.
	NoIdentity NoIdentityPolicy
}

// Middleware is the logic that every adapter shares: it checks a request
// against its rules and says what to answer, leaving only the translation to
// and from a framework's request and response to the adapter. It is safe
// for concurrent use.
type Middleware struct {
	check      func(context.Context, core.Request, []core.Rule) (core.Decision, error) // the core.Limiter's Check; tests replace it
	rules      []core.Rule
	cfg        Config
	limited    []byte // 429 body
	never      []byte // 429 body when no wait helps
	failClosed []byte
	noIdentity []byte
	failed     []byte
}

// New returns a Middleware that checks requests against rules with
// l. It validates the rules ([core.ValidateRules]) and cfg, and copies rules, so
// later changes to the slice have no effect. With IETF fields on, rule names
// must be printable ASCII, as structured-field strings are.
func New(l *core.Limiter, rules []core.Rule, cfg Config) (*Middleware, error) {
	if l == nil {
		return nil, errors.New("ratekit: adapter.New: nil Limiter")
	}
	if err := core.ValidateRules(rules); err != nil {
		return nil, err
	}
	switch {
	case cfg.Headers >= numHeaderStyles:
		return nil, fmt.Errorf("ratekit: unknown header style %d", cfg.Headers)
	case cfg.NoIdentity >= numNoIdentityPolicies:
		return nil, fmt.Errorf("ratekit: unknown no-identity policy %d", cfg.NoIdentity)
	case cfg.FailClosedStatus != 0 && (cfg.FailClosedStatus < 400 || cfg.FailClosedStatus > 599):
		return nil, fmt.Errorf("ratekit: fail-closed status %d is not a 4xx or 5xx status", cfg.FailClosedStatus)
	}
	if err := cfg.Draft.Validate(); err != nil {
		return nil, err
	}
	if cfg.Draft == 0 {
		cfg.Draft = DefaultIETFDraft
	}
	if cfg.FailClosedStatus == 0 {
		cfg.FailClosedStatus = http.StatusServiceUnavailable
	}
	m := &Middleware{check: l.Check, rules: slices.Clone(rules), cfg: cfg}
	for i := range m.rules {
		r := &m.rules[i]
		if cfg.Headers.ietf() && !validSFString(r.Name) {
			return nil, fmt.Errorf("%w: rule name %q is not printable ASCII, which the IETF rate-limit fields require (use HeadersLegacy or rename it)", core.ErrInvalidName, r.Name)
		}
		if cfg.NoIdentity == NoIdentityNext {
			r.Key = markNoIdentity(r.Name, r.Key)
		}
	}
	m.limited = Problem(http.StatusTooManyRequests, "The request exceeds a rate limit; retry after the number of seconds in Retry-After.")
	m.never = Problem(http.StatusTooManyRequests, "The request costs more than a rate limit allows at once; it will never be allowed.")
	m.failClosed = Problem(cfg.FailClosedStatus, "The rate limiter cannot decide right now; retry after the number of seconds in Retry-After.")
	m.noIdentity = Problem(http.StatusUnauthorized, "The request carries no identity to rate-limit.")
	m.failed = Problem(http.StatusInternalServerError, "The rate limiter failed.")
	return m, nil
}

// Outcome is what a [Middleware] decided for one request, and what the
// adapter should answer.
type Outcome struct {
	// Status is 0 when the request may proceed to the next handler, else
	// the status to answer with: 429 when it is limited, the fail-closed
	// status (503 by default) when the store is unavailable, 401 when a
	// rule found no identity under [NoIdentity401], 500 on any other error.
	Status int
	// Decision is the Limiter's decision; it has no results when an error
	// other than the store being unavailable stopped the check.
	Decision core.Decision
	// Headers are the fields to set on the response, whatever it is: the
	// rate-limit fields, plus Retry-After on a denial. When the store is
	// unavailable only Retry-After is set, since no rule's numbers are
	// known.
	Headers Headers
	// Err is nil for a decision, and otherwise the error that stopped it:
	// it wraps [core.ErrUnavailable] when the store is unavailable and the
	// Limiter fails closed, [core.ErrNoIdentity] under [NoIdentity401], and is a
	// misconfiguration (a cost below 1, a bad key) otherwise. Its text is
	// for logs, never for clients.
	Err error
	// Body is the default problem+json body ([ProblemContentType]) for
	// Status, nil when the request proceeds. It is shared: never modify it.
	Body []byte
}

// Proceed reports whether the request may go on to the next handler.
func (o *Outcome) Proceed() bool { return o.Status == 0 }

// Limited reports whether the request was denied by a rule: the answer is
// 429 and a custom denied handler applies.
func (o *Outcome) Limited() bool { return o.Status != 0 && o.Err == nil }

// Handle checks req against the middleware's rules with req's context, and
// returns what to answer.
func (m *Middleware) Handle(req core.Request) Outcome {
	ctx := req.Context()
	d, err := m.check(ctx, req, m.rules)
	if err != nil && m.cfg.NoIdentity == NoIdentityNext {
		var nie *noIdentityError
		if errors.As(err, &nie) {
			d, err = m.checkIdentified(req, nie)
		}
	}
	switch {
	case err == nil && d.Allowed:
		return Outcome{Decision: d, Headers: NewHeaders(d, m.cfg.Headers, m.cfg.Draft)}
	case err == nil:
		o := Outcome{Status: http.StatusTooManyRequests, Decision: d, Headers: NewHeaders(d, m.cfg.Headers, m.cfg.Draft), Body: m.limited}
		if lim, _ := d.LimitingResult(); lim.Never() {
			o.Body = m.never
		}
		return o
	case errors.Is(err, core.ErrUnavailable):
		return Outcome{Status: m.cfg.FailClosedStatus, Decision: d, Headers: retryAfterHeaders(longestRetry(d)), Err: err, Body: m.failClosed}
	case errors.Is(err, core.ErrNoIdentity):
		return Outcome{Status: http.StatusUnauthorized, Decision: d, Err: err, Body: m.noIdentity}
	default:
		return Outcome{Status: http.StatusInternalServerError, Decision: d, Err: err, Body: m.failed}
	}
}

// checkIdentified re-checks req without each rule that found no identity,
// one at a time, until a check succeeds or fails otherwise. It relies on
// [core.Limiter.Check] extracting every rule's identity before it spends
// anything, which it must to group rules by identity: a check that failed
// for want of an identity spent nothing.
func (m *Middleware) checkIdentified(req core.Request, nie *noIdentityError) (core.Decision, error) {
	rules := m.rules
	for {
		i := slices.IndexFunc(rules, func(r core.Rule) bool { return r.Name == nie.rule })
		if i < 0 { // cannot happen: the error names one of rules
			return core.Decision{Limiting: -1}, nie
		}
		rules = slices.Delete(slices.Clone(rules), i, i+1)
		if len(rules) == 0 {
			return core.Decision{Allowed: true, Limiting: -1}, nil
		}
		d, err := m.check(req.Context(), req, rules)
		if !errors.As(err, &nie) {
			return d, err
		}
	}
}

// noIdentityError marks which rule found no identity.
type noIdentityError struct {
	rule string
	err  error
}

func (e *noIdentityError) Error() string { return e.err.Error() }
func (e *noIdentityError) Unwrap() error { return e.err }

// markNoIdentity wraps key so that its no-identity errors name the rule.
func markNoIdentity(rule string, key core.KeyFunc) core.KeyFunc {
	return func(req core.Request) (string, error) {
		id, err := key(req)
		if err != nil && errors.Is(err, core.ErrNoIdentity) {
			return "", &noIdentityError{rule: rule, err: err}
		}
		return id, err
	}
}

// longestRetry returns the longest RetryAfter of d's denying results, 0 if
// none.
func longestRetry(d core.Decision) time.Duration {
	var retry time.Duration
	for _, r := range d.Results {
		if !r.Allowed {
			retry = max(retry, r.RetryAfter)
		}
	}
	return retry
}

// problem returns an RFC 9457 problem details body.
func Problem(status int, detail string) []byte {
	b, err := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{"about:blank", cmp.Or(http.StatusText(status), "Error"), status, detail})
	if err != nil {
		panic(err) // cannot happen: every field is a string or an int
	}
	return b
}
