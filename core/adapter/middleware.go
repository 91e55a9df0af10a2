package adapter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/tickctx"
	"net/http"
	"slices"
	"sync/atomic"
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
	// Rules, when set, holds the middleware's rules instead of the rules
	// given to [New], which must then be empty: the middleware reads the
	// set's current rules at each request, so that [core.RuleSet.Replace]
	// takes effect at once. A replaced set whose rule names the IETF
	// fields cannot carry answers 500 until it is replaced again.
	Rules *core.RuleSet
	// CountOnly maps rule names to a predicate of the status of the
	// answer: such a rule counts only the answers its predicate picks,
	// such as 401 from a login handler. Its unit is spent (reserved) before
	// the next handler runs, so that concurrent requests cannot overrun
	// it, and given back ([core.Limiter.Refund]) when the handler's answer
	// is not to count. The status counted is the first one the answer
	// sends: a handler that answers 401 and then panics has answered 401;
	// one that panics before answering counts as a 500. The header fields
	// of an answer that does not count describe the quota once its unit is
	// given back, so they are set when its status goes out (the rule's cost
	// function is called once more, to know how much comes back); when
	// middlewares are stacked, such a middleware's IETF items follow those
	// of the middlewares inside it. The adapter follows the answer with a
	// [Tally].
	CountOnly map[string]func(status int) bool
	// Charged names the rules whose cost is known only once the answer is
	// done, such as a language model's tokens: the handler reports the
	// units of its answer as it produces them ([Meter]), and once it
	// returns (or panics) the adapter charges what it reported to those
	// rules, whatever they have left ([core.Limiter.ChargeDecision]), in
	// the background. A request is admitted while its key is not in debt;
	// the decision's own cost is part of the charge.
	Charged []string
}

// Middleware is the logic that every adapter shares: it checks a request
// against its rules and says what to answer, leaving only the translation to
// and from a framework's request and response to the adapter. It is safe
// for concurrent use.
type Middleware struct {
	check      func(context.Context, core.Request, []core.Rule, []core.RuleResult) (core.Decision, error) // the core.Limiter's CheckInto; tests replace it
	refund     func(context.Context, core.Decision, ...string) error                                      // the core.Limiter's Refund
	charge     func(context.Context, core.Decision, int, ...string) ([]core.ChargeResult, error)          // the core.Limiter's ChargeDecision
	rules      []core.Rule                                                                                // without cfg.Rules
	view       atomic.Pointer[ruleView]                                                                   // with cfg.Rules
	cfg        Config
	limited    []byte // 429 body
	never      []byte // 429 body when no wait helps
	failClosed []byte
	noIdentity []byte
	ended      []byte
	failed     []byte
}

// New returns a Middleware that checks requests against rules with
// l. It validates the rules ([core.NewRuleSet]) and cfg, and copies rules, so
// later changes to the slice have no effect. With IETF fields on, rule names
// must be printable ASCII, as structured-field strings are. With
// [Config.Rules] set, rules must be empty: the set holds them.
func New(l *core.Limiter, rules []core.Rule, cfg Config) (*Middleware, error) {
	m, err := newMiddleware(l, rules, cfg)
	if err != nil {
		return nil, fmt.Errorf("adapter.New: %w", err)
	}
	return m, nil
}

// newMiddleware is [New], with errors that do not name it: an adapter's
// constructor names itself ([Build]).
func newMiddleware(l *core.Limiter, rules []core.Rule, cfg Config) (*Middleware, error) {
	if l == nil {
		return nil, errors.New("nil Limiter")
	}
	if err := cfg.validate(rules); err != nil {
		return nil, err
	}
	if cfg.Draft == 0 {
		cfg.Draft = DefaultIETFDraft
	}
	if cfg.FailClosedStatus == 0 {
		cfg.FailClosedStatus = http.StatusServiceUnavailable
	}
	m := &Middleware{check: l.CheckInto, refund: l.Refund, charge: l.ChargeDecision, cfg: cfg}
	if cfg.Rules != nil {
		rules = cfg.Rules.Rules()
	}
	prepared, err := m.prepare(rules)
	if err != nil {
		return nil, err
	}
	if cfg.Rules != nil {
		m.view.Store(&ruleView{src: &rules[0], rules: prepared})
	} else {
		m.rules = prepared
	}
	m.limited = Problem(http.StatusTooManyRequests, "The request exceeds a rate limit; retry after the number of seconds in Retry-After.")
	m.never = Problem(http.StatusTooManyRequests, "The request costs more than a rate limit allows at once; it will never be allowed.")
	m.failClosed = Problem(cfg.FailClosedStatus, "The rate limiter cannot decide right now; retry after the number of seconds in Retry-After.")
	m.noIdentity = Problem(http.StatusUnauthorized, "The request carries no identity to rate-limit.")
	m.ended = Problem(http.StatusServiceUnavailable, "The request ended before the rate limiter could decide.")
	m.failed = Problem(http.StatusInternalServerError, "The rate limiter failed.")
	return m, nil
}

// validate checks cfg, and rules unless cfg.Rules holds them.
func (cfg *Config) validate(rules []core.Rule) error {
	if cfg.Rules != nil {
		if len(rules) > 0 {
			return errors.New("rules given both to New and in a RuleSet")
		}
	} else if _, err := core.NewRuleSet(rules); err != nil {
		return err
	}
	for name, count := range cfg.CountOnly {
		if count == nil {
			return fmt.Errorf("CountOnly: rule %q: %w", name, ErrNilFunc)
		}
		if cfg.Rules == nil && !slices.ContainsFunc(rules, func(r core.Rule) bool { return r.Name == name }) {
			return fmt.Errorf("%w: CountOnly names rule %q, which the middleware does not have", core.ErrInvalidName, name)
		}
	}
	switch {
	case cfg.Headers >= numHeaderStyles:
		return fmt.Errorf("unknown header style %d", cfg.Headers)
	case cfg.NoIdentity >= numNoIdentityPolicies:
		return fmt.Errorf("unknown no-identity policy %d", cfg.NoIdentity)
	case cfg.FailClosedStatus != 0 && (cfg.FailClosedStatus < 400 || cfg.FailClosedStatus > 599):
		return fmt.Errorf("fail-closed status %d is not a 4xx or 5xx status", cfg.FailClosedStatus)
	}
	return cfg.Draft.Validate()
}

// ruleView is the middleware's copy of a RuleSet's current rules, prepared.
type ruleView struct {
	src   *core.Rule // the first rule of the set's slice: a replaced set has another
	rules []core.Rule
	err   error // the set's rules cannot be prepared
}

// prepare returns a copy of rules made ready for the middleware: names the
// header fields can carry, and no-identity errors that name their rule.
func (m *Middleware) prepare(rules []core.Rule) ([]core.Rule, error) {
	rules = slices.Clone(rules)
	for i := range rules {
		r := &rules[i]
		if m.cfg.Headers.ietf() && !validSFString(r.Name) {
			return nil, fmt.Errorf("%w: rule name %q is not printable ASCII, which the IETF rate-limit fields require (use HeadersLegacy or rename it)", core.ErrInvalidName, r.Name)
		}
		if m.cfg.NoIdentity == NoIdentityNext {
			r.Key = markNoIdentity(r.Name, r.Key)
		}
	}
	return rules, nil
}

// current returns the rules to check a request against: the set's
// current ones, prepared once per replacement.
func (m *Middleware) current() ([]core.Rule, error) {
	if m.cfg.Rules == nil {
		return m.rules, nil
	}
	src := m.cfg.Rules.Rules()
	v := m.view.Load()
	if v.src != &src[0] {
		next := &ruleView{src: &src[0]}
		next.rules, next.err = m.prepare(src)
		m.view.CompareAndSwap(v, next) // a lost race stored the same view
		v = next
	}
	return v.rules, v.err
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
	// Limiter fails closed, [core.ErrNoIdentity] under [NoIdentity401],
	// context.Canceled or context.DeadlineExceeded when the request's
	// context ended before a decision (Status 503: the client is gone or
	// out of time, and the limiter did not fail), and is a misconfiguration
	// (a cost below 1, a bad key) otherwise. Its text is for logs, never
	// for clients.
	Err error
	// Body is the default problem+json body ([ProblemContentType]) for
	// Status, nil when the request proceeds. It is shared: never modify it.
	Body []byte

	// costs holds, for a request that proceeds under rules that count
	// only some answers, the units each result spent of such a rule (0 for
	// the others), in the order of Decision.Results: what a refund gives
	// back, for the fields of an answer that does not count.
	costs []int32
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
	rules, err := m.current()
	if err != nil {
		return Outcome{Status: http.StatusInternalServerError, Decision: core.Decision{Limiting: -1}, Err: err, Body: m.failed}
	}
	// One block per request holds what outlives Handle: the decision's
	// results and the text of its header fields.
	var sc *scratch
	var results []core.RuleResult
	if len(rules) > 0 {
		sc = new(scratch)
		results = sc.results[:0]
	}
	d, err := m.check(ctx, req, rules, results)
	if err != nil && m.cfg.NoIdentity == NoIdentityNext {
		var nie *noIdentityError
		if errors.As(err, &nie) {
			d, err = m.checkIdentified(req, rules, nie)
		}
	}
	switch {
	case err == nil && d.Allowed:
		o := Outcome{Decision: d, Headers: m.headers(d, sc)}
		if m.Counting() {
			o.costs = m.countOnlyCosts(req, rules, d, sc)
		}
		return o
	case err == nil:
		o := Outcome{Status: http.StatusTooManyRequests, Decision: d, Headers: m.headers(d, sc), Body: m.limited}
		if d.Limiting >= 0 && d.Results[d.Limiting].Never() {
			o.Body = m.never
		}
		return o
	case errors.Is(err, core.ErrUnavailable):
		return Outcome{Status: m.cfg.FailClosedStatus, Decision: d, Headers: retryAfterHeaders(longestRetry(d)), Err: err, Body: m.failClosed}
	case errors.Is(err, core.ErrNoIdentity):
		return Outcome{Status: http.StatusUnauthorized, Decision: d, Err: err, Body: m.noIdentity}
	case tickctx.Ended(err):
		// the request's context ended first: not the limiter's failure
		return Outcome{Status: http.StatusServiceUnavailable, Decision: d, Err: err, Body: m.ended}
	default:
		return Outcome{Status: http.StatusInternalServerError, Decision: d, Err: err, Body: m.failed}
	}
}

// scratch is the memory of one request's decision that outlives
// [Middleware.Handle]: its results, and the text of its header fields once
// they are set on an [http.Header]. A request of at most scratchRules rules
// whose fields fit it allocates nothing else for them.
type scratch struct {
	results [scratchRules]core.RuleResult
	costs   [scratchRules]int32
	vals    httpValues
}

// scratchRules is how many rules' results a scratch holds.
const scratchRules = 2

// headers returns d's header fields, which [Headers.SetHTTP] sets from sc's
// memory when sc is not nil.
func (m *Middleware) headers(d core.Decision, sc *scratch) Headers {
	h := NewHeaders(d, m.cfg.Headers, m.cfg.Draft)
	if sc != nil {
		h.spare = &sc.vals
	}
	return h
}

// Counting reports whether the middleware has rules that count only some
// answers ([Config.CountOnly]): the adapter must then call [Middleware.Done]
// with the status of each answer.
func (m *Middleware) Counting() bool { return len(m.cfg.CountOnly) > 0 }

// Done tells the middleware the status of the answer to a request that
// out was decided for, whatever answered it (the next handler, a denial,
// an error): each rule of [Config.CountOnly] whose predicate does not pick
// status gives back what the request spent of it. ctx is the request's
// context: its values reach the store, its cancellation does not, since a
// client gone does not make its answer count. Done returns the refund's
// error, which the Limiter also reports to its logger and OnError hook.
func (m *Middleware) Done(ctx context.Context, out *Outcome, status int) error {
	if len(m.cfg.CountOnly) == 0 || len(out.Decision.Results) == 0 {
		return nil
	}
	var buf [4]string
	skip := buf[:0]
	for name, count := range m.cfg.CountOnly {
		if !count(status) {
			skip = append(skip, name)
		}
	}
	if len(skip) == 0 {
		return nil
	}
	return m.refund(context.WithoutCancel(ctx), out.Decision, skip...)
}

// checkIdentified re-checks req without each rule that found no identity,
// one at a time, until a check succeeds or fails otherwise. It relies on
// [core.Limiter.Check] extracting every rule's identity before it spends
// anything, which it must to group rules by identity: a check that failed
// for want of an identity spent nothing.
func (m *Middleware) checkIdentified(req core.Request, rules []core.Rule, nie *noIdentityError) (core.Decision, error) {
	for {
		i := slices.IndexFunc(rules, func(r core.Rule) bool { return r.Name == nie.rule })
		if i < 0 { // cannot happen: the error names one of rules
			return core.Decision{Limiting: -1}, nie
		}
		rules = slices.Delete(slices.Clone(rules), i, i+1)
		if len(rules) == 0 {
			return core.Decision{Allowed: true, Limiting: -1}, nil
		}
		d, err := m.check(req.Context(), req, rules, nil)
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

// Problem returns an RFC 9457 problem details body.
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
