package core

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// beginningStore is a store that keeps deadlines and begins calls of one
// check apart (beginStore), counting what it is asked. Begin and Finish
// run the given functions when set; AllowAllN allows everything.
type beginningStore struct {
	mu                     sync.Mutex
	begins, finishes, alls int
	begin                  func(Check, int) any
	finish                 func(any) (Result, error)
	traits                 Traits
}

func (s *beginningStore) Traits() Traits { return s.traits }

func (s *beginningStore) AllowAllN(_ context.Context, checks []Check, n int) ([]Result, error) {
	s.mu.Lock()
	s.alls++
	s.mu.Unlock()
	res := make([]Result, len(checks))
	for i := range checks {
		res[i] = Result{Limit: checks[i].Limit, Allowed: true, Remaining: checks[i].Limit.Capacity() - n}
	}
	return res, nil
}

func (s *beginningStore) Begin(_ context.Context, check Check, n int) any {
	s.mu.Lock()
	s.begins++
	s.mu.Unlock()
	if s.begin != nil {
		return s.begin(check, n)
	}
	return &check
}

func (s *beginningStore) Finish(_ context.Context, call any, _ Check, n int) (Result, error) {
	s.mu.Lock()
	s.finishes++
	s.mu.Unlock()
	if s.finish != nil {
		return s.finish(call)
	}
	c := call.(*Check)
	return Result{Limit: c.Limit, Allowed: true, Remaining: c.Limit.Capacity() - n, ResetAfter: time.Second}, nil
}

func (s *beginningStore) counts() (begins, finishes, alls int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.begins, s.finishes, s.alls
}

// countingObserver counts the store calls it is told of.
type countingObserver struct {
	mu     sync.Mutex
	calls  int
	errs   []error
	events []DecisionEvent
}

func (o *countingObserver) Decided(_ context.Context, e DecisionEvent) {
	o.mu.Lock()
	o.events = append(o.events, e)
	o.mu.Unlock()
}

func (o *countingObserver) StoreCalled(_ time.Duration, err error) {
	o.mu.Lock()
	o.calls++
	if err != nil {
		o.errs = append(o.errs, err)
	}
	o.mu.Unlock()
}

func (o *countingObserver) BreakerChanged(BreakerState, BreakerState) {}

func fixedRule(name, id string, lim Limit) Rule {
	return Rule{Name: name, Limit: lim, Key: func(Request) (string, error) { return id, nil }}
}

// TestOneRuleBegins: a request of one rule over a store that keeps
// deadlines and begins calls apart is decided by Begin and Finish, one
// call each, with the result Finish gives; everything else (two
// identities, a shadow rule, a store that keeps no deadlines, a call the
// store does not begin) by AllowAllN, once.
func TestOneRuleBegins(t *testing.T) {
	lim := PerMinute(10)
	keeps := Traits{KeepsDeadlines: true}
	cases := []struct {
		name                  string
		store                 *beginningStore
		opts                  []Option
		rules                 []Rule
		begins, finishes, all int
	}{
		{"one rule", &beginningStore{traits: keeps}, nil, []Rule{fixedRule("a", "u1", lim)}, 1, 1, 0},
		{"two identities", &beginningStore{traits: keeps}, nil, []Rule{fixedRule("a", "u1", lim), fixedRule("b", "u2", lim)}, 0, 0, 2},
		{"two rules, one identity", &beginningStore{traits: keeps}, nil, []Rule{fixedRule("a", "u1", lim), fixedRule("b", "u1", lim)}, 0, 0, 1},
		{"shadow rule", &beginningStore{traits: keeps}, nil, []Rule{{Name: "a", Limit: lim, Shadow: true, Key: fixedRule("", "u1", lim).Key}}, 0, 0, 1},
		{"shadow limiter", &beginningStore{traits: keeps}, []Option{WithShadow()}, []Rule{fixedRule("a", "u1", lim)}, 0, 0, 1},
		{"keeps no deadlines", &beginningStore{}, nil, []Rule{fixedRule("a", "u1", lim)}, 0, 0, 1},
		{"not begun", &beginningStore{traits: keeps, begin: func(Check, int) any { return nil }}, nil, []Rule{fixedRule("a", "u1", lim)}, 1, 0, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := &countingObserver{}
			l, err := NewLimiter(tc.store, append(tc.opts, WithObserver(obs), WithTimeout(time.Second))...)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			d, err := l.Check(context.Background(), emptyRequest{}, tc.rules)
			if err != nil || !d.Allowed || d.Degraded() {
				t.Fatalf("decision %+v, %v: want allowed by the store", d, err)
			}
			if len(d.Results) != len(tc.rules) || d.Results[0].Remaining != lim.Capacity()-1 || d.Results[0].Rule != tc.rules[0].Name {
				t.Fatalf("results %+v: want one per rule, %d remaining", d.Results, lim.Capacity()-1)
			}
			b, f, a := tc.store.counts()
			if b != tc.begins || f != tc.finishes || a != tc.all {
				t.Fatalf("Begin %d, Finish %d, AllowAllN %d times: want %d, %d, %d", b, f, a, tc.begins, tc.finishes, tc.all)
			}
			if obs.calls != tc.finishes+tc.all || len(obs.events) != len(tc.rules) {
				t.Fatalf("observer told of %d store calls and %d results: want %d and %d", obs.calls, len(obs.events), tc.finishes+tc.all, len(tc.rules))
			}
		})
	}
}

// TestOneRuleBeginFailure: a Finish that fails, and a Begin or Finish that
// panics, fail the store call like any other: the failure policy decides,
// OnError and the observer hear of it, and the breaker counts it.
func TestOneRuleBeginFailure(t *testing.T) {
	down := errors.New("store down")
	cases := []struct {
		name  string
		store *beginningStore
		want  string
	}{
		{"finish fails", &beginningStore{finish: func(any) (Result, error) { return Result{}, down }}, "store down"},
		{"begin panics", &beginningStore{begin: func(Check, int) any { panic("begin boom") }}, "store panicked: begin boom"},
		{"finish panics", &beginningStore{finish: func(any) (Result, error) { panic("finish boom") }}, "store panicked: finish boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.store.traits = Traits{KeepsDeadlines: true}
			obs := &countingObserver{}
			var failures []error
			l, err := NewLimiter(tc.store, WithFailurePolicy(FailOpen), WithObserver(obs), WithTimeout(time.Second),
				OnError(func(err error) { failures = append(failures, err) }))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			d, err := l.Check(context.Background(), emptyRequest{}, []Rule{fixedRule("a", "u1", PerMinute(10))})
			if err != nil || !d.Allowed || !d.Degraded() {
				t.Fatalf("decision %+v, %v: want allowed by the failure policy", d, err)
			}
			if len(failures) != 1 || !strings.Contains(failures[0].Error(), tc.want) {
				t.Fatalf("OnError heard %v, want %q", failures, tc.want)
			}
			if len(obs.errs) != 1 || !strings.Contains(obs.errs[0].Error(), tc.want) {
				t.Fatalf("observer heard %v, want %q", obs.errs, tc.want)
			}
			if got := l.brk.failures.Load(); got != 1 {
				t.Fatalf("breaker counted %d failures, want 1", got)
			}
			if _, _, a := tc.store.counts(); a != 0 {
				t.Fatalf("AllowAllN called %d times after the store failed: a call begun is not made again", a)
			}
		})
	}
}
