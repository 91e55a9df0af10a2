package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// ErrUnavailable is returned, wrapping the store's own error, when the store
// could not decide and the failure policy is to fail closed: the request is
// denied (Decision.Allowed is false, every result Degraded) and adapters
// answer 503 with Retry-After.
var ErrUnavailable = errors.New("ratekit: store unavailable")

// Rule is one named limit applied to requests: every request that the rule
// does not skip spends Cost units of Limit from the identity that Key
// returns. Rules are plain values; [Rule.Validate] checks one, and every
// constructor that takes rules validates them, so a bad rule fails at start-up,
// never at request time.
type Rule struct {
	// Name identifies the rule in storage keys, headers and metrics, such
	// as "default" or "login". Replicas that share a Redis and name a rule
	// alike share its limit. See [ValidateName] for what it may contain.
	Name string
	// Limit is the rate the rule enforces.
	Limit Limit
	// Key returns the identity the rule limits. Required.
	Key KeyFunc
	// Cost returns how many units a request spends; nil means 1. A cost
	// below 1 is an error of the request.
	Cost func(Request) int
	// Skip reports whether the rule ignores a request; nil means never.
	Skip func(Request) bool
	// Shadow puts the rule in shadow (dry-run) mode: it is decided, spent,
	// reported in headers and told to observers as usual, but never denies
	// a request. Use it to try a new limit on live traffic and watch what
	// it would deny before enforcing it. [WithShadow] does this for every
	// rule of a Limiter.
	Shadow bool
}

// Validate returns nil if the rule can be enforced, or an error that says
// what is wrong with it.
func (r Rule) Validate() error {
	if err := ValidateName("rule name", r.Name, false); err != nil {
		return err
	}
	if r.Key == nil {
		return fmt.Errorf("%w: rule %q has no key function", ErrInvalidName, r.Name)
	}
	if err := r.Limit.Validate(); err != nil {
		return fmt.Errorf("rule %q: %w", r.Name, err)
	}
	return nil
}

// ValidateRules validates each rule and checks that no two share a name.
func ValidateRules(rules []Rule) error {
	if len(rules) == 0 {
		return fmt.Errorf("%w: no rules", ErrInvalidName)
	}
	seen := make(map[string]bool, len(rules))
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			return err
		}
		if seen[r.Name] {
			return fmt.Errorf("%w: two rules named %q", ErrInvalidName, r.Name)
		}
		seen[r.Name] = true
	}
	return nil
}

// RuleResult is one rule's part of a [Decision].
type RuleResult struct {
	// Rule is the rule's name.
	Rule string
	Result
	// Shadow reports that the rule was in shadow mode: when Allowed is
	// false, the rule would have denied the request but did not.
	Shadow bool
}

// Decision is the outcome of checking a request against a set of rules.
type Decision struct {
	// Allowed reports whether the request may proceed: every rule that
	// applied allowed it.
	Allowed bool
	// Results holds one entry per rule that applied (skipped rules are
	// absent), in rule order.
	Results []RuleResult
	// Limiting indexes Results: the most restrictive rule, which drives the
	// X-RateLimit-* headers. It is the denying rule with the longest
	// RetryAfter when the request is denied, else a shadow rule that would
	// have denied it, else the rule with the fewest units remaining. -1
	// when no rule applied.
	Limiting int
}

// LimitingResult returns the most restrictive rule's result, and false when no
// rule applied.
func (d Decision) LimitingResult() (RuleResult, bool) {
	if d.Limiting < 0 || d.Limiting >= len(d.Results) {
		return RuleResult{}, false
	}
	return d.Results[d.Limiting], true
}

// ShadowDenied reports whether a rule in shadow mode would have denied the
// request.
func (d Decision) ShadowDenied() bool {
	for _, r := range d.Results {
		if r.Shadow && !r.Allowed {
			return true
		}
	}
	return false
}

// Degraded reports whether any rule was decided without the shared store.
func (d Decision) Degraded() bool {
	for _, r := range d.Results {
		if r.Degraded {
			return true
		}
	}
	return false
}

// Limiter checks requests against rules with a [Store], and keeps deciding
// when the store fails. It is safe for concurrent use, and one Limiter
// serves any number of middlewares and rule sets.
//
// Every store call has a deadline ([WithTimeout], 50 ms by default), kept
// even by a Redis that accepts connections but no longer answers. When the
// store fails, the [FailurePolicy] decides ([WithFailurePolicy]; local
// counting by default), and marks the results Degraded. After consecutive
// failures a circuit breaker ([WithBreaker]) stops calling the store:
// decisions then cost no store call and no wait, and a background probe,
// one at a time on a backoff with jitter, closes the breaker once the store
// answers again. Denials the store made are remembered until their
// retry-after ([WithDeniedCache]), so a client hammering past its limit
// costs the store nothing; such answers are exact, never guesses.
//
// A Limiter runs goroutines only while it has work for them (store calls in
// flight, a probe during an outage): [Limiter.Close] stops them and waits.
type Limiter struct {
	store    Store
	prefix   string
	policy   FailurePolicy
	timeout  time.Duration
	replicas int

	// mem is the store when it is a *MemoryStore, whose calls never block
	// nor fail: no deadline goroutine, breaker, fallback or cache is needed.
	mem           *MemoryStore
	direct        bool         // the store keeps deadlines itself: no goroutine per call
	fallbackStore *MemoryStore // FailLocal only
	fallbackOpts  []MemoryOption
	denied        *deniedCache // nil when off
	deniedSize    int

	brk         breaker
	probeChecks []Check
	timeoutErr  error

	shadow     bool
	observer   Observer // nil when none; several are an observers
	logger     *slog.Logger
	onError    func(error)
	onBreaker  func(from, to BreakerState)
	errLog     logBudget
	breakerLog logBudget

	now func() int64 // monotonic time in ns; tests may replace it

	mu         sync.RWMutex // guards closed against wg.Add
	closed     bool
	stop       chan struct{}
	stopCtx    context.Context
	cancelStop context.CancelFunc
	wg         sync.WaitGroup // store calls in flight and the prober
}

// LimiterOption configures a [Limiter].
type LimiterOption func(*Limiter) error

// WithPrefix sets the prefix of every storage key, "ratekit:" by default.
// Applications sharing one Redis separate their keys with it.
func WithPrefix(prefix string) LimiterOption {
	return func(l *Limiter) error {
		if err := ValidateName("prefix", prefix, true); err != nil {
			return err
		}
		l.prefix = prefix
		return nil
	}
}

// DefaultPrefix starts every storage key unless [WithPrefix] says otherwise.
const DefaultPrefix = "ratekit:"

// DefaultTimeout is the deadline of a store call unless [WithTimeout] says
// otherwise.
const DefaultTimeout = 50 * time.Millisecond

// WithFailurePolicy sets what the Limiter does when the store cannot decide:
// [FailLocal] (the default), [FailOpen] or [FailClosed].
func WithFailurePolicy(p FailurePolicy) LimiterOption {
	return func(l *Limiter) error {
		if p >= numFailurePolicies {
			return fmt.Errorf("ratekit: unknown failure policy %d", p)
		}
		l.policy = p
		return nil
	}
}

// WithTimeout sets the deadline of each store call, [DefaultTimeout] (50
// ms) by default; a request's context with an earlier deadline shortens it.
// A call that misses it counts as a store failure and the request is
// decided by the failure policy, so no request waits for the store much
// longer than d, however the store fails. A short deadline bounds the
// latency an outage adds; too short a one turns a slow store into an
// outage.
//
// The deadline holds whatever the client: Check returns at the deadline
// even from a go-redis client that ignores contexts (its default), while
// the abandoned call finishes in the background, where [Limiter.Close]
// waits for it; such calls each run on a goroutine of their own. A client
// that gives up at the deadline itself, and frees its connection at once,
// is called on the request's goroutine, which saves a goroutine and a
// hand-off per call; configure it like this:
//
//	redis.NewClient(&redis.Options{
//		Addr:                  addr,
//		ContextTimeoutEnabled: true, // honour the Limiter's deadline
//		MaxRetries:            -1,   // no retries: one try takes the whole deadline
//		DialTimeout:           time.Second,
//		ReadTimeout:           time.Second, // bounds calls made without a deadline
//		WriteTimeout:          time.Second,
//	})
//
// Without ContextTimeoutEnabled, go-redis reads until its ReadTimeout (5 s
// by default) and retries up to 3 times, so an abandoned call can hold a
// connection for many seconds against a stalled Redis. MaxRetries: -1
// disables go-redis's retries (0 means its default of 3): within a deadline
// of milliseconds a retry has no time left to succeed, and the breaker
// already decides when to try again.
func WithTimeout(d time.Duration) LimiterOption {
	return func(l *Limiter) error {
		if d <= 0 {
			return fmt.Errorf("ratekit: store timeout %v is not positive", d)
		}
		l.timeout = d
		return nil
	}
}

// WithReplicas divides each limit by n, the number of replicas expected to
// share the store, while the Limiter decides locally under [FailLocal]:
// rate and burst are divided, rounding up, so the fleet stays near its
// global limit during an outage when traffic is spread evenly. A limit the
// division would make invalid stays whole. The results of local decisions
// carry the divided limit. 1 (no division) by default.
func WithReplicas(n int) LimiterOption {
	return func(l *Limiter) error {
		if n < 1 {
			return fmt.Errorf("ratekit: %d replicas (want at least 1)", n)
		}
		l.replicas = n
		return nil
	}
}

// WithFallbackOptions configures the [MemoryStore] that decides under
// [FailLocal], which the Limiter creates and closes. Its state is bounded:
// a key is dropped once it expires, and at most 1<<20 keys are kept unless
// [WithMaxKeys] says otherwise, so a long outage with many identities
// cannot grow it without end.
func WithFallbackOptions(opts ...MemoryOption) LimiterOption {
	return func(l *Limiter) error {
		l.fallbackOpts = append(l.fallbackOpts, opts...)
		return nil
	}
}

// WithBreaker configures the circuit breaker: it opens after failures
// consecutive failed store calls (5 by default), and then probes the store
// with one call at a time. The first probe comes after backoff (100 ms by
// default); each failed probe doubles the wait, up to maxBackoff (1 s by
// default). Every wait is drawn at random within ±50% of its base, and
// never exceeds maxBackoff, so replicas do not probe in step and recovery
// is noticed within maxBackoff. Zero arguments keep their defaults.
//
// A low threshold spares requests the deadline sooner in an outage, at the
// risk of opening on a few chance errors; a short maxBackoff notices
// recovery sooner, at the cost of more probes of a store that is down.
func WithBreaker(failures int, backoff, maxBackoff time.Duration) LimiterOption {
	return func(l *Limiter) error {
		if failures < 0 || backoff < 0 || maxBackoff < 0 {
			return fmt.Errorf("ratekit: breaker settings %d, %v, %v: want no negative value", failures, backoff, maxBackoff)
		}
		if failures > 0 {
			l.brk.threshold = int32(min(failures, 1<<30))
		}
		if backoff > 0 {
			l.brk.backoff = backoff
		}
		if maxBackoff > 0 {
			l.brk.max = maxBackoff
		}
		return nil
	}
}

// WithDeniedCache sets how many denied keys the Limiter remembers, 1<<16 by
// default; 0 turns the cache off. A key the store denied is answered
// locally, without a store call, until the denial's retry-after, for
// requests of the same or a higher cost under the same limit; the least
// recently used keys are forgotten first. When an entry expires, one
// request asks the store while the others for the same key wait for its
// answer, so a crowd on a denied key costs the store about one call per
// retry-after.
//
// Such answers are exact: the store would deny the same request at that
// moment. Spending only ever postpones the instant a cost fits, and an
// entry expires at the local time taken before its request was sent plus
// the store's RetryAfter, never later than the store's own denial ends. A
// cost above a limit's capacity is denied locally too, with RetryAfter -1.
// The exception is a Redis that restarts empty without a failed call: it
// would allow what the cache still denies, for at most the retry-after of
// each entry (the cache is emptied whenever the breaker closes).
//
// Cached results have Remaining 0, and a RetryAfter and ResetAfter counted
// down from the store's answer for the cost it denied; other rules decided
// in the same store call report Remaining 0 and no wait, since their state
// is not known without the store. The cache assumes the store's clock runs
// at the pace of real time, as Redis's does: turn it off for a store whose
// clock a test steps by hand. A [MemoryStore] needs no cache and gets none.
func WithDeniedCache(size int) LimiterOption {
	return func(l *Limiter) error {
		if size < 0 {
			return fmt.Errorf("ratekit: denied-key cache size %d is negative", size)
		}
		l.deniedSize = size
		return nil
	}
}

// WithLogger sets the logger of the Limiter; nil, the default, logs
// nothing. Failed store calls are logged at Warn at most once a second,
// each line counting the ones suppressed since the last, so an outage
// cannot flood the log; so are the breaker's openings, and their closings
// are logged at Warn too. When the logger is enabled at Debug, every rule's
// decision is logged ("ratekit: decision") with its rule, verdict, cost,
// remaining units and waits. Lines never carry storage keys, and
// identities only as [Redacted]: their kind and a keyed hash.
func WithLogger(logger *slog.Logger) LimiterOption {
	return func(l *Limiter) error {
		l.logger = logger
		return nil
	}
}

// OnError sets a function called with the error of every failed store
// call, the breaker's probes included, whatever the policy. It is called on
// the request's goroutine, from many at once: it must be fast and safe for
// concurrent use. Store calls skipped while the breaker is open are not
// errors.
func OnError(f func(err error)) LimiterOption {
	return func(l *Limiter) error {
		l.onError = f
		return nil
	}
}

// OnBreakerChange sets a function called on every change of the circuit
// breaker's state, such as closed → open when the store starts failing and
// half-open → closed when it is back. Calls come one at a time, in the
// order of the changes; f must not call the Limiter's Check.
func OnBreakerChange(f func(from, to BreakerState)) LimiterOption {
	return func(l *Limiter) error {
		l.onBreaker = f
		return nil
	}
}

// NewLimiter returns a Limiter over store, configured by opts. It returns
// an error for a nil store and for an invalid option. Over a [MemoryStore],
// which can neither fail nor block, the Limiter calls the store directly:
// no deadline goroutine, failure policy, breaker or denied-key cache.
func NewLimiter(store Store, opts ...LimiterOption) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("ratekit: NewLimiter: nil store")
	}
	l := &Limiter{
		store:      store,
		prefix:     DefaultPrefix,
		timeout:    DefaultTimeout,
		replicas:   1,
		deniedSize: defaultDeniedCacheSize,
		stop:       make(chan struct{}),
	}
	epoch := time.Now()
	l.now = func() int64 { return int64(time.Since(epoch)) }
	l.brk.threshold = defaultBreakerFailures
	l.brk.backoff = defaultBreakerBackoff
	l.brk.max = defaultBreakerMaxBackoff
	for _, o := range opts {
		if err := o(l); err != nil {
			return nil, err
		}
	}
	l.timeoutErr = fmt.Errorf("ratekit: store gave no answer within %v: %w", l.timeout, context.DeadlineExceeded)
	l.probeChecks = []Check{{Key: probeKey(l.prefix), Limit: probeLimit}}
	l.stopCtx, l.cancelStop = context.WithCancel(context.Background())
	l.mem, _ = store.(*MemoryStore)
	l.direct = honoursDeadlines(store)
	if l.mem == nil {
		if l.policy == FailLocal {
			l.fallbackStore = NewMemoryStore(l.fallbackOpts...)
		}
		if l.deniedSize > 0 {
			l.denied = newDeniedCache(l.deniedSize, l.mono)
		}
	}
	return l, nil
}

// Close stops the Limiter's goroutines and waits for them, store calls
// still in flight included: a call abandoned at its deadline ends when the
// client gives up on it, at once with ContextTimeoutEnabled, else after the
// client's own timeouts (see [WithTimeout]). It closes the fallback store,
// but never the store the Limiter was given. Close is idempotent and always
// returns nil.
//
// A Limiter keeps deciding after Close, without its background work: store
// calls are no longer cut off at the deadline unless the client honours
// contexts, and an open breaker stays open.
func (l *Limiter) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	l.cancelStop()
	l.wg.Wait()
	if l.fallbackStore != nil {
		l.fallbackStore.Close()
	}
	l.denied.close()
	return nil
}

// mono returns the time since the Limiter was created, in ns of the
// monotonic clock.
func (l *Limiter) mono() int64 { return l.now() }

// StorageKey returns the storage key of identity under the named rule, as
// this Limiter builds it: prefix + rule + ":{" + identity + "}".
func (l *Limiter) StorageKey(rule, identity string) (string, error) {
	return key(l.prefix, rule, identity)
}

// planned is one applicable rule of a Check.
type planned struct {
	name     string
	identity string
	cost     int
	shadow   bool
	check    Check
	group    int
}

// Check decides req against rules, in order, and spends each applicable
// rule's cost if and only if the rules of one identity all allow it. Rules
// of one identity (and cost) are decided together in one store call; rules
// of different identities are decided one identity after the other, and
// the first identity whose rules deny stops the rest. Results follow rule
// order.
//
// A rule in shadow mode ([Rule.Shadow], [WithShadow]) is decided and spent
// as usual, in a store call of its own, but never denies: its result may
// say Allowed false while the decision allows, and its denial stops
// nothing. Even under [FailClosed] a shadow rule's outage denies nothing.
//
// When the store cannot decide, the [FailurePolicy] does, and the results
// it makes are Degraded: under [FailLocal] and [FailOpen] Check returns a
// decision and no error; under [FailClosed] it returns a decision with
// Allowed false, every result Degraded with a RetryAfter of at least one
// second, and an error wrapping [ErrUnavailable] and the store's error.
//
// Check returns an error wrapping [ErrNoIdentity] when a rule's key
// function finds no identity, [ErrInvalidCost] for a cost below 1, any
// other error of a key or cost function, and the context's error when
// ctx ends before the store answers (that is the caller giving up, not
// a store failure). Every rule's identity is found before anything is
// spent. Rules must have been validated with [ValidateRules].
//
// Each result of a returned decision is told to the [Observer]s and, when
// the logger is enabled at Debug, logged with its identity redacted.
func (l *Limiter) Check(ctx context.Context, req Request, rules []Rule) (Decision, error) {
	var pbuf [8]planned
	plan := pbuf[:0]
	groups := 0
	for i := range rules {
		r := &rules[i]
		if r.Skip != nil && r.Skip(req) {
			continue
		}
		id, err := r.Key(req)
		if err != nil {
			return Decision{}, fmt.Errorf("rule %q: %w", r.Name, err)
		}
		cost := 1
		if r.Cost != nil {
			cost = r.Cost(req)
		}
		k, err := l.StorageKey(r.Name, id)
		if err != nil {
			return Decision{}, err
		}
		p := planned{name: r.Name, identity: id, cost: cost, shadow: l.shadow || r.Shadow, check: Check{Key: k, Limit: r.Limit}, group: groups}
		for j := range plan {
			if plan[j].identity == id && plan[j].cost == cost && plan[j].shadow == p.shadow {
				p.group = plan[j].group
				break
			}
		}
		if p.group == groups {
			groups++
		}
		plan = append(plan, p)
	}
	d := Decision{Allowed: true, Limiting: -1}
	if len(plan) == 0 {
		return d, nil
	}

	d.Results = make([]RuleResult, len(plan))
	var (
		cbuf    [8]Check
		gbuf    [8]Result
		decided = 0    // groups decided
		cached  uint64 // bit g: the denied-key cache answered group g
		err     error
	)
	for g := 0; g < groups && d.Allowed && err == nil; g++ {
		checks := cbuf[:0]
		first := -1
		for i := range plan {
			if plan[i].group == g {
				if first < 0 {
					first = i
				}
				checks = append(checks, plan[i].check)
			}
		}
		res := gbuf[:0]
		if len(checks) > len(gbuf) {
			res = make([]Result, len(checks))
		}
		res = res[:len(checks)]
		shadow := plan[first].shadow
		hit, gerr := l.decide(ctx, checks, plan[first].cost, res)
		if gerr != nil && !errors.Is(gerr, ErrUnavailable) {
			return Decision{}, gerr
		}
		if !shadow {
			err = gerr // a shadow rule denies nothing, even failing closed
		}
		if hit {
			cached |= 1 << min(g, 63)
		}
		j := 0
		for i := range plan {
			if plan[i].group == g {
				d.Results[i] = RuleResult{Rule: plan[i].name, Result: res[j], Shadow: shadow}
				if !shadow {
					d.Allowed = d.Allowed && res[j].Allowed
				}
				j++
			}
		}
		decided++
	}
	// keep the results of the groups decided, in rule order
	var ibuf [8]int
	idx := ibuf[:0]
	for i := range plan {
		if plan[i].group < decided {
			d.Results[len(idx)] = d.Results[i]
			idx = append(idx, i)
		}
	}
	d.Results = d.Results[:len(idx)]
	if err != nil {
		// fail closed: nothing of this request may pass, and every result
		// says when to try again
		retry := l.retryAfter()
		for i := range d.Results {
			if d.Results[i].Shadow {
				continue
			}
			r := &d.Results[i].Result
			r.Allowed, r.Degraded = false, true
			r.RetryAfter = max(r.RetryAfter, retry)
		}
		d.Allowed = false
	}
	d.Limiting = mostRestrictive(d.Results)
	l.observe(ctx, &d, plan, idx, cached)
	return d, err
}

// decide decides one group of checks, all of one identity and cost n, into
// results, and reports whether the denied-key cache answered. It returns
// input errors, the caller's context error, and under FailClosed an error
// wrapping ErrUnavailable along with denied results.
func (l *Limiter) decide(ctx context.Context, checks []Check, n int, results []Result) (cached bool, err error) {
	if err := validate(checks, n); err != nil {
		return false, err
	}
	if l.mem != nil {
		if l.observer == nil {
			return false, l.mem.allow(checks, n, results)
		}
		t0 := l.mono()
		err := l.mem.allow(checks, n, results)
		l.observer.StoreCalled(time.Duration(l.mono()-t0), err)
		return false, err
	}
	if l.denied != nil && never(checks, n, results) {
		return false, nil
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("ratekit: %w", err)
	}

	var (
		leadBuf [4]*deniedEntry
		leads   = leadBuf[:0]
		cctx    context.Context
		cancel  context.CancelFunc
	)
	for l.denied != nil {
		var (
			hit  bool
			wait *deniedEntry
		)
		hit, wait, leads = l.denied.lookup(checks, n, l.mono(), results, leads, l.brk.current() == BreakerClosed)
		if hit {
			if cancel != nil {
				cancel()
			}
			return true, nil
		}
		if wait == nil {
			break
		}
		// Another caller is asking the store about this key: wait for its
		// answer, within this call's own deadline.
		if cctx == nil {
			cctx, cancel = context.WithTimeout(ctx, l.timeout)
		}
		select {
		case <-wait.done:
			continue
		case <-cctx.Done():
		}
		cancel()
		if err := ctx.Err(); err != nil {
			return false, fmt.Errorf("ratekit: %w", err)
		}
		return false, l.fallback(ctx, checks, n, results, l.timeoutErr)
	}

	if l.brk.current() != BreakerClosed {
		l.denied.release(leads)
		if cancel != nil {
			cancel()
		}
		return false, l.fallback(ctx, checks, n, results, nil)
	}
	if cctx == nil {
		cctx, cancel = context.WithTimeout(ctx, l.timeout)
	}
	defer cancel()
	t0 := l.mono()
	if l.direct {
		err = l.callDirect(cctx, checks, n, results)
	} else {
		// the call may outlive this function: it gets checks of its own
		var res []Result
		res, err = l.callStore(cctx, slices.Clone(checks), n)
		if err == nil && len(res) != len(checks) {
			err = fmt.Errorf("%w: %d results for %d checks", ErrMalformedReply, len(res), len(checks))
		}
		copy(results, res)
	}
	if err != nil && ctx.Err() == nil && cctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
		err = l.timeoutErr
	}
	if l.observer != nil {
		l.observer.StoreCalled(time.Duration(l.mono()-t0), err)
	}
	if err != nil {
		l.denied.release(leads)
		if ctx.Err() != nil {
			return false, fmt.Errorf("ratekit: %w", ctx.Err())
		}
		l.failed(err)
		return false, l.fallback(ctx, checks, n, results, err)
	}
	l.succeeded()
	if l.denied != nil {
		l.denied.record(checks, n, t0, results, leads)
	}
	return false, nil
}

// never reports whether a cost above a limit's capacity denies the group,
// which no store call could change, and fills results if so.
func never(checks []Check, n int, results []Result) bool {
	deny := false
	for i := range checks {
		deny = deny || n > checks[i].Limit.Capacity()
	}
	if !deny {
		return false
	}
	for i := range checks {
		results[i] = Result{Limit: checks[i].Limit}
		if n > checks[i].Limit.Capacity() {
			results[i].RetryAfter = -1
		}
	}
	return true
}

// callStore makes one store call that returns by ctx's deadline whatever
// the store does: the call runs on a goroutine of its own, which the
// caller abandons at the deadline.
func (l *Limiter) callStore(ctx context.Context, checks []Check, n int) ([]Result, error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return l.store.AllowAllN(ctx, checks, n)
	}
	l.wg.Add(1)
	l.mu.RUnlock()
	return l.spawn(ctx, checks, n)
}

// storeCall is one store call on its own goroutine.
type storeCall struct {
	results []Result
	err     error
	done    chan struct{}
}

// spawn runs a store call on a new goroutine, already counted in wg, and
// waits for it until ctx ends. A panic of the store becomes an error.
func (l *Limiter) spawn(ctx context.Context, checks []Check, n int) ([]Result, error) {
	c := &storeCall{done: make(chan struct{})}
	go func() {
		defer l.wg.Done()
		defer close(c.done)
		defer func() {
			if p := recover(); p != nil {
				c.err = fmt.Errorf("ratekit: store panicked: %v", p)
			}
		}()
		c.results, c.err = l.store.AllowAllN(ctx, checks, n)
	}()
	select {
	case <-c.done:
		return c.results, c.err
	case <-ctx.Done():
		select {
		case <-c.done: // answered at the last moment
			return c.results, c.err
		default:
		}
		return nil, ctx.Err()
	}
}

// mostRestrictive picks the result that drives the X-RateLimit-* headers:
// among denials the longest wait (a never-allowable cost first), else the
// fewest units remaining relative to capacity, then the longest reset.
// A denial that denied ranks above a shadow rule's, which ranks above any
// allowance.
func mostRestrictive(results []RuleResult) int {
	best := -1
	for i := range results {
		if best < 0 {
			best = i
			continue
		}
		a, b := &results[i], &results[best]
		if ra, rb := denialRank(a), denialRank(b); ra != rb {
			if ra > rb {
				best = i
			}
			continue
		}
		if moreRestrictive(a.Result, b.Result) {
			best = i
		}
	}
	return best
}

// denialRank is 2 for a denial, 1 for a shadow rule's denial, 0 otherwise.
func denialRank(r *RuleResult) int {
	switch {
	case r.Allowed:
		return 0
	case r.Shadow:
		return 1
	}
	return 2
}

func moreRestrictive(a, b Result) bool {
	if a.Allowed != b.Allowed {
		return !a.Allowed
	}
	if !a.Allowed {
		if a.Never() != b.Never() {
			return a.Never()
		}
		return a.RetryAfter > b.RetryAfter
	}
	// compare remaining/capacity without division
	ra := int64(a.Remaining) * int64(b.Limit.Capacity())
	rb := int64(b.Remaining) * int64(a.Limit.Capacity())
	if ra != rb {
		return ra < rb
	}
	return a.ResetAfter > b.ResetAfter
}
