package adapter

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/ratekit/ratekit/core"
)

// Tally follows the answer to one request for the rules that count only
// some answers ([Config.CountOnly]): it fixes the answer's status when the
// status goes out, and gives the header fields that go out with it. An
// adapter makes one per request when [Middleware.Counting] says so, with
// [Middleware.Tally]:
//
//  1. Before anything answers, it sets the fields of [Tally.Preset] on the
//     response: those of a denial or an error, which the middleware
//     answers itself.
//  2. When the status of the answer goes out (net/http's WriteHeader, the
//     first Write, a flush; in a framework that sends the answer once the
//     handler returns, such as Fiber, then), it calls [Tally.Sent] with it
//     and sets the fields it returns, before the status goes out.
//  3. When the request ends, it calls [Tally.Done] with the status the
//     answer has if none was sent: 200 when nothing was written, 500 when
//     the handler panicked before answering.
//
// The first status sent is the answer's status, the one counted: a handler
// that answers 401 and then panics has answered 401. An answer that a rule
// does not count carries the fields of its quota once its unit is given
// back, so the fields say what the client has left.
//
// A Tally is used by one request at a time, and not safe for concurrent
// use.
type Tally struct {
	m       *Middleware
	out     Outcome
	status  int  // the answer's status, 0 until known
	written bool // the fields of Sent were handed out
}

// Tally returns the Tally of the answer to the request that out was
// decided for.
func (m *Middleware) Tally(out Outcome) Tally { return Tally{m: m, out: out} }

// Preset returns the fields to set on the response before anything
// answers: the outcome's own when the middleware answers the request (a
// denial, an error), none when the request proceeds, whose fields depend on
// its answer ([Tally.Sent]).
func (t *Tally) Preset() Headers {
	if t.out.Proceed() {
		return Headers{}
	}
	return t.out.Headers
}

// Sent records that the answer goes out now with status, and returns the
// header fields to set on the response before it does, and true; or false
// when there are none to set: the fields were handed out already, the
// request did not proceed ([Tally.Preset] gave them), or status is
// informational (1xx), which is not the answer's. The first status sent is
// the answer's: later calls change nothing, and neither does
// [Tally.Done].
func (t *Tally) Sent(status int) (Headers, bool) {
	if t.written || status < http.StatusOK {
		return Headers{}, false
	}
	t.written = true
	if t.status == 0 {
		t.status = status
	}
	if !t.out.Proceed() {
		return Headers{}, false
	}
	return t.m.answerHeaders(&t.out, t.status), true
}

// Status returns the answer's status: the one sent, 0 until then.
func (t *Tally) Status() int { return t.status }

// Done tells the middleware the status of the answer ([Middleware.Done]):
// the one sent, whatever happened after it (a panic included), else
// status, which becomes the answer's status, so that fields asked for
// later ([Tally.Sent], as an error handler outside the middleware
// answers) describe it. ctx is the request's context. It returns the
// refund's error, which the Limiter also reports.
func (t *Tally) Done(ctx context.Context, status int) error {
	if t.status == 0 {
		t.status = status
	}
	return t.m.Done(ctx, &t.out, t.status)
}

// countOnlyCosts returns, for each result of d, the units it spent of a
// rule that counts only some answers (the rule's cost for req), 0 for the
// others: in sc's memory when it fits.
func (m *Middleware) countOnlyCosts(req core.Request, rules []core.Rule, d core.Decision, sc *scratch) []int32 {
	var costs []int32
	if sc != nil && len(d.Results) <= len(sc.costs) {
		costs = sc.costs[:len(d.Results)]
	} else {
		costs = make([]int32, len(d.Results))
	}
	for i, r := range d.Results {
		costs[i] = 0
		if _, ok := m.cfg.CountOnly[r.Rule]; !ok || !r.Allowed {
			continue
		}
		j := slices.IndexFunc(rules, func(rule core.Rule) bool { return rule.Name == r.Rule })
		if j < 0 {
			continue
		}
		cost := 1
		if rules[j].Cost != nil {
			cost = rules[j].Cost(req)
		}
		if cost >= 1 && cost <= r.Limit.Capacity() {
			costs[i] = int32(cost)
		}
	}
	return costs
}

// answerHeaders returns the fields of out's answer of status: out's own,
// unless a rule that counts only some answers does not count status, when
// its result is what the refund leaves ([refunded]) and the limiting rule
// is chosen again among them.
func (m *Middleware) answerHeaders(out *Outcome, status int) Headers {
	var buf [scratchRules]core.RuleResult
	var results []core.RuleResult
	for i, r := range out.Decision.Results {
		if i >= len(out.costs) || out.costs[i] == 0 || m.cfg.CountOnly[r.Rule](status) {
			continue
		}
		if results == nil {
			results = append(buf[:0], out.Decision.Results...)
		}
		results[i].Result = refunded(r.Result, int(out.costs[i]))
	}
	if results == nil {
		return out.Headers
	}
	d := out.Decision
	d.Results = results
	d.Limiting = core.MostRestrictive(results)
	return m.headers(d, nil)
}

// refunded returns r as the store answers once n units are given back, if
// nothing else spent meanwhile: n more remain, up to the capacity; a GCRA
// quota is full again n emission intervals sooner; a window quota given
// back whole is full at once, and otherwise resets when it would have.
func refunded(r core.Result, n int) core.Result {
	c := r.Limit.Capacity()
	r.Remaining = min(c, r.Remaining+n)
	switch {
	case r.Limit.Algorithm == core.GCRA:
		r.ResetAfter = max(0, r.ResetAfter-time.Duration(n)*gcraInterval(r.Limit))
	case r.Remaining == c:
		r.ResetAfter = 0
	}
	return r
}
