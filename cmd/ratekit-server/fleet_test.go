//go:build linux

package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/livepage"
)

// fleetConfig limits one rule of each Limiter to 5 an hour: envoy's
// counting (the compatible Limiter) and ratekit's GCRA, which frees a
// unit every 12 minutes, so nothing is freed while the test runs.
const fleetConfig = `
domain: fleet
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: gcra}
`

// fleetRules are fleetConfig's rules as the live page names them, with
// the limiter that decides each.
var fleetRules = []struct{ key, rule, limiter string }{
	{"user", "fleet.user", "compatible"},
	{"gcra", "fleet.gcra", "ratekit"},
}

const (
	// offender goes over the limits, through both processes; light stays
	// under them
	offender = "mallory"
	light    = "alice"
)

// fleetIdentity is how the live page shows a descriptor of the fleet domain
// (with RATEKIT_LIVE_PAGE_IDENTITIES=true).
func fleetIdentity(key, value string) string { return "fleet|" + key + "=" + value }

// askN sends n requests for key=value of the fleet domain through c, one
// after the other, and returns how many were allowed and denied.
func askN(t *testing.T, c rlspb.RateLimitServiceClient, key, value string, n int) (ok, over int) {
	t.Helper()
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := c.ShouldRateLimit(ctx, &rlspb.RateLimitRequest{Domain: "fleet", Descriptors: []*rlv3.RateLimitDescriptor{descriptor(key, value)}})
		cancel()
		if err != nil {
			t.Fatalf("ShouldRateLimit %s=%s: %v", key, value, err)
		}
		switch r.GetOverallCode() {
		case rlspb.RateLimitResponse_OK:
			ok++
		case rlspb.RateLimitResponse_OVER_LIMIT:
			over++
		default:
			t.Fatalf("ShouldRateLimit %s=%s: %v", key, value, r)
		}
	}
	return ok, over
}

// liveStatus fetches a process's status.json from its debug port, and
// returns it decoded and as served.
func liveStatus(t *testing.T, p *proctest.Proc) (livepage.Status, string) {
	t.Helper()
	code, body, err := proctest.Get(p.Debug, "/ratekit/status.json")
	if err != nil || code != 200 {
		t.Fatalf("status.json: %d %v\n%s", code, err, body)
	}
	var st livepage.Status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("status.json: %v\n%s", err, body)
	}
	return st, body
}

// awaitStatus polls p's status.json until check finds nothing missing
// (returns ""), and returns that status; past within it fails with what
// check last found missing and the status it last read.
func awaitStatus(t *testing.T, p *proctest.Proc, name string, within time.Duration, what string, check func(livepage.Status) string) livepage.Status {
	t.Helper()
	t0 := time.Now()
	for {
		st, body := liveStatus(t, p)
		missing := check(st)
		if missing == "" {
			t.Logf("process %s: %s after %v", name, what, time.Since(t0).Round(time.Millisecond))
			return st
		}
		if time.Since(t0) > within {
			t.Fatalf("process %s: %s: not within %v: %s\nlast status.json:\n%s", name, what, within, missing, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// denials finds id among offs and returns its count and error.
func denials(offs []livepage.Offender, id string) (denied, errBound uint64, ok bool) {
	i := slices.IndexFunc(offs, func(o livepage.Offender) bool { return o.Identity == id })
	if i < 0 {
		return 0, 0, false
	}
	return offs[i].Denied, offs[i].Error, true
}

// fleetView is what a process's live page should show: its own denials
// of the offender per rule, the fleet's, and the fleet's processes.
type fleetView struct {
	own, fleet map[string]uint64 // by rule
	processes  []string          // sorted, as status.json lists them
	// most is the fleet's denials of the offender ever, by rule: no view
	// may count more
	most map[string]uint64
}

// check returns a check of a status against v for awaitStatus: what is
// missing yet, or "". It fails t at once on what no later status mends: a
// count above the truth, or a bound above 0, which the summaries never
// report while they hold fewer identities than their capacity (the bound
// n/k is 0 for n denials fewer than k counters); and a never-denied
// identity among the offenders.
func (v fleetView) check(t *testing.T, name string) func(livepage.Status) string {
	return func(st livepage.Status) string {
		if len(st.Limiters) != len(fleetRules) {
			return fmt.Sprintf("%d limiters; want %d", len(st.Limiters), len(fleetRules))
		}
		for _, l := range st.Limiters {
			if l.FleetError != "" {
				return fmt.Sprintf("limiter %s: fleet_error %q", l.Name, l.FleetError)
			}
			if !slices.Equal(l.Fleet, v.processes) {
				return fmt.Sprintf("limiter %s: the fleet lists processes %q; want %q", l.Name, l.Fleet, v.processes)
			}
		}
		for _, fr := range fleetRules {
			i := slices.IndexFunc(st.Rules, func(r livepage.RuleStatus) bool { return r.Name == fr.rule })
			if i < 0 {
				return fmt.Sprintf("no rule %s", fr.rule)
			}
			r := st.Rules[i]
			id := fleetIdentity(fr.key, offender)
			if r.Limiter != fr.limiter || r.Denied != v.own[fr.rule] {
				return fmt.Sprintf("rule %s: limiter %q, %d denied; want %q, %d", fr.rule, r.Limiter, r.Denied, fr.limiter, v.own[fr.rule])
			}
			// this process's view: its own denials, exactly (fewer
			// identities than the summary's capacity)
			if n, e, ok := denials(r.Offenders, id); !ok || n != v.own[fr.rule] || e != 0 {
				return fmt.Sprintf("rule %s: this process's offenders %+v; want %s denied %d (error 0)", fr.rule, r.Offenders, id, v.own[fr.rule])
			}
			if _, _, ok := denials(r.Offenders, fleetIdentity(fr.key, light)); ok {
				t.Fatalf("process %s: rule %s: %s, never denied, among this process's offenders %+v", name, fr.rule, light, r.Offenders)
			}
			if r.Fleet == nil {
				return fmt.Sprintf("rule %s: no fleet view", fr.rule)
			}
			// the fleet's view: the sum of the processes' denials; exact,
			// as the bound n/k is 0 with n denials fewer than k counters
			n, e, ok := denials(r.Fleet.Offenders, id)
			if ok && (n > v.most[fr.rule] || r.Fleet.Bound != 0) {
				t.Fatalf("process %s: rule %s: the fleet counts %s denied %d ±%d, bound %d; the fleet denied it %d times, and %d offenders of %d counters are counted exactly",
					name, fr.rule, id, n, e, r.Fleet.Bound, v.most[fr.rule], len(r.Fleet.Offenders), livepage.DefaultCounters)
			}
			if !ok || n != v.fleet[fr.rule] || e != 0 {
				return fmt.Sprintf("rule %s: the fleet's offenders %+v (bound %d); want %s denied %d (error 0)", fr.rule, r.Fleet.Offenders, r.Fleet.Bound, id, v.fleet[fr.rule])
			}
			if _, _, ok := denials(r.Fleet.Offenders, fleetIdentity(fr.key, light)); ok {
				t.Fatalf("process %s: rule %s: %s, never denied, among the fleet's offenders %+v", name, fr.rule, light, r.Fleet.Offenders)
			}
		}
		return ""
	}
}

// TestLivePageFleetAcrossProcesses runs two ratekit-servers on one
// redis-server, sends one identity over a rule of each Limiter through
// both, and another under the limits, and reads both debug ports' live
// pages: each shows its own denials of the identity as this process's,
// and the fleet's total, exactly, with both processes in the fleet and
// the other identity in neither view; once one process stops, the
// survivor's fleet drops its publication when it expires.
func TestLivePageFleetAcrossProcesses(t *testing.T) {
	redistest.Require(t)
	rs := redistest.StartServer(t)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"fleet.yaml": fleetConfig})
	// a deadline no loaded machine misses: a call past the default 50 ms
	// is decided by the process alone, which would let the limits differ
	// between the processes
	env := map[string]string{"REDIS_URL": rs.Addr(), "RATEKIT_TIMEOUT": "2s",
		"RATEKIT_LIVE_PAGE_FLEET": "true", "RATEKIT_LIVE_PAGE_IDENTITIES": "true"}
	procs := []*proctest.Proc{start(t, dir, env), start(t, dir, env)}
	names := []string{"A", "B"}
	sends := []int{10, 7}

	awaitWindow(time.Hour, 30*time.Second)
	views := []fleetView{{own: map[string]uint64{}}, {own: map[string]uint64{}}}
	total := map[string]uint64{}
	for _, fr := range fleetRules {
		allowed := 0
		for i, p := range procs {
			ok, over := askN(t, p.Client, fr.key, offender, sends[i])
			if over == 0 {
				t.Fatalf("rule %s: process %s denied none of %d requests for %s over a limit of 5", fr.rule, names[i], sends[i], offender)
			}
			allowed += ok
			views[i].own[fr.rule] = uint64(over)
			total[fr.rule] += uint64(over)
			t.Logf("rule %s: process %s allowed %d and denied %d of %s", fr.rule, names[i], ok, over, offender)
		}
		if allowed != 5 {
			t.Fatalf("rule %s: %d of %s's requests allowed by both processes; want the shared limit, 5", fr.rule, allowed, offender)
		}
		for i, p := range procs {
			if ok, _ := askN(t, p.Client, fr.key, light, 2); ok != 2 {
				t.Fatalf("rule %s: process %s allowed %d of 2 requests for %s; want both, under the limit", fr.rule, names[i], ok, light)
			}
		}
	}

	var processes []string
	for _, p := range procs {
		st, _ := liveStatus(t, p)
		if !strings.HasSuffix(st.Process, fmt.Sprintf(":%d", p.Pid())) {
			t.Fatalf("status.json names its process %q; want host:%d", st.Process, p.Pid())
		}
		processes = append(processes, st.Process)
	}
	slices.Sort(processes)
	for i, p := range procs {
		views[i].fleet, views[i].most, views[i].processes = total, total, processes
		awaitStatus(t, p, names[i], 30*time.Second, "both processes' denials in the fleet's view", views[i].check(t, names[i]))
	}

	// B stops: A's fleet drops B's publication once it expires (three
	// intervals of 3 s), and counts A's denials alone
	stopped := time.Now()
	if err := syscall.Kill(procs[1].Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, exited := procs[1].ExitCode(30 * time.Second); !exited {
		t.Fatal("process B did not exit within 30 s of SIGTERM")
	}
	a, _ := liveStatus(t, procs[0])
	survivor := fleetView{own: views[0].own, fleet: views[0].own, most: total, processes: []string{a.Process}}
	awaitStatus(t, procs[0], names[0], 30*time.Second, "the stopped process's publication out of the fleet's view", survivor.check(t, names[0]))
	t.Logf("B's publication left A's fleet view %v after B was stopped", time.Since(stopped).Round(time.Millisecond))
}
