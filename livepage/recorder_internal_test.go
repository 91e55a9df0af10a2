package livepage

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/core"
)

func TestSeriesAndStore(t *testing.T) {
	defer goleak.VerifyNone(t)
	r, err := NewRecorder(RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lim := core.PerMinute(10)
	for range 5 {
		r.DecidedIdentity(ctx, core.DecisionEvent{Rule: "a", Result: core.Result{Allowed: true, Limit: lim, Remaining: 5}}, "ip:1")
	}
	r.DecidedIdentity(ctx, core.DecisionEvent{Rule: "a", Result: core.Result{Allowed: true, Limit: lim, Remaining: 1}}, "ip:2")
	r.DecidedIdentity(ctx, core.DecisionEvent{Rule: "a", Result: core.Result{Limit: lim}}, "ip:3")
	r.DecidedIdentity(ctx, core.DecisionEvent{Rule: "a", Result: core.Result{Limit: lim}, Shadow: true}, "ip:3")
	t0 := time.Unix(1000, 0)
	r.sample(t0)
	r.DecidedIdentity(ctx, core.DecisionEvent{Rule: "a", Result: core.Result{Limit: lim, Degraded: true}}, "ip:3")
	r.sample(t0.Add(time.Second))
	s := r.sortedRules()[0]
	got := s.snapshotSeries()
	if want := "[6 0] [1 1] [1 0]"; fmtSeries(got) != want || got.End != t0.Add(time.Second).UnixMilli() {
		t.Errorf("series allowed/denied/shadow %s end %d, want %s", fmtSeries(got), got.End, want)
	}
	denied, near := r.offenders(s)
	if len(denied.Counters) != 1 || denied.Counters[0].id != "ip:3" || denied.Counters[0].hi != 3 {
		t.Errorf("denied %+v, want ip:3 thrice (shadow included)", denied)
	}
	if len(near.Counters) != 1 || near.Counters[0].id != "ip:2" {
		t.Errorf("near %+v, want ip:2 alone (1 of 10 left)", near)
	}
	if s.degraded.Load() != 1 {
		t.Errorf("degraded %d, want 1", s.degraded.Load())
	}
	// a window later the counts are still shown; two windows later gone
	r.rotate()
	if d, _ := r.offenders(s); d.N != 3 {
		t.Errorf("after one window: %d denials, want 3", d.N)
	}
	r.rotate()
	if d, _ := r.offenders(s); d.N != 0 {
		t.Errorf("after two windows: %d denials, want 0", d.N)
	}

	for _, d := range []time.Duration{time.Millisecond, time.Millisecond, 2 * time.Millisecond, 100 * time.Millisecond} {
		r.StoreCalled(d, nil)
	}
	ps, n := r.store.latency.percentiles(0.5, 0.99)
	if n != 4 || ps[0] < time.Millisecond || ps[0] > 1300*time.Microsecond || ps[1] < 100*time.Millisecond || ps[1] > 125*time.Millisecond {
		t.Errorf("p50 %v p99 %v of %d calls, want about 1ms and 100ms of 4", ps[0], ps[1], n)
	}
	r.BreakerChanged(core.BreakerClosed, core.BreakerOpen)
	if core.BreakerState(r.store.breaker.Load()) != core.BreakerOpen || r.store.openings.Load() != 1 {
		t.Error("the breaker's opening is not kept")
	}
	r.Close()
	r.Close()
}

func fmtSeries(s Series) string {
	out := ""
	for i, a := range [][]uint32{s.Allowed, s.Denied, s.ShadowDenied} {
		if i > 0 {
			out += " "
		}
		out += "["
		for j, v := range a {
			if j > 0 {
				out += " "
			}
			out += string(rune('0' + v))
		}
		out += "]"
	}
	return out
}

// TestRulesSharingASlot counts decisions of many rules, taking turns from
// several goroutines, whose names share the recent-rule slots: each is
// counted under its own name.
func TestRulesSharingASlot(t *testing.T) {
	r, err := NewRecorder(RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	names := make([]string, 3*recentSlots)
	for i := range names {
		names[i] = "rule-" + strconv.Itoa(i)
	}
	shared := map[int][]string{}
	for _, n := range names {
		shared[recentSlot(n)] = append(shared[recentSlot(n)], n)
	}
	sharing := false
	for _, ns := range shared {
		sharing = sharing || len(ns) > 1
	}
	if !sharing {
		t.Fatal("fixture: no two rule names share a slot")
	}
	const rounds = 200
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range rounds * len(names) {
				n := names[(i+g)%len(names)]
				r.DecidedIdentity(context.Background(), core.DecisionEvent{Rule: n, Result: core.Result{Allowed: true, Limit: core.PerMinute(1000), Remaining: 999}}, "ip:1")
			}
		})
	}
	wg.Wait()
	for _, n := range names {
		if got := (*r.rules.Load())[n].allowed.Load(); got != 4*rounds {
			t.Errorf("rule %s: %d allowed, want %d", n, got, 4*rounds)
		}
	}
}
