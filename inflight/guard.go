package inflight

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/internal/storekey"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// Rule is one concurrency limit applied to requests: at most Limit
// requests of the identity that Key returns run at once. Key decides what
// is limited: a client (keyfuncs.IP, keyfuncs.APIKey), a route
// (keyfuncs.Route), or the whole service (a function that returns one
// constant identity, such as "all").
type Rule struct {
	// Name identifies the rule in storage keys, such as "uploads". Replicas
	// that share a Redis and name a rule alike share its cap. Rules of
	// [core.Limiter] name keys of their own kind: give this one another
	// name. At most [core.MaxNameLen] bytes, without '{', '}' or control
	// bytes.
	Name string
	// Limit is the most requests of one identity in flight at once, at
	// least 1.
	Limit int
	// Key returns the identity the rule limits. Required.
	Key core.KeyFunc
	// Skip reports whether the rule ignores a request; nil means never.
	Skip func(core.Request) bool
}

// Validate returns nil if the rule can be enforced, or an error that says
// what is wrong with it.
func (r *Rule) Validate() error {
	if err := storekey.ValidateName("rule name", r.Name, false); err != nil {
		return err
	}
	if r.Key == nil {
		return fmt.Errorf("%w: rule %q has no key function", core.ErrInvalidName, r.Name)
	}
	if r.Limit < 1 {
		return fmt.Errorf("%w: rule %q: concurrency limit %d (want at least 1)", core.ErrInvalidLimit, r.Name, r.Limit)
	}
	return nil
}

// Guard is what every adapter's concurrency middleware shares: it decides
// whether a request may start, and says what to answer, leaving only the
// translation to and from a framework's request and response to the
// adapter. It is safe for concurrent use. An adapter calls [Guard.Enter]
// when a request arrives, defers [Lease.Release] of the [Outcome]'s Lease
// (nil-safe), copies the Outcome's header, then runs the handler or writes
// the answer.
type Guard struct {
	l          *Limiter
	rule       Rule
	cfg        adapter.Config
	limited    []byte
	failClosed []byte
	noIdentity []byte
	ended      []byte
	failed     []byte
}

// NewGuard returns a Guard that caps requests by rule with l. Of cfg it
// reads FailClosedStatus (503 by default) and NoIdentity (skip the rule by
// default, or answer 401); the header style and draft do not apply, since
// a concurrency limit writes no rate-limit fields. It returns an error for
// a nil Limiter, an invalid rule or an invalid cfg, and one wrapping
// [adapter.ErrOptionMismatch] for a cfg with Rules or CountOnly, which only
// rate limits have.
func NewGuard(l *Limiter, rule Rule, cfg adapter.Config) (*Guard, error) {
	g, err := newGuard(l, rule, cfg)
	if err != nil {
		return nil, fmt.Errorf("inflight.NewGuard: %w", err)
	}
	return g, nil
}

// newGuard is [NewGuard], with errors that do not name it: an adapter's
// constructor names itself ([BuildGuard]).
func newGuard(l *Limiter, rule Rule, cfg adapter.Config) (*Guard, error) {
	if l == nil {
		return nil, errors.New("nil Limiter")
	}
	if err := rule.Validate(); err != nil {
		return nil, err
	}
	if cfg.FailClosedStatus == 0 {
		cfg.FailClosedStatus = http.StatusServiceUnavailable
	}
	switch {
	case cfg.FailClosedStatus < 400 || cfg.FailClosedStatus > 599:
		return nil, fmt.Errorf("fail-closed status %d is not a 4xx or 5xx status", cfg.FailClosedStatus)
	case cfg.NoIdentity != adapter.NoIdentityNext && cfg.NoIdentity != adapter.NoIdentity401:
		return nil, fmt.Errorf("unknown no-identity policy %d", cfg.NoIdentity)
	case cfg.Rules != nil || len(cfg.CountOnly) > 0:
		// a concurrency limit has one rule and counts every request in flight
		return nil, fmt.Errorf("%w: WithRuleSet and WithCountOnly are for rate limits", adapter.ErrOptionMismatch)
	}
	return &Guard{
		l: l, rule: rule, cfg: cfg,
		limited:    adapter.Problem(http.StatusTooManyRequests, "Too many requests of this client are in progress; retry after the number of seconds in Retry-After."),
		failClosed: adapter.Problem(cfg.FailClosedStatus, "The concurrency limiter cannot decide right now; retry after the number of seconds in Retry-After."),
		noIdentity: adapter.Problem(http.StatusUnauthorized, "The request does not identify its client, which this route requires."),
		ended:      adapter.Problem(http.StatusServiceUnavailable, "The request ended before the concurrency limiter could decide."),
		failed:     adapter.Problem(http.StatusInternalServerError, "The concurrency limiter failed."),
	}, nil
}

// Outcome is what a [Guard] says to do with one request.
type Outcome struct {
	// Status is 0 when the request may proceed, else the status to answer
	// with: 429 when the cap is reached, the fail-closed status (503 by
	// default) when Redis is unavailable and the Limiter fails closed, 401
	// for a request without identity under [adapter.NoIdentity401], 503
	// when the request's context ended before a decision, 500 otherwise.
	Status int
	// Lease is the slot the request holds while it runs, nil when it holds
	// none (skipped, or denied). Release it when the handler returns,
	// also when it panics: defer out.Lease.Release(ctx).
	Lease *Lease
	// Result is the Limiter's answer, zero when the rule did not apply.
	Result Result
	// Err is nil for a decision, and otherwise the error that stopped it:
	// it wraps [core.ErrUnavailable] when the Limiter fails closed,
	// [core.ErrNoIdentity] under [adapter.NoIdentity401],
	// context.Canceled or context.DeadlineExceeded when the request's
	// context ended before a decision, and is a misconfiguration or a
	// refusal of Redis otherwise. Its text is for logs, never for clients.
	Err error
	// Body is the default problem+json body ([adapter.ProblemContentType])
	// for Status, nil when the request proceeds. It is shared: never
	// modify it.
	Body []byte
}

// Proceed reports whether the request may go on to the next handler.
func (o *Outcome) Proceed() bool { return o.Status == 0 }

// Limited reports whether the cap denied the request: the answer is 429
// and a custom denied handler applies.
func (o *Outcome) Limited() bool { return o.Status != 0 && o.Err == nil }

// RetryAfter returns the Retry-After of the answer in whole seconds, 0 when
// it has none (only a denial or a fail-closed answer has one).
func (o *Outcome) RetryAfter() int64 {
	if o.Status == 0 || o.Result.RetryAfter <= 0 {
		return 0
	}
	return adapter.RetryAfterSeconds(o.Result.RetryAfter)
}

// SetHTTP sets Retry-After in dst when the answer has one. A longer
// Retry-After that an outer middleware has set is kept.
func (o *Outcome) SetHTTP(dst http.Header) {
	if v := o.retryAfter(dst.Get(adapter.HeaderRetryAfter)); v != "" {
		dst.Set(adapter.HeaderRetryAfter, v)
	}
}

// Set is [Outcome.SetHTTP] for a framework whose headers are not an
// [http.Header].
func (o *Outcome) Set(dst adapter.ResponseHeader) {
	if v := o.retryAfter(dst.Get(adapter.HeaderRetryAfter)); v != "" {
		dst.Set(adapter.HeaderRetryAfter, v)
	}
}

// retryAfter returns the Retry-After value to write over outer, or "".
func (o *Outcome) retryAfter(outer string) string {
	secs := o.RetryAfter()
	if secs == 0 {
		return ""
	}
	if n, err := strconv.ParseInt(outer, 10, 64); err == nil && n >= secs {
		return ""
	}
	return strconv.FormatInt(secs, 10)
}

// Enter decides whether req may start now, with req's context, and takes
// its slot if so.
func (g *Guard) Enter(req core.Request) Outcome {
	r := &g.rule
	if r.Skip != nil && r.Skip(req) {
		return Outcome{}
	}
	id, err := r.Key(req)
	if err == nil {
		id, err = g.l.Key(r.Name, id)
	}
	switch {
	case errors.Is(err, core.ErrNoIdentity) && g.cfg.NoIdentity == adapter.NoIdentityNext:
		return Outcome{}
	case errors.Is(err, core.ErrNoIdentity):
		return Outcome{Status: http.StatusUnauthorized, Err: fmt.Errorf("rule %q: %w", r.Name, err), Body: g.noIdentity}
	case err != nil:
		return Outcome{Status: http.StatusInternalServerError, Err: fmt.Errorf("rule %q: %w", r.Name, err), Body: g.failed}
	}
	lease, res, err := g.l.Acquire(req.Context(), id, r.Limit)
	switch {
	case err == nil && res.Allowed:
		return Outcome{Lease: lease, Result: res}
	case err == nil:
		return Outcome{Status: http.StatusTooManyRequests, Result: res, Body: g.limited}
	case errors.Is(err, core.ErrUnavailable):
		return Outcome{Status: g.cfg.FailClosedStatus, Result: res, Err: err, Body: g.failClosed}
	case tickctx.Ended(err):
		// the request's context ended first: not the limiter's failure
		return Outcome{Status: http.StatusServiceUnavailable, Result: res, Err: err, Body: g.ended}
	}
	return Outcome{Status: http.StatusInternalServerError, Result: res, Err: err, Body: g.failed}
}
