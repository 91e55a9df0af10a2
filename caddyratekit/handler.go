package caddyratekit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// ErrLimited is the error of a request that a rule denied: the handler
// returns it inside a caddyhttp.HandlerError of status 429, which
// handle_errors sees as {http.error.status_code} 429 and
// {http.error.message}.
var ErrLimited = errors.New("ratekit: rate limit exceeded")

// Handler limits the requests it sees with ratekit's rules, held in Redis
// and so shared by every Caddy instance on that Redis. Module ID
// http.handlers.ratekit. Each request is checked against all Rules at
// once; an allowed request goes on to the next handler, and a denied one
// spends nothing and is answered by Caddy's error routes with 429 (see
// [ErrLimited]). Either way the response carries the rate-limit header
// fields, and the decision is in the {http.ratekit.*} placeholders.
type Handler struct {
	// Redis holds the limits. Required.
	Redis Redis `json:"redis"`

	// Rules are the limits to check each request against. Rules with the
	// same keys are decided all or nothing in one Redis script; rules of
	// other keys one key after the other, and a denial gives back what
	// the rules before it spent, so a denied request spends nothing.
	// At least one is required; no two may share a name.
	Rules []Rule `json:"rules"`

	// Prefix starts every Redis key; "ratekit:" by default. Instances
	// that share a limit must share the prefix.
	Prefix string `json:"prefix,omitempty"`

	// Timeout is the deadline of each Redis call; 50ms by default. A call
	// that misses it is a Redis failure, decided by Fail, so no request
	// waits for Redis much longer than this, however it fails.
	Timeout caddy.Duration `json:"timeout,omitempty"`

	// Fail says how requests are decided while Redis is unavailable:
	// "local" (the default) counts in this instance's memory, each
	// instance allowing its share of a limit (see Replicas); "open"
	// allows; "closed" answers FailClosedStatus with Retry-After.
	Fail string `json:"fail,omitempty"`

	// FailClosedStatus is the status of the answer under fail closed:
	// 503 by default; any 4xx or 5xx.
	FailClosedStatus int `json:"fail_closed_status,omitempty"`

	// Replicas is how many Caddy instances share the limits: while Redis
	// is unavailable under fail local, each one allows 1/Replicas of each
	// limit (rounded up), so that the fleet stays near its limit. 1 by
	// default.
	Replicas int `json:"replicas,omitempty"`

	// Breaker configures the circuit breaker that stops calling a Redis
	// that keeps failing, so that an outage costs most requests no wait
	// at all, and probes it until it answers again.
	Breaker *Breaker `json:"breaker,omitempty"`

	// DeniedCache is how many denied keys each instance remembers until
	// their retry-after, answering a client that hammers past its limit
	// without a Redis call (exact answers, never guesses); 65536 by
	// default, 0 turns it off.
	DeniedCache *int `json:"denied_cache,omitempty"`

	// Lease turns on hot-key leasing, which trades exactness (a bounded
	// overshoot) for Redis calls; off by default.
	Lease *Lease `json:"lease,omitempty"`

	// Batching pipelines concurrent Redis calls over one server (the
	// default, true); false sends each call alone.
	Batching *bool `json:"batching,omitempty"`

	// Headers selects the rate-limit header fields: "both" (the
	// default: X-RateLimit-* and the IETF RateLimit-Policy and RateLimit),
	// "legacy", "ietf" or "none". Retry-After is sent on a denial
	// whatever the style.
	Headers string `json:"headers,omitempty"`

	// IETFDraft is the revision of the IETF draft whose syntax the
	// RateLimit fields follow; 10 (drafts -10 and -11), the only one
	// supported so far, by default.
	IETFDraft int `json:"ietf_draft,omitempty"`

	// NoIdentity says what happens to a request in which a rule's keys
	// find no identity: "next" (the default) skips that rule, "401"
	// answers 401 through the error routes.
	NoIdentity string `json:"no_identity,omitempty"`

	shared     limiterUse // shared.sharedLimiter is nil before Provision and after Cleanup
	mw         *adapter.Middleware
	matchers   bool // a rule has matchers, whose errors go to the route
	usesIP     bool // a rule keys by client IP
	logger     *zap.Logger
	warnedLeft *atomic.Bool // warned about trusted_proxies without strict
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.ratekit",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision checks the configuration (as Validate does, before anything
// is opened), builds the rules, and takes the shared Redis client and
// Limiter of its configuration, making them if no handler uses them yet.
// It does not wait for Redis: an instance starts while Redis is down, and
// decides by its Fail policy until Redis answers.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	h.warnedLeft = new(atomic.Bool)
	if err := h.validate(); err != nil {
		return err
	}
	repl := caddy.NewReplacer() // global placeholders: {env.*}, {file.*}, ...
	rules, err := h.buildRules(ctx, repl)
	if err != nil {
		return err
	}
	bc, err := h.backendConfig(repl)
	if err != nil {
		return err
	}
	lc := limiterConfig{
		Prefix: h.Prefix, Timeout: time.Duration(h.Timeout), Fail: h.Fail, Replicas: h.Replicas, DeniedCache: h.DeniedCache, Lease: h.Lease,
	}
	if h.Breaker != nil {
		lc.Breaker = *h.Breaker
	}
	h.shared, err = acquireLimiter(bc, lc, ctx.Slogger())
	if err != nil {
		return err
	}
	h.mw, err = adapter.New(h.shared.limiter, rules, adapter.Config{
		Headers:          headerStyles[h.headerStyle()],
		Draft:            adapter.IETFDraft(h.IETFDraft),
		FailClosedStatus: h.FailClosedStatus,
		NoIdentity:       noIdentityPolicies[h.noIdentity()],
	})
	return err // Caddy calls Cleanup when Provision fails
}

// Validate checks the configuration: the Redis URLs, every rule, the
// options' names and ranges. Provision checks it too, before it opens
// anything, so a handler that fails here never connected to Redis.
func (h *Handler) Validate() error { return h.validate() }

// Cleanup lets go of the shared Limiter and Redis client, closing them
// when no other handler (of this config or of the one a reload brings)
// uses them.
func (h *Handler) Cleanup() error {
	if h.shared.sharedLimiter == nil {
		return nil
	}
	use := h.shared
	h.shared, h.mw = limiterUse{}, nil
	return use.release()
}

func (h *Handler) headerStyle() string { return cmp.Or(h.Headers, "both") }
func (h *Handler) noIdentity() string  { return cmp.Or(h.NoIdentity, "next") }

// validate checks everything that can be checked without building.
func (h *Handler) validate() error {
	if err := h.Redis.validate(); err != nil {
		return err
	}
	if len(h.Rules) == 0 {
		return configErr("at least one rule is required")
	}
	names := make([]core.Rule, 0, len(h.Rules))
	for i := range h.Rules {
		r := &h.Rules[i]
		lim, err := r.validate()
		if err != nil {
			return err
		}
		if slices.ContainsFunc(h.Rules[:i], func(o Rule) bool { return o.Name == r.Name }) {
			return configErr("two rules are named %q", r.Name)
		}
		names = append(names, core.Rule{Name: r.Name, Limit: lim, Key: keyfuncs.Static("")})
	}
	if _, err := core.NewRuleSet(names); err != nil { // the names' syntax
		return err
	}
	if _, ok := headerStyles[h.headerStyle()]; !ok {
		return configErr("unknown headers style %q (want both, legacy, ietf or none)", h.Headers)
	}
	if _, ok := noIdentityPolicies[h.noIdentity()]; !ok {
		return configErr("unknown no_identity %q (want next or 401)", h.NoIdentity)
	}
	if h.Fail != "" {
		if _, err := core.ParseFailurePolicy(h.Fail); err != nil {
			return configErr("unknown fail policy %q (want local, open or closed)", h.Fail)
		}
	}
	if err := adapter.IETFDraft(h.IETFDraft).Validate(); err != nil {
		return err
	}
	switch {
	case h.Timeout < 0:
		return configErr("timeout must be positive")
	case h.FailClosedStatus != 0 && (h.FailClosedStatus < 400 || h.FailClosedStatus > 599):
		return configErr("fail_closed_status %d is not a 4xx or 5xx status", h.FailClosedStatus)
	case h.Replicas < 0:
		return configErr("replicas must be positive")
	case h.DeniedCache != nil && *h.DeniedCache < 0:
		return configErr("denied_cache must not be negative")
	}
	if l := h.Lease; l != nil && (l.Size < 0 || l.Hold < 0) {
		return configErr("lease: size and hold must not be negative")
	}
	if b := h.Breaker; b != nil && (b.Failures < 0 || b.Backoff < 0 || b.MaxBackoff < 0) {
		return configErr("breaker: failures, backoff and max_backoff must not be negative")
	}
	return nil
}

// buildRules returns the core rules of h.Rules, loading their matchers.
func (h *Handler) buildRules(ctx caddy.Context, repl *caddy.Replacer) ([]core.Rule, error) {
	rules := make([]core.Rule, 0, len(h.Rules))
	h.matchers, h.usesIP = false, false
	for i := range h.Rules {
		r := &h.Rules[i]
		lim, err := r.validate()
		if err != nil {
			return nil, err
		}
		keys := r.Keys
		if len(keys) == 0 {
			keys = []Key{{Source: SourceIP}}
		}
		fns := make([]core.KeyFunc, 0, len(keys))
		for j := range keys {
			fn, err := keys[j].build(repl)
			if err != nil {
				return nil, fmt.Errorf("rule %q: key %s: %w", r.Name, keys[j].Source, err)
			}
			fns = append(fns, fn)
			h.usesIP = h.usesIP || keys[j].Source == SourceIP
		}
		cr := core.Rule{Name: r.Name, Limit: lim, Key: fns[0], Shadow: r.Shadow}
		if len(fns) > 1 {
			cr.Key = keyfuncs.First(fns...)
		}
		if r.Cost > 1 {
			cost := r.Cost
			cr.Cost = func(core.Request) int { return cost }
		}
		if len(r.MatcherSetsRaw) > 0 {
			mods, err := ctx.LoadModule(r, "MatcherSetsRaw")
			if err != nil {
				return nil, fmt.Errorf("rule %q: loading matchers: %w", r.Name, err)
			}
			r.matchers = nil
			if err := r.matchers.FromInterface(mods); err != nil {
				return nil, fmt.Errorf("rule %q: %w", r.Name, err)
			}
			cr.Skip = skipUnmatched(r.matchers)
			h.matchers = true
		}
		rules = append(rules, cr)
	}
	return rules, nil
}

// matcherErrKey is the request variable that holds a rule matcher's error.
const matcherErrKey = "ratekit.matcher_error"

// skipUnmatched returns a Rule.Skip that skips the requests none of sets
// matches. A matcher's error skips the rule and is kept in the request's
// variables, for ServeHTTP to return.
func skipUnmatched(sets caddyhttp.MatcherSets) func(core.Request) bool {
	return func(req core.Request) bool {
		q, ok := req.(request)
		if !ok {
			return true
		}
		match, err := sets.AnyMatchWithError(q.r)
		if err != nil {
			caddyhttp.SetVar(q.r.Context(), matcherErrKey, err)
			return true
		}
		return !match
	}
}

// backendConfig returns the configuration of h's Redis client and store,
// placeholders replaced.
func (h *Handler) backendConfig(repl *caddy.Replacer) (backendConfig, error) {
	bc := backendConfig{NoBatching: h.Batching != nil && !*h.Batching}
	for _, f := range []struct {
		name string
		src  string
		dst  *string
	}{{"url", h.Redis.URL, &bc.Redis.URL}, {"cluster_url", h.Redis.ClusterURL, &bc.Redis.ClusterURL}, {"sentinel_url", h.Redis.SentinelURL, &bc.Redis.SentinelURL}} {
		if f.src == "" {
			continue
		}
		v, err := repl.ReplaceOrErr(f.src, true, true)
		if err != nil {
			return bc, configErr("redis %s %q: %v", f.name, f.src, err)
		}
		*f.dst = v
	}
	return bc, nil
}

// Placeholders that the handler sets for each request it decides.
const (
	PlaceholderAllowed    = "http.ratekit.allowed"     // true or false
	PlaceholderLimit      = "http.ratekit.limit"       // the limiting rule's capacity, as in X-RateLimit-Limit
	PlaceholderRemaining  = "http.ratekit.remaining"   // units left under the limiting rule
	PlaceholderReset      = "http.ratekit.reset"       // seconds until the limiting rule is full again
	PlaceholderRetryAfter = "http.ratekit.retry_after" // seconds to wait, as in Retry-After; 0 when allowed
	PlaceholderRule       = "http.ratekit.rule"        // the limiting rule's name
	PlaceholderDegraded   = "http.ratekit.degraded"    // true when decided without Redis
)

// ServeHTTP checks r against the rules, sets the header fields and
// placeholders, and calls next when the request is allowed. Otherwise it
// returns a caddyhttp.HandlerError for the error routes: 429 wrapping
// [ErrLimited] when a rule denies; the fail-closed status (503 by default)
// wrapping core.ErrUnavailable when Redis is down under fail closed; 401
// wrapping core.ErrNoIdentity under no_identity 401; 503 wrapping the
// request's context's error when the request ended (its client gone)
// before a decision; 500 when a rule's matcher fails or the configuration
// is wrong.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	vars, _ := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any) // Caddy's request variables
	if h.usesIP && !h.warnedLeft.Load() {
		h.checkProxies(r, vars)
	}
	out := h.mw.Handle(request{r})
	out.Headers.SetHTTP(w.Header())
	setPlaceholders(r, vars, &out)
	if h.matchers {
		if err, ok := vars[matcherErrKey].(error); ok {
			h.giveBack(r.Context(), &out)
			return caddyhttp.Error(http.StatusInternalServerError, err)
		}
	}
	switch {
	case out.Proceed():
		return next.ServeHTTP(w, r)
	case out.Limited():
		h.giveBack(r.Context(), &out)
		return caddyhttp.Error(http.StatusTooManyRequests, ErrLimited)
	default:
		return caddyhttp.Error(out.Status, out.Err)
	}
}

// giveBack refunds what a request that does not proceed spent: the rules
// of other keys that allowed it before one denied it.
func (h *Handler) giveBack(ctx context.Context, out *adapter.Outcome) {
	if !slices.ContainsFunc(out.Decision.Results, func(r core.RuleResult) bool { return r.Allowed }) {
		return
	}
	// the Limiter logs a failed refund; the units then stay spent
	_ = h.shared.limiter.Refund(context.WithoutCancel(ctx), out.Decision)
}

// checkProxies warns, once per handler, when a request came through a
// trusted proxy of a server without trusted_proxies_strict: Caddy then
// takes the leftmost address of the client IP headers for the client's,
// an address the client itself can write, so that it picks its own bucket.
func (h *Handler) checkProxies(r *http.Request, vars map[string]any) {
	if trusted, _ := vars[caddyhttp.TrustedProxyVarKey].(bool); !trusted {
		return
	}
	srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok || srv == nil || srv.TrustedProxiesStrict > 0 {
		return
	}
	if h.warnedLeft.CompareAndSwap(false, true) {
		h.logger.Warn("trusted_proxies is set without trusted_proxies_strict: Caddy takes the client IP from the leftmost X-Forwarded-For address, which clients write themselves, so a client behind a trusted proxy can choose its own rate limit; set trusted_proxies_strict",
			zap.String("server", srv.Name()))
	}
}

// setPlaceholders publishes out's decision in the request's replacer. The
// values are computed only when a placeholder is read, which most
// requests never do: the first ratekit handler of a request adds one
// provider to the replacer, and each sets the decision it reads, so the
// last handler's decision is the one the placeholders tell.
func setPlaceholders(r *http.Request, reqVars map[string]any, out *adapter.Outcome) {
	vars, ok := reqVars[placeholdersKey].(*decisionVars)
	if !ok {
		repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
		if !ok || reqVars == nil {
			return
		}
		vars = new(decisionVars)
		repl.Map(vars.get)
		reqVars[placeholdersKey] = vars
	}
	d := &out.Decision
	*vars = decisionVars{allowed: out.Proceed(), degraded: d.Degraded(), retryAfter: out.Headers.Get(adapter.HeaderRetryAfter)}
	if d.Limiting >= 0 && d.Limiting < len(d.Results) {
		lim := &d.Results[d.Limiting]
		vars.limited = true
		vars.limit, vars.remaining, vars.reset, vars.rule = lim.Limit.Capacity(), lim.Remaining, ceilSeconds(lim.ResetAfter), lim.Rule
	}
}

// placeholdersKey is the request variable that holds a request's
// *decisionVars.
const placeholdersKey = "ratekit.placeholders"

// decisionVars is what the placeholders of one request's decision say.
type decisionVars struct {
	allowed, degraded bool
	retryAfter        string // Retry-After's value; "" when there is none
	limited           bool   // a rule applied: the fields below are set
	limit, remaining  int
	reset             int64
	rule              string
}

// get is the replacer's provider of the {http.ratekit.*} placeholders.
func (v *decisionVars) get(key string) (any, bool) {
	switch key {
	case PlaceholderAllowed:
		return v.allowed, true
	case PlaceholderDegraded:
		return v.degraded, true
	case PlaceholderRetryAfter:
		return cmp.Or(v.retryAfter, "0"), true
	case PlaceholderLimit, PlaceholderRemaining, PlaceholderReset, PlaceholderRule:
		if !v.limited {
			return "", true
		}
	default:
		return nil, false
	}
	switch key {
	case PlaceholderLimit:
		return v.limit, true
	case PlaceholderRemaining:
		return v.remaining, true
	case PlaceholderReset:
		return v.reset, true
	}
	return v.rule, true
}

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
