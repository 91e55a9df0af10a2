package adaptertest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
)

// AnswerCostHeader, on a request to GET / of an app that [Harness.New]
// makes, is the cost in units that the handler reports of its answer with
// its adapter's AddCost, once it has answered and before it panics
// "after" ([AnswerCost]).
const AnswerCostHeader = "X-Answer-Cost"

// AnswerCost returns the cost that the request whose header reads as
// header asks its handler to report, 0 when it asks none.
func AnswerCost(header func(string) string) int {
	n, _ := strconv.Atoi(header(AnswerCostHeader))
	return n
}

// Charged returns c's charged rules as an option of an adapter, made with
// its WithCharged.
func Charged[O any](c adapter.Config, withCharged func(...string) O) []O {
	if len(c.Charged) == 0 {
		return nil
	}
	return []O{withCharged(c.Charged...)}
}

// chargedWith returns a Config whose named rules are charged.
func chargedWith(rules ...string) adapter.Config { return adapter.Config{Charged: rules} }

// chargeRule is the rule the charge cases limit with: 100 units a minute
// by GCRA, keyed by ClientKey, so that a unit is repaid every 600 ms.
func chargeRule() core.Rule {
	return core.Rule{Name: "tokens", Limit: core.PerMinute(100), Key: ClientKey()}
}

// getCosting serves GET / from client, asking the handler to report cost
// units of its answer, and to panic after it answered when panicking.
func getCosting(app App, client string, cost int, panicking bool) Response {
	r := NewRequest(http.MethodGet, "/", client)
	r.Header.Set(AnswerCostHeader, strconv.Itoa(cost))
	if panicking {
		r.Header.Set(AnswerPanicHeader, "after")
	}
	return app(r)
}

// RemainingBecomes waits until client's key under rule has want units left
// (0 and denied when in debt), as a charge made in the background lands,
// and returns what Peek last answered.
func RemainingBecomes(t *testing.T, l *core.Limiter, rule core.Rule, client string, want int, debt bool) core.Result {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := l.Peek(context.Background(), rule, "header:"+ClientHeader+":"+client)
		if err != nil {
			t.Fatal(err)
		}
		if p.Remaining == want && (!debt || !p.Allowed) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d remaining (allowed %v), want %d (in debt %v): the answer's cost was not charged", client, p.Remaining, p.Allowed, want, debt)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A handler that reports its answer's cost is charged it once it has
// answered, past the budget: the next request is denied, its header fields
// showing the debt (nothing remaining, a Retry-After until it is repaid and
// one unit fits), and is admitted again once the clock has repaid it. An
// answer that cost less than its up-front unit gives it back; a client of
// its own is not touched.
func testCharged(t *testing.T, h Harness) {
	l, clock := NewLimiter(t)
	rule := chargeRule()
	app := build(t, h, l, []core.Rule{rule}, Setup{Config: chargedWith("tokens")})
	if r := getCosting(app, "a", 150, false); r.Status != http.StatusOK || r.Body != "ok" {
		t.Fatalf("first answer: %d %q, want 200 \"ok\"", r.Status, r.Body)
	}
	p := RemainingBecomes(t, l, rule, "a", 0, true)
	// 150 charged on 100: 50 units of debt, and one more to fit, 600 ms each
	if want := 51 * 600 * time.Millisecond; p.RetryAfter != want {
		t.Errorf("after the charge: RetryAfter %v, want %v", p.RetryAfter, want)
	}
	r := getCosting(app, "a", 1, false)
	checkProblem(t, r, http.StatusTooManyRequests)
	checkFields(t, r.Header, map[string]string{
		"X-RateLimit-Limit":     "100",
		"X-RateLimit-Remaining": "0",
		"Retry-After":           "31",
	})
	if r := getCosting(app, "b", 0, false); r.Status != http.StatusOK || r.Header.Get("X-RateLimit-Remaining") != "99" {
		t.Errorf("another client, an answer of no cost: %d, %q remaining, want 200 with 99",
			r.Status, r.Header.Get("X-RateLimit-Remaining"))
	}
	RemainingBecomes(t, l, rule, "b", 100, false) // its unit given back
	clock.Advance(31 * time.Second)
	if r := getCosting(app, "a", 1, false); r.Status != http.StatusOK {
		t.Errorf("once the debt is repaid: status %d, want 200", r.Status)
	}
}

// A handler that panics after it answered is charged the cost it reported
// before the panic.
func testChargedPanic(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	rule := chargeRule()
	app := build(t, h, l, []core.Rule{rule}, Setup{Config: chargedWith("tokens")})
	getCosting(app, "a", 7, true)
	RemainingBecomes(t, l, rule, "a", 93, false)
	if r := getCosting(app, "a", 0, false); r.Status != http.StatusOK || r.Header.Get("X-RateLimit-Remaining") != "92" {
		t.Errorf("after a panic that reported 7: %d, %q remaining, want 200 with 92", r.Status, r.Header.Get("X-RateLimit-Remaining"))
	}
}

// A streamed answer whose client hangs up after 10 lines of 50 is charged
// the 10 it was sent, not the 50 it asked for; one whose handler panics
// once 7 lines are out is charged those 7. Each line is reported as it
// goes out, so the charge counts what was sent.
func testChargedStream(t *testing.T, h Harness) {
	l, _ := NewLimiter(t)
	rule := chargeRule()
	app := build(t, h, l, []core.Rule{rule}, Setup{Config: chargedWith("tokens")})
	if r := getStreaming(app, "a", 3, 0, 0); r.Status != http.StatusOK || strings.Count(r.Body, "\n") != 3 {
		t.Fatalf("a stream of 3 lines: %d %q", r.Status, r.Body)
	}
	RemainingBecomes(t, l, rule, "a", 97, false)
	if r := getStreaming(app, "b", 50, 10, 0); strings.Count(r.Body, "\n") != 10 {
		t.Fatalf("a stream cut after 10 lines sent %q", r.Body)
	}
	RemainingBecomes(t, l, rule, "b", 90, false)
	getStreaming(app, "c", 50, 0, 7)
	RemainingBecomes(t, l, rule, "c", 93, false)
	// nothing more lands later
	if r := getCosting(app, "b", 0, false); r.Header.Get("X-RateLimit-Remaining") != "89" {
		t.Errorf("after the cut stream: %q remaining, want 89", r.Header.Get("X-RateLimit-Remaining"))
	}
	if r := getCosting(app, "c", 0, false); r.Header.Get("X-RateLimit-Remaining") != "92" {
		t.Errorf("after the stream that panicked: %q remaining, want 92", r.Header.Get("X-RateLimit-Remaining"))
	}
}
