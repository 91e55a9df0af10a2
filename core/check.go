package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ratekit/ratekit/internal/rediserr"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// A Check runs in phases, each a function below, in this order:
//
//  1. plan: each rule that applies yields an identity, a cost and a
//     storage key; rules of one identity, cost and shadow mode form a group
//     (planRules);
//  2. decide each group, one after the other, until one denies or fails
//     (decideGroups, decide):
//     a. a cost no limit can ever hold, or a denial the denied-key cache
//     remembers, is answered locally (never, answerFromCache);
//     b. an open breaker, the store's or that of the group's shard, sends
//     the group to the failure policy (fallback);
//     c. otherwise the store decides, within the deadline (askStore, call);
//     a failed call counts toward the breaker and goes to the failure
//     policy;
//  3. fail closed: when the policy refused to decide, nothing passes
//     (failClosed);
//  4. report: the most restrictive result drives the headers, and each
//     result goes to the observers and the debug log (MostRestrictive,
//     observe).

// Check decides req against rules, in order, and spends each applicable
// rule's cost if and only if every rule allows it. Rules of one identity
// (and cost) are decided together in one store call, all or nothing; rules
// of different identities are decided one identity after the other, and
// the first identity whose rules deny stops the rest. What the identities
// before it spent is then given back before Check returns, as
// [Limiter.Refund] gives back, in one store call per identity within one
// more deadline ([WithTimeout]): a denied request spends nothing, though
// its earlier identities' units count for the round trip in between. A
// give-back that fails leaves its units spent until they refill, and is
// reported as a failed store call (the breaker, [OnError], the logger,
// [Observer].StoreCalled); the decision stays a denial. The same holds when
// a later identity's store failure denies the request under [FailClosed].
// Results follow rule order, and those of the earlier identities say what
// they decided before the give-back; a later Refund of the decision gives
// them nothing more.
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
// spent. Rules are best validated once, with [NewRuleSet]; a rule that
// would fail it (no key function, an invalid limit or name) makes Check
// return an error, never panic.
//
// Each result of a returned decision is told to the [Observer]s and, when
// the logger is enabled at Debug, logged with its identity redacted.
func (l *Limiter) Check(ctx context.Context, req Request, rules []Rule) (Decision, error) {
	return l.CheckInto(ctx, req, rules, nil)
}

// stackRules is how many rules a Check plans, and a group sends and
// receives, in arrays on its goroutine's stack; more are allocated. Few:
// under a crowd a goroutine's stack has gone cold by the time the store
// answers, and every byte of it that a call zeroes or reads costs a cache
// miss. Room for eight rules (2.2 KiB zeroed per call) cost the Limiter
// 12-17% of its decisions/s over one hot key at 256 goroutines.
const stackRules = 2

// CheckInto is [Limiter.Check] keeping the decision's Results in the array
// behind results when it has room for them (results' length does not
// matter, its capacity does); otherwise it allocates them, as Check does. A
// caller that owns a buffer per request, as the adapters do, spares Check's
// one allocation of its own. The returned decision's Results share that
// array: the buffer must not be reused while the decision is in use.
func (l *Limiter) CheckInto(ctx context.Context, req Request, rules []Rule, results []RuleResult) (Decision, error) {
	var buf [stackRules]planned
	applied, groups, err := l.planRules(req, rules, buf[:0])
	if err != nil {
		return Decision{}, err
	}
	p := plan{rules: applied, groups: groups}
	d := Decision{Allowed: true, Limiting: -1}
	if len(p.rules) == 0 {
		return d, nil
	}
	decided := false
	if len(p.rules) == 1 && l.begins != nil {
		decided, err = l.decideOne(ctx, &p, &d, results)
	}
	if !decided {
		err = l.decideGroups(ctx, &p, &d, results)
	}
	if err != nil && !errors.Is(err, ErrUnavailable) {
		return Decision{}, err
	}
	if err != nil {
		l.failClosed(&d)
	}
	d.Limiting = MostRestrictive(d.Results)
	l.observe(ctx, &d, p.rules)
	return d, err
}

// planned is one applicable rule of a Check.
type planned struct {
	name     string
	identity string
	cost     int
	shadow   bool
	check    Check
	group    int  // rules of one group are decided in one store call
	cached   bool // the denied-key cache answered the rule's group
}

// plan is what a Check decides: its applicable rules, in rule order, and
// how many groups they form.
type plan struct {
	rules  []planned
	groups int
}

// planRules appends to plan the rules that apply to req, and returns it
// with the number of groups they form. It finds every identity before
// anything is spent.
func (l *Limiter) planRules(req Request, rules []Rule, plan []planned) (_ []planned, groups int, _ error) {
	for i := range rules {
		r := &rules[i]
		if r.Skip != nil && r.Skip(req) {
			continue
		}
		if r.Key == nil {
			return nil, 0, fmt.Errorf("%w: rule %q has no key function", ErrInvalidRule, r.Name)
		}
		id, err := r.Key(req)
		if err != nil {
			return nil, 0, fmt.Errorf("rule %q: %w", r.Name, err)
		}
		cost := 1
		if r.Cost != nil {
			cost = r.Cost(req)
		}
		k, o, err := l.keysOf(r, id)
		if err != nil {
			return nil, 0, err
		}
		lim := r.Limit
		if r.LimitOf != nil {
			if pl, ok := r.LimitOf(req); ok {
				lim = pl
			}
		}
		p := planned{name: r.Name, identity: id, cost: cost, shadow: l.shadow || r.Shadow, check: Check{Key: k, Limit: lim, Override: o}, group: -1}
		for j := range plan {
			if q := &plan[j]; q.identity == p.identity && q.cost == p.cost && q.shadow == p.shadow {
				p.group = q.group
				break
			}
		}
		if p.group < 0 {
			p.group = groups
			groups++
		}
		plan = append(plan, p)
	}
	return plan, groups, nil
}

// decideGroups decides p's groups in order into d, until one denies or
// fails, and keeps in d.Results, and in p.rules, the rules of the groups
// decided, in rule order. It returns the first error; an error that does
// not wrap ErrUnavailable leaves d meaningless. d.Results takes the array
// of results when it has room: settle writes each result of a group
// decided whole, and the results of the groups left undecided are dropped,
// so whatever the array held before is never read.
func (l *Limiter) decideGroups(ctx context.Context, p *plan, d *Decision, results []RuleResult) error {
	if cap(results) >= len(p.rules) {
		d.Results = results[:len(p.rules)]
	} else {
		d.Results = make([]RuleResult, len(p.rules))
	}
	var (
		cbuf [stackRules]Check
		rbuf [stackRules]Result
		err  error
	)
	decided := 0
	for g := 0; g < p.groups && d.Allowed && err == nil; g++ {
		c := groupCall{checks: cbuf[:0], results: rbuf[:0]}
		for i := range p.rules {
			if r := &p.rules[i]; r.group == g {
				c.checks = append(c.checks, r.check)
				c.n, c.shadow = r.cost, r.shadow
			}
		}
		c.results = append(c.results, make([]Result, len(c.checks))...)
		late, gerr := l.decide(ctx, &c)
		if gerr != nil && !errors.Is(gerr, ErrUnavailable) {
			l.refundDenied(ctx, p, d, decided) // the groups before g
			return gerr
		}
		if !c.shadow {
			err = gerr // a shadow rule denies nothing, even failing closed
		}
		p.settle(g, &c, late, d)
		decided++
	}
	if !d.Allowed || err != nil {
		// denied, or failing closed: what the groups before the last
		// spent goes back. Failing closed, the last group is given back
		// too. Denied by the store, the last group is left as the store
		// answered: a store decides a group all or nothing, so it spent
		// nothing there, and one that counts each key apart (envoy's
		// counting under ratekit-server) keeps what it counted, as
		// envoy's service does
		upto := decided
		if err == nil {
			upto--
		}
		l.refundDenied(ctx, p, d, upto)
	}
	if decided == p.groups {
		return err // every rule's group decided: all are kept
	}
	// keep the rules of the groups decided
	kept := 0
	for i := range p.rules {
		if p.rules[i].group < decided {
			p.rules[kept], d.Results[kept] = p.rules[i], d.Results[i]
			kept++
		}
	}
	p.rules, d.Results = p.rules[:kept], d.Results[:kept]
	return err
}

// decideOne decides p's one rule into d, as decideGroups would, over a
// store that begins a call of one check and finishes it apart (see
// [Store]): the request's goroutine then waits for the store two frames
// under CheckInto. Under a crowd its stack has gone cold by the time the
// store answers, and each frame an answer returns through costs cache
// misses. It reports false, having done nothing, when the rule needs more
// than a store call (a shadow rule, a cost no limit can hold, the
// denied-key cache, an open breaker) or the store does not begin it:
// decideGroups then decides.
func (l *Limiter) decideOne(ctx context.Context, p *plan, d *Decision, results []RuleResult) (bool, error) {
	r := &p.rules[0]
	var (
		checks = [1]Check{r.check}
		res    [1]Result
	)
	c := groupCall{checks: checks[:], n: r.cost, results: res[:]}
	switch {
	case r.shadow, validateGroup(c.checks, c.n) != nil, ctx.Err() != nil, !l.brk.closed():
		return false, nil
	case l.denied != nil && (l.denied.entries.Load() != 0 || never(c.checks, c.n, c.results)):
		return false, nil
	}
	var dl deadline
	c.sent, dl.start = l.stamp()
	dl.bounds = &l.bounds
	cctx := dl.of(ctx, l.timeout)
	c.gen = l.denied.generation()
	call, err := l.begin(cctx, r.check, c.n)
	if call == nil && err == nil {
		dl.end()
		return false, nil
	}
	if err == nil {
		res[0], err = l.finish(cctx, call, r.check, c.n)
	}
	late, err := l.answered(ctx, cctx, &c, nil, nil, err)
	dl.end()
	if err != nil && !errors.Is(err, ErrUnavailable) {
		return true, err
	}
	if cap(results) >= 1 {
		d.Results = results[:1]
	} else {
		d.Results = make([]RuleResult, 1)
	}
	p.settle(0, &c, late, d)
	return true, err
}

// settle writes the results of group g, decided by c, into d at their
// rules' places; late is c's store call when it missed its deadline and
// may have spent.
func (p *plan) settle(g int, c *groupCall, late *storeCall, d *Decision) {
	j := 0
	for i := range p.rules {
		r := &p.rules[i]
		if r.group != g {
			continue
		}
		r.cached = c.cached
		d.Results[i] = RuleResult{Rule: r.name, Result: c.results[j], Shadow: c.shadow, key: r.check.Key}
		if res := &d.Results[i]; c.results[j].Allowed {
			res.spent, res.cost = c.spent, int32(r.cost) // allowed: at most a capacity
			res.until = c.from + int64(c.results[j].ResetAfter)
			res.late, res.check = late, uint8(j)
		}
		if !c.shadow {
			d.Allowed = d.Allowed && c.results[j].Allowed
		}
		j++
	}
}

// failClosed denies every result of d that is not in shadow mode: under
// FailClosed nothing of a request may pass when the store could not
// decide, and every result says when to try again.
func (l *Limiter) failClosed(d *Decision) {
	retry := l.brk.retryAfter(l.mono())
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

// groupCall is the decision of one group of checks, all of one identity and
// cost n: its inputs, where its results go, and the state its phases share.
type groupCall struct {
	checks  []Check
	n       int
	shadow  bool
	results []Result
	cached  bool    // the denied-key cache answered
	spent   spender // who spent the units, when the group was allowed
	sent    int64   // the Limiter's mono time when the store was asked
	gen     uint64  // the denied-key cache's generation when the store was asked
	from    int64   // the Limiter's mono time the results' ResetAfter counts from: when the spender was asked
	// A store call that missed the deadline and may have spent is
	// returned by decide, not kept here: a pointer read from a groupCall
	// into the heap would move its buffers there too.
}

// deadline is the store deadline of one groupCall, made when first needed.
// It is kept apart from groupCall, and so is the caller's context: escape
// analysis does not tell a struct's fields apart, and contexts reach the
// store, which would move a groupCall's buffers to the heap.
type deadline struct {
	start  time.Time // what the deadline counts from; zero: when first needed
	ctx    context.Context
	cancel context.CancelFunc
	bound  *tickctx.Ctx  // a pooled deadline, for a store that keeps deadlines
	bounds *tickctx.Pool // where bound comes from; nil unless the store keeps deadlines
}

// of returns the context of the store deadline, timeout after the first
// call, within parent: parent itself when its own deadline comes first,
// a pooled deadline for a store that keeps deadlines (see tickctx), else
// a context of its own.
func (d *deadline) of(parent context.Context, timeout time.Duration) context.Context {
	if d.ctx != nil {
		return d.ctx
	}
	start := d.start
	if start.IsZero() {
		start = time.Now()
	}
	at := start.Add(timeout)
	switch t, ok := parent.Deadline(); {
	case ok && !t.After(at):
		d.ctx = parent
	case d.bounds != nil:
		d.bound = d.bounds.Get(parent, at, timeout)
		d.ctx = d.bound
	default:
		d.ctx, d.cancel = context.WithDeadline(parent, at)
	}
	return d.ctx
}

// end releases the deadline: its timer, or its pooled context.
func (d *deadline) end() {
	if d.cancel != nil {
		d.cancel()
	}
	if d.bound != nil {
		d.bounds.Put(d.bound)
	}
}

// decide decides one group into c.results. It returns input errors, the
// caller's context error, and under FailClosed an error wrapping
// ErrUnavailable along with denied results; and the store call when it
// missed its deadline and may have spent (see askStore).
func (l *Limiter) decide(ctx context.Context, c *groupCall) (late *storeCall, _ error) {
	if err := validateGroup(c.checks, c.n); err != nil {
		return nil, err
	}
	if l.inProcess {
		return nil, l.callInProcess(ctx, c)
	}
	if l.denied != nil && never(c.checks, c.n, c.results) {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ratekit: %w", err)
	}
	// one reading of the clock serves the denied-key cache, the deadline
	// and the call's start
	var dl deadline
	c.sent, dl.start = l.stamp()
	if l.direct {
		dl.bounds = &l.bounds
	}
	defer dl.end()
	var leadBuf [4]*deniedEntry
	answered, leads, err := l.answerFromCache(ctx, &dl, c, leadBuf[:0])
	if answered {
		return nil, err
	}
	if !l.brk.closed() && l.shardOpen(c.checks[0].Key) {
		l.denied.release(leads)
		return nil, l.fallback(ctx, c, nil)
	}
	return l.askStore(ctx, &dl, c, leads)
}

// callInProcess decides c with a store that decides in process: no
// deadline, breaker or fallback.
func (l *Limiter) callInProcess(ctx context.Context, c *groupCall) error {
	t0 := l.mono()
	err := l.callDirect(ctx, c.checks, c.n, c.results)
	c.spent, c.from = spentStore, t0
	if l.observer != nil {
		l.observer.StoreCalled(time.Duration(l.mono()-t0), err)
	}
	return err
}

// answerFromCache answers c from the denied-key cache, and reports whether
// c is answered. When another caller is asking the store about one of c's
// keys, it waits for that answer within c's deadline, and past the
// deadline answers by the failure policy. Otherwise c may now lead some of
// the cache's entries, appended to leads: its store call will settle them.
func (l *Limiter) answerFromCache(ctx context.Context, dl *deadline, c *groupCall, leads []*deniedEntry) (answered bool, _ []*deniedEntry, err error) {
	if l.denied == nil {
		return false, leads, nil
	}
	for {
		var (
			hit  bool
			wait *deniedEntry
		)
		hit, wait, leads = l.denied.lookup(c.checks, c.n, c.sent, c.results, leads, l.brk.closed())
		switch {
		case hit:
			c.cached = true
			return true, leads, nil
		case wait == nil:
			return false, leads, nil
		}
		select {
		case <-wait.done:
			c.sent = l.mono() // the store is asked from now, if at all
			continue
		case <-dl.of(ctx, l.timeout).Done():
		}
		if err := ctx.Err(); err != nil {
			return true, leads, fmt.Errorf("ratekit: %w", err)
		}
		return true, leads, l.fallback(ctx, c, l.timeoutErr)
	}
}

// askStore decides c with the store, within the deadline: a failed call
// counts toward the breaker and goes to the failure policy, an answer
// feeds the denied-key cache and settles the entries c leads. It returns
// a failed call that may have spent, for refunds: one abandoned at its
// deadline, which tells once it returns, or one cut there.
func (l *Limiter) askStore(ctx context.Context, dl *deadline, c *groupCall, leads []*deniedEntry) (*storeCall, error) {
	cctx := dl.of(ctx, l.timeout)
	c.gen = l.denied.generation()
	late, err := l.call(cctx, c.checks, c.n, c.results, c.sent)
	return l.answered(ctx, cctx, c, leads, late, err)
}

// answered settles c's store call, made within cctx and returned with
// late and err, as askStore describes.
func (l *Limiter) answered(ctx, cctx context.Context, c *groupCall, leads []*deniedEntry, late *storeCall, err error) (*storeCall, error) {
	t0 := c.sent
	// A result's ResetAfter counts from when the store was asked, not
	// from the answer: Redis ran the call in between, so the spend it
	// names ends no sooner than that count says, and a slow reply does
	// not stretch a refund's bound (see Refund). It spares a decision a
	// reading of the clock, which is read again only to tell an Observer
	// how long the call took.
	c.from = t0
	// The caller gave up if its context ended, or its deadline passed:
	// a client that keeps deadlines (go-redis) may time out at the
	// deadline before the context's timer ends it. A call the store never
	// sent keeps the store's error, which says so (ErrNotSent) to the
	// refunds and to OnError; any other that missed the Limiter's deadline
	// reports the Limiter's timeout.
	var gaveUp error
	if err != nil {
		gaveUp = tickctx.Expired(ctx)
		if gaveUp == nil && tickctx.Expired(cctx) != nil && rediserr.Timeout(err) && !errors.Is(err, ErrNotSent) {
			err = l.timeoutErr
		}
	}
	if l.observer != nil {
		l.observer.StoreCalled(time.Duration(l.mono()-t0), err)
	}
	if err != nil {
		l.denied.release(leads)
		switch {
		case gaveUp != nil:
			return nil, fmt.Errorf("ratekit: %w", gaveUp)
		case keyError(err):
			// Redis answered: it is up, and decides every other key
			l.report(err)
			l.succeeded(c.checks[0].Key)
			return nil, fmt.Errorf("%w: %w", ErrKeyRejected, err)
		}
		l.failed(err, c.checks[0].Key)
		// a call abandoned at its deadline tells whether it spent once it
		// returns; one cut there may have spent
		if late == nil && mayHaveSpent(err) {
			late = unknownCall(c.checks, c.n, t0, err)
		}
		return late, l.fallback(ctx, c, err)
	}
	l.succeeded(c.checks[0].Key)
	c.spent = spentStore
	if l.denied != nil {
		l.denied.record(c.checks, c.n, t0, c.results, leads, c.gen)
	}
	return nil, nil
}

// never reports whether a cost above a limit's capacity denies the group,
// which no store call could change, and fills results if so. A limit that
// an override may replace is left to the store.
func never(checks []Check, n int, results []Result) bool {
	deny := false
	for i := range checks {
		deny = deny || n > checks[i].Limit.Capacity() && checks[i].Override == ""
	}
	if !deny {
		return false
	}
	for i := range checks {
		results[i] = Result{Limit: checks[i].Limit}
		if n > checks[i].Limit.Capacity() && checks[i].Override == "" {
			results[i].RetryAfter = -1
		}
	}
	return true
}
