package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ratekit/ratekit/internal/localstore"
	"github.com/ratekit/ratekit/internal/storekey"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// ErrUnavailable is returned, wrapping the store's own error, when the store
// could not decide and the failure policy is to fail closed: the request is
// denied (Decision.Allowed is false, every result Degraded) and adapters
// answer 503 with Retry-After.
var ErrUnavailable = errors.New("ratekit: store unavailable")

// ErrInvalidRule is returned, wrapped with the reason, for a set of rules
// that cannot be enforced as a whole or a rule without a key function:
// no rules, two rules of one name, a rule with no Key. A bad name wraps
// [ErrInvalidName] and a bad limit [ErrInvalidLimit] instead.
var ErrInvalidRule = errors.New("ratekit: invalid rule")

// Rule is one named limit applied to requests: every request that the rule
// does not skip spends Cost units of Limit from the identity that Key
// returns. Rules are plain values; [NewRuleSet] checks them, as every
// constructor that takes rules does (the adapters' included), so a bad rule
// fails at start-up, never at request time.
type Rule struct {
	// Name identifies the rule in storage keys, headers and metrics, such
	// as "default" or "login". Replicas that share a Redis and name a rule
	// alike share its limit. At most [MaxNameLen] bytes, without '{', '}'
	// or control bytes.
	Name string
	// Limit is the rate the rule enforces, or with LimitOf the default
	// one: the limit of a request for which LimitOf has none. Required.
	Limit Limit
	// LimitOf, when set, picks the limit of each request, such as the
	// limit of the caller's plan or of a customer's contract: it returns
	// the limit and true, or false to apply Limit. The rule's name,
	// identity and storage key stay the same whatever the limit, so a
	// caller moving to another plan keeps what it spent, counted under the
	// new limit. A limit that fails [Limit.Validate] is an error of the
	// request. keyfuncs.PlanLimits builds one from a table of plans.
	LimitOf func(Request) (Limit, bool)
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
	// Overrides lets an identity's override, set with
	// [Limiter.SetOverride], replace the rule's limit for that identity,
	// whether the limit came from Limit or from LimitOf (a customer's
	// override beats their plan). The store reads the override within the
	// decision's own call: on Redis, the same script call, so every
	// replica sees an override at its next decision. Off by default; a
	// rule that takes overrides costs Redis a little more per decision
	// (it runs the generic script, which reads one more key).
	Overrides bool
}

// validateRule returns nil if the rule can be enforced, or an error that
// says what is wrong with it.
func validateRule(r *Rule) error {
	if err := storekey.ValidateName("rule name", r.Name, false); err != nil {
		return err
	}
	if r.Key == nil {
		return fmt.Errorf("%w: rule %q has no key function", ErrInvalidRule, r.Name)
	}
	if err := r.Limit.Validate(); err != nil {
		return fmt.Errorf("rule %q: %w", r.Name, err)
	}
	return nil
}

// validateRules validates each rule and checks that no two share a name.
func validateRules(rules []Rule) error {
	if len(rules) == 0 {
		return fmt.Errorf("%w: no rules", ErrInvalidRule)
	}
	seen := make(map[string]bool, len(rules))
	for _, r := range rules {
		if err := validateRule(&r); err != nil {
			return err
		}
		if seen[r.Name] {
			return fmt.Errorf("%w: two rules named %q", ErrInvalidRule, r.Name)
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

	// what the decision spent, for Limiter.Refund (136 bytes a result in
	// all): spent, check and cost pack beside Shadow
	spent    spender
	check    uint8  // the rule's place among its group's checks (at most maxChecks)
	cost     int32  // set when spent: at most a capacity, so at most MaxRate
	refunded uint32 // set, atomically, by the first Refund of the result
	until    int64  // set when spent: the Limiter's mono time at which what was spent counts no longer (see Refund)
	// late is the group's store call when it missed the deadline: it may
	// have spent in the store, and says so once it returns
	late *storeCall
	key  string
}

// spender says who spent a rule's units in a decision: nobody (a denial,
// an answer of the denied-key cache, FailOpen), the store, or the
// Limiter's fallback store.
type spender uint8

const (
	spentNothing spender = iota
	spentStore
	spentFallback
)

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
// answers again. Over a store that states shards ([Traits].Shard), such as
// a Redis Cluster, there is a breaker per shard: a failing master stops
// only the calls for its keys. Denials the store made are remembered until
// their retry-after ([WithDeniedCache]), so a client hammering past its
// limit costs the store nothing; such answers are exact, never guesses.
//
// A Limiter runs goroutines only while it has work for them (store calls in
// flight, a probe during an outage): [Limiter.Close] stops them and waits.
type Limiter struct {
	store    Store
	prefix   string
	policy   FailurePolicy
	timeout  time.Duration
	replicas int

	inProcess     bool              // the store decides in process: no deadline, breaker, fallback or cache
	direct        bool              // the store keeps deadlines itself: no goroutine per call
	begins        beginStore        // the store, when direct and it begins calls apart; else nil
	bounds        tickctx.Pool      // the deadlines of direct calls
	fallbackStore *localstore.Store // FailLocal only
	fallbackKeys  int
	keys          *keyCache // storage keys recently built
	clock         func() time.Time
	epoch         time.Time    // the mono time's zero
	denied        *deniedCache // nil when off
	deniedSize    int

	stopWatch func() // stops the watch of resets; nil when none

	brk        breaker   // the store's, or its shards' together (see shardSet)
	shards     *shardSet // nil unless the store states shards
	timeoutErr error

	shadow   bool
	observer Observer // nil when none; several are an observers
	// idObserver is observer when it is one IdentityObserver, so that a
	// decision reaches it without a type switch
	idObserver IdentityObserver
	logger     *slog.Logger
	denialLog  *denialLog // nil unless WithDenialLog
	onError    func(error)
	onBreaker  func(from, to BreakerState)
	errLog     logBudget
	breakerLog logBudget
	openLogged bool // the breaker's last opening was logged: so is its closing

	now func() int64 // monotonic time in ns; tests may replace it

	mu         sync.RWMutex // guards closed against wg.Add
	closed     bool
	stop       chan struct{}
	stopCtx    context.Context
	cancelStop context.CancelFunc
	wg         sync.WaitGroup // store calls in flight and the prober
}

// DefaultPrefix starts every storage key unless [WithPrefix] says otherwise.
const DefaultPrefix = "ratekit:"

// DefaultTimeout is the deadline of a store call unless [WithTimeout] says
// otherwise.
const DefaultTimeout = 50 * time.Millisecond

// NewLimiter returns a Limiter over store, configured by opts. It returns
// an error for a nil store and for an invalid option, or one that does not
// configure a Limiter. Over a store that decides in process
// ([Traits].InProcess), which can neither fail nor block, the Limiter calls
// the store directly: no deadline, failure policy, breaker or denied-key
// cache.
func NewLimiter(store Store, opts ...Option) (*Limiter, error) {
	if store == nil {
		return nil, errors.New("ratekit: NewLimiter: nil store")
	}
	l := &Limiter{
		store:      store,
		prefix:     DefaultPrefix,
		timeout:    DefaultTimeout,
		replicas:   1,
		deniedSize: defaultDeniedCacheSize,
		keys:       new(keyCache),
		stop:       make(chan struct{}),
	}
	l.brk.cfg, _ = BreakerConfig{}.resolve()
	l.brk.onChange = l.breakerChanged
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("ratekit: NewLimiter: nil option")
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	if io, ok := l.observer.(IdentityObserver); ok {
		l.idObserver = io
	}
	clock := l.clock
	if clock == nil {
		clock = time.Now
	}
	l.epoch = clock()
	if l.clock == nil {
		// the monotonic clock alone: one reading where time.Now takes two
		l.now = func() int64 { return int64(time.Since(l.epoch)) }
	} else {
		l.now = func() int64 { return int64(clock().Sub(l.epoch)) }
	}
	l.timeoutErr = fmt.Errorf("ratekit: store gave no answer within %v: %w", l.timeout, context.DeadlineExceeded)
	l.stopCtx, l.cancelStop = context.WithCancel(context.Background())
	traits := traitsOf(store)
	l.inProcess, l.direct = traits.InProcess, traits.KeepsDeadlines
	if b, ok := store.(beginStore); ok && l.direct && !l.inProcess {
		l.begins = b
	}
	if l.inProcess {
		return l, nil
	}
	if traits.Shard != nil {
		l.shards = &shardSet{of: traits.Shard, cfg: l.brk.cfg, onChange: l.shardChanged}
	}
	if l.policy == FailLocal {
		l.fallbackStore = localstore.New(clock, l.fallbackKeys)
	}
	if l.deniedSize > 0 {
		l.denied = newDeniedCache(l.deniedSize, l.mono)
	}
	l.watchResets()
	return l, nil
}

// Close stops the Limiter's goroutines and waits for them, store calls
// still in flight included: a call abandoned at its deadline ends when the
// client gives up on it, at once with ContextTimeoutEnabled, else after the
// client's own timeouts (see [WithTimeout]); so do the refunds of such
// calls' units ([Limiter.Refund]), each within ten deadlines of its own
// when the client honours contexts. It closes the fallback store,
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
	if l.stopWatch != nil {
		l.stopWatch()
	}
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

// stamp returns the Limiter's mono time and the time now, for a store
// call's start and its deadline. When the Limiter runs on the system's
// clock, both come from one reading of the monotonic clock (reading the
// clock costs more than the rest of a decision's own work on some
// machines): the time is the epoch plus the time since, which carries a
// monotonic reading, so that deadlines and timers made from it are exact
// even if the wall clock was stepped meanwhile (only its wall reading
// would be off by the step). Else the mono time is the Limiter's clock's
// and the time is the system's, which keeps the deadline's timers.
func (l *Limiter) stamp() (int64, time.Time) {
	if l.clock == nil {
		since := time.Since(l.epoch)
		return int64(since), l.epoch.Add(since)
	}
	return l.mono(), time.Now()
}

// storageKey returns the storage key of identity under the named rule, as
// this Limiter builds it: prefix + rule + ":{" + identity + "}", the
// identity replaced by a hash of itself when it could steer the key's
// Cluster slot (see docs/ARCHITECTURE.md, the key schema).
func (l *Limiter) storageKey(rule, identity string) (string, error) {
	if err := storekey.ValidateName("rule name", rule, false); err != nil {
		return "", err
	}
	return storekey.Key(l.prefix, rule, identity)
}

// MostRestrictive returns the index of the result among results that
// drives the X-RateLimit-* headers, as [Limiter.Check] sets
// [Decision.Limiting]: a denial first (one whose cost can never be allowed,
// then the longest RetryAfter), then a shadow rule's denial, then the
// allowance with the smallest share of its capacity left (the longer
// ResetAfter on a tie); the first of equals. It returns -1 when results is
// empty. An adapter that changes results after the decision, as one that
// gives back a count-only rule's unit does, picks again with it.
func MostRestrictive(results []RuleResult) int {
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
