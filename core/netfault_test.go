package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/netfault"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
)

// The network-fault tests put a fault-injecting TCP proxy (toxiproxy, run
// in this process on a loopback port) between go-redis and a real
// redis-server, and inject the faults a network causes while every process
// is alive: replies late by more or less than the deadline, a black hole
// that accepts connections and never answers, connections cut or reset
// when a reply comes. Each runs with the library's default deadline (50 ms,
// also under -race), except the fault whose replies come within the
// deadline, which runs with roomyTimeout, and the default failure policy,
// FailLocal. Run with -v to see the figures the README quotes.

var (
	// replies 60 to 100 ms late: every one misses the 50 ms deadline
	latePastDeadline = netfault.Fault{Name: "late", Type: "latency", Stream: "downstream", Attributes: map[string]any{"latency": 80, "jitter": 20}}
	// replies 5 to 15 ms late: every one is within the deadline
	lateWithinDeadline = netfault.Fault{Name: "late", Type: "latency", Stream: "downstream", Attributes: map[string]any{"latency": 10, "jitter": 5}}
	// commands go nowhere, and connections stay open: a timeout of 0
	// never closes them
	blackHole = netfault.Fault{Name: "black-hole", Type: "timeout", Stream: "upstream", Attributes: map[string]any{"timeout": 0}}
	// a connection is reset when a reply arrives, the reply dropped
	resetOnReply = netfault.Fault{Name: "reset", Type: "reset_peer", Stream: "downstream", Attributes: map[string]any{"timeout": 0}}
	// a connection passes 3 bytes of the replies to come, then closes: every
	// reply (the shortest, ":0\r\n", has 4) and every HELLO of a new
	// connection is cut in the middle
	cutMidReply = netfault.Fault{Name: "cut", Type: "limit_data", Stream: "downstream", Attributes: map[string]any{"bytes": 3}}
)

// netFaultTraffic is how many goroutines decide at once: enough to open the
// breaker with calls in flight, few enough that two shared cores keep
// healthy replies within the 50 ms deadline under -race.
const netFaultTraffic = 8

// netFaultMargin is how much later than the deadline a decision may
// return, unless the whole process stalled: deadlineMargin, below the
// client's timeouts that a decision waiting on the fault would wait for.
// Under the race detector on a loaded machine, with the other packages'
// tests running beside it, wake-ups 100 ms late were seen with no stall
// the watchers could see.
const netFaultMargin = deadlineMargin

// roomyTimeout is the deadline of the runs whose fault keeps replies
// within it: far above their latency, so that the replies a loaded machine
// delays still come within it.
const roomyTimeout = time.Second

// netFaultMin is how many decisions the traffic makes while a fault is in
// place, at least: a loaded machine makes fewer in the same time.
const netFaultMin = 40

// netFaultBack bounds the time from lifting a fault to decisions from
// Redis again: the longest wait between two probes (1 s), a new
// connection, and room for a loaded machine, where a probe given 50 ms
// may fail on a healthy Redis.
const netFaultBack = 5 * time.Second

// TestNetworkFaults runs traffic through each fault in turn, with a client
// configured as WithTimeout advises and a client with go-redis defaults:
// every decision is answered within the deadline plus a margin, by Redis
// when the fault keeps replies within the deadline, else by the failure
// policy with the breaker open; once the fault is lifted, decisions go back
// to Redis by themselves and the breaker closes; no goroutine outlives the
// Limiter, client and proxy.
func TestNetworkFaults(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, fault := range []struct {
		name     string
		fault    netfault.Fault
		degrades bool
		timeout  time.Duration
	}{
		{"latency-past-deadline", latePastDeadline, true, core.DefaultTimeout},
		{"latency-within-deadline", lateWithinDeadline, false, roomyTimeout},
		{"black-hole", blackHole, true, core.DefaultTimeout},
		{"reset-on-reply", resetOnReply, true, core.DefaultTimeout},
		{"cut-mid-reply", cutMidReply, true, core.DefaultTimeout},
	} {
		for _, kind := range clientKinds {
			t.Run(fault.name+"/"+kind.name, func(t *testing.T) {
				defer goleak.VerifyNone(t, proxyGoroutines()...)
				run := startNetFaultRun(t, srv, core.FailLocal, fault.timeout, kind.opts...)
				defer run.shutdown()
				run.through(fault.fault)
				run.checkFailLocal(fault.degrades)
			})
		}
	}
}

// TestNetworkFaultFailClosed sends traffic into a black hole under
// FailClosed: every decision is a denial wrapping ErrUnavailable with a
// Retry-After of at least a second (a 503), within the deadline plus a
// margin, and decisions go back to Redis once the hole is gone.
func TestNetworkFaultFailClosed(t *testing.T) {
	srv := redistest.StartServer(t)
	defer goleak.VerifyNone(t, proxyGoroutines()...)
	run := startNetFaultRun(t, srv, core.FailClosed, core.DefaultTimeout, recommended)
	defer run.shutdown()
	run.through(blackHole)
	var during int
	for _, o := range run.outcomes {
		checkDeadlineWithin(t, run.stalls, o, run.timeout, netFaultMargin)
		if !run.during(o) {
			continue
		}
		during++
		if o.allowed || !o.degraded || !errors.Is(o.err, core.ErrUnavailable) || o.minRetry < time.Second {
			t.Fatalf("in a black hole: allowed %v, degraded %v, retry %v, err %v: want a degraded denial wrapping ErrUnavailable, retry ≥ 1s",
				o.allowed, o.degraded, o.minRetry, o.err)
		}
	}
	t.Logf("during the fault: %d decisions, every one a denial for want of Redis; the slowest of those it touched took %v (deadline %v)",
		during, run.worst().Round(time.Millisecond), core.DefaultTimeout)
	if during == 0 {
		t.Fatal("no decision during the fault")
	}
	run.checkRecovery()
}

// proxyGoroutines are the goleak options of a network-fault run: the
// goroutines that were running before it, and those of toxiproxy's own
// links, which can outlive a stopped proxy for a moment, blocked on a
// channel that nobody reads any more (seen under the race detector on a
// loaded machine). The run's own goroutines, and ratekit's, are still
// checked.
func proxyGoroutines() []goleak.Option {
	return append([]goleak.Option{goleak.IgnoreCurrent()}, netfault.IgnoreLinks()...)
}

// netFaultRun is one run of traffic through a fault.
type netFaultRun struct {
	t      *testing.T
	proxy  *netfault.Proxy
	client *redis.Client
	l      *core.Limiter
	stalls *stallWatch // of this process
	slow   *stallWatch // of redis-server, asked directly
	srv    *redistest.Server
	// timeout is the Limiter's deadline
	timeout time.Duration

	injected, lifted time.Time // when the fault was in place, and when it was lifted
	outcomes         []outcome

	mu      sync.Mutex
	changes []breakerChange // of the Limiter's breaker, in order
	errs    []timedErr      // of the store calls, probes included
}

type timedErr struct {
	at  time.Time
	err error
}

type breakerChange struct {
	at time.Time
	to core.BreakerState
}

// startNetFaultRun starts a proxy to srv and a Limiter with policy and
// timeout over a client through it, and warms it up.
func startNetFaultRun(t *testing.T, srv *redistest.Server, policy core.FailurePolicy, timeout time.Duration, opts ...func(*redis.Options)) *netFaultRun {
	t.Helper()
	r := &netFaultRun{t: t, proxy: netfault.Start(t, srv.Addr()), srv: srv, timeout: timeout}
	o := &redis.Options{Addr: r.proxy.Addr()}
	for _, f := range opts {
		f(o)
	}
	r.client = redis.NewClient(o)
	started := false
	defer func() { // on a failed start too, which ends the test's goroutine
		if !started {
			r.shutdown()
		}
	}()
	l, err := core.NewLimiter(testkit.MustRedis(r.client), core.WithFailurePolicy(policy), core.WithTimeout(timeout),
		core.OnBreakerChange(func(_, to core.BreakerState) {
			r.mu.Lock()
			r.changes = append(r.changes, breakerChange{time.Now(), to})
			r.mu.Unlock()
		}),
		core.OnError(func(err error) {
			r.mu.Lock()
			r.errs = append(r.errs, timedErr{time.Now(), err})
			r.mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	r.l = l
	warmUp(t, l, netFaultTraffic, ampleRules)
	r.mu.Lock()
	r.changes = nil // the warm-up's cold start may have opened it
	r.mu.Unlock()
	started = true
	return r
}

// shutdown closes the Limiter, the client and the proxy, in that order:
// the Limiter waits for the calls it abandoned, which need the proxy.
func (r *netFaultRun) shutdown() {
	if r.l != nil {
		r.l.Close()
	}
	_ = r.client.Close()
	r.proxy.Stop()
}

// through runs traffic for a while, injects fault, runs it on for a while
// and netFaultMin decisions at least, lifts it, and runs on until the
// breaker is closed and for a while after.
func (r *netFaultRun) through(fault netfault.Fault) {
	t := r.t
	r.stalls = watchStalls()
	defer r.stalls.close()
	r.slow = watchRedis(r.srv.Addr())
	defer r.slow.close()
	var after atomic.Bool // unused: the phases of a run go by time
	stop := make(chan struct{})
	run := traffic(r.l, netFaultTraffic, ampleRules, &after, stop)
	time.Sleep(200 * time.Millisecond)
	r.proxy.Inject(t, fault)
	r.injected = time.Now()
	before := run.made.Load()
	time.Sleep(500 * time.Millisecond)
	// the decisions under way at the injection count, not as made during it
	for run.made.Load()-before < netFaultMin+netFaultTraffic && time.Since(r.injected) < 2*netFaultBack {
		time.Sleep(10 * time.Millisecond)
	}
	r.lifted = time.Now()
	r.proxy.Lift(t, fault)
	for r.l.BreakerState() != core.BreakerClosed && time.Since(r.lifted) < 2*netFaultBack {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	r.outcomes = run.wait()
}

// during tells whether o was decided while the fault was in place.
func (r *netFaultRun) during(o outcome) bool {
	return !o.at.Before(r.injected) && !o.at.Add(o.took).After(r.lifted)
}

// overlaps tells whether o was being decided at some time while the fault
// was in place: o may have been sent before it, and answered within it.
func (r *netFaultRun) overlaps(o outcome) bool {
	return !o.at.Add(o.took).Before(r.injected) && !o.at.After(r.lifted)
}

// worst returns the longest decision of those the fault touched.
func (r *netFaultRun) worst() time.Duration {
	var worst time.Duration
	for _, o := range r.outcomes {
		if r.overlaps(o) {
			worst = max(worst, o.took)
		}
	}
	return worst
}

// breakerChanges returns the changes of the Limiter's breaker.
func (r *netFaultRun) breakerChanges() []breakerChange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]breakerChange(nil), r.changes...)
}

// stalled returns the longest stall of the whole process, or of
// redis-server asked directly, while o was decided.
func (r *netFaultRun) stalled(o outcome) time.Duration { return r.stalledIn(o.at, o.took) }

func (r *netFaultRun) stalledIn(from time.Time, d time.Duration) time.Duration {
	return max(r.stalls.during(from, d), r.slow.during(from, d))
}

// watchRedis pings the redis-server at addr directly, not through the
// proxy, one ping after another, and records each that takes longer than
// 10 ms as a stall: time that Redis, or the machine it shares, lost
// whatever the fault. On a loaded machine a healthy Redis can answer late.
func watchRedis(addr string) *stallWatch {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	w := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer c.Close()
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			from := time.Now()
			_ = c.Ping(context.Background()).Err()
			if took := time.Since(from); took > 10*time.Millisecond {
				w.mu.Lock()
				w.stalls = append(w.stalls, stall{from, took})
				w.mu.Unlock()
			}
			time.Sleep(stallTick)
		}
	}()
	return w
}

// excused returns the spans during which the breaker was not closed after
// an opening that a stall explains: the calls that opened it were under
// way, within two deadlines before it, while the process or Redis
// stalled. A stall the watches saw (10 ms or more for one goroutine or
// one ping) may have held another goroutine longer: any one excuses.
func (r *netFaultRun) excused(changes []breakerChange) [][2]time.Time {
	var spans [][2]time.Time
	for i, c := range changes {
		if c.to != core.BreakerOpen || (i > 0 && changes[i-1].to != core.BreakerClosed) {
			continue // not an opening, but a failed probe
		}
		if r.stalledIn(c.at.Add(-2*r.timeout), 2*r.timeout) == 0 {
			continue
		}
		end := time.Now()
		for _, d := range changes[i+1:] {
			if d.to == core.BreakerClosed {
				end = d.at
				break
			}
		}
		spans = append(spans, [2]time.Time{c.at, end})
	}
	return spans
}

// openings counts the breaker's openings among changes: a change to open
// from closed, not after a failed probe.
func openings(changes []breakerChange) int {
	n := 0
	for i, c := range changes {
		if c.to == core.BreakerOpen && (i == 0 || changes[i-1].to == core.BreakerClosed) {
			n++
		}
	}
	return n
}

// within tells whether t falls in one of spans.
func within(t time.Time, spans [][2]time.Time) bool {
	for _, s := range spans {
		if !t.Before(s[0]) && !t.After(s[1]) {
			return true
		}
	}
	return false
}

// checkFailLocal checks a FailLocal run: every decision allowed within the
// deadline plus a margin; during the fault, if it degrades, every decision
// made without Redis and the breaker open, else none and the breaker never
// moved; then recovery. What a stall of the process or of Redis explains
// is excused, and counted.
func (r *netFaultRun) checkFailLocal(degrades bool) {
	t := r.t
	changes := r.breakerChanges()
	spans := r.excused(changes)
	var during, degraded, wrong, excused int
	for _, o := range r.outcomes {
		checkDeadlineWithin(t, r.stalls, o, r.timeout, netFaultMargin)
		if o.err != nil || !o.allowed || !o.resultsOK {
			t.Fatalf("a decision failed: allowed %v, err %v: FailLocal allows every request under an ample limit", o.allowed, o.err)
		}
		if !r.during(o) {
			continue
		}
		during++
		if o.degraded {
			degraded++
		}
		if o.degraded != degrades {
			// a reply that came past the deadline was taken by a caller
			// that woke late: its goroutine, not the store, was slow
			late := degrades && o.took > r.timeout
			if late || r.stalled(o) > 0 || !degrades && within(o.at, spans) {
				excused++
			} else {
				wrong++
			}
		}
	}
	t.Logf("during the fault: %d decisions, %d degraded (%d of them excused by stalls of the process or of Redis); the slowest of those it touched took %v (deadline %v)",
		during, degraded, excused, r.worst().Round(time.Millisecond), r.timeout)
	if during < netFaultMin/2 {
		t.Errorf("%d decisions during the fault: too few to tell", during)
	}
	if !degrades {
		if wrong != 0 {
			t.Errorf("%d of %d decisions made without Redis, whose replies were all within the deadline", wrong, during)
		}
		if n := openings(changes) - len(spans); n > 0 {
			t.Errorf("the breaker opened %d times, no stall explaining it, with every reply within the deadline", n)
		}
		return
	}
	if wrong != 0 {
		t.Errorf("%d of %d decisions during the fault came from Redis, want none", wrong, during)
	}
	if len(changes) == 0 || changes[0].to != core.BreakerOpen || changes[0].at.After(r.lifted) {
		t.Errorf("%d breaker changes: want the first an opening before the fault was lifted", len(changes))
	}
	r.checkRecovery()
}

// checkRecovery checks that decisions came back to Redis within
// netFaultBack of the fault's lifting and that the breaker closed; and
// that every decision begun after it closed came from Redis, unless a
// stall of the process or of Redis explains it, or an opening of the
// breaker that such a stall explains.
func (r *netFaultRun) checkRecovery() {
	t := r.t
	var back time.Time
	for _, o := range r.outcomes {
		end := o.at.Add(o.took)
		if o.at.After(r.lifted) && o.err == nil && !o.degraded && (back.IsZero() || end.Before(back)) {
			back = end
		}
	}
	if back.IsZero() {
		t.Fatal("no decision came from Redis after the fault was lifted")
	}
	changes := r.breakerChanges()
	closed, ok := r.closedAfterLift(changes)
	if !ok {
		t.Fatalf("breaker not closed %v after the fault was lifted; the store's errors since: %s", 2*netFaultBack, r.errorsSince(r.lifted))
	}
	t.Logf("back on Redis %v after the fault was lifted; breaker closed %v after it; %d breaker changes in all",
		back.Sub(r.lifted).Round(time.Millisecond), closed.Sub(r.lifted).Round(time.Millisecond), len(changes))
	if d := back.Sub(r.lifted); d > netFaultBack {
		t.Errorf("decisions came back to Redis %v after the fault was lifted, want within %v", d, netFaultBack)
	}
	spans := r.excused(changes)
	var late, wrong, excused int
	for _, o := range r.outcomes {
		if !o.at.After(closed) {
			continue
		}
		late++
		if !o.degraded && o.err == nil {
			continue
		}
		if r.stalled(o) > 0 || within(o.at, spans) {
			excused++
		} else {
			wrong++
		}
	}
	if excused > 0 {
		t.Logf("%d of %d decisions after the breaker closed were degraded, each excused by a stall of the process or of Redis", excused, late)
	}
	if wrong != 0 {
		t.Errorf("%d of %d decisions after the breaker closed were degraded, no stall explaining them: %s", wrong, late, r.errorsSince(closed))
	}
	if late == 0 {
		t.Error("no decision after the breaker closed")
	}
}

// closedAfterLift returns when the breaker first closed after the fault
// was lifted, or the lifting itself if the breaker was closed then: under
// a stall a probe may get through the fault.
func (r *netFaultRun) closedAfterLift(changes []breakerChange) (time.Time, bool) {
	closedAtLift := false
	for _, c := range changes {
		if c.at.After(r.lifted) {
			if closedAtLift {
				return r.lifted, true
			}
			if c.to == core.BreakerClosed {
				return c.at, true
			}
			continue
		}
		closedAtLift = c.to == core.BreakerClosed
	}
	return r.lifted, closedAtLift
}

// errorsSince sums up the store's errors since from: how many of each.
func (r *netFaultRun) errorsSince(from time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts := map[string]int{}
	for _, e := range r.errs {
		if e.at.After(from) {
			counts[e.err.Error()]++
		}
	}
	return fmt.Sprint(counts)
}
