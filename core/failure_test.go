package core_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// trafficTimeout is the store deadline of the traffic tests: the default,
// or longer under -race, which slows everything so much that a healthy
// Redis sharing two cores with 32 busy goroutines misses 50ms now and then,
// and the breaker rightly opens.
var trafficTimeout = func() time.Duration {
	if raceEnabled {
		return 200 * time.Millisecond
	}
	return core.DefaultTimeout
}()

// recommended configures a client as core.WithTimeout advises.
func recommended(o *redis.Options) {
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DialTimeout = time.Second
	o.ReadTimeout = time.Second
	o.WriteTimeout = time.Second
}

// clientKinds are the two ways a user may build the client: as WithTimeout
// advises, and with go-redis defaults (no context deadlines, 3 retries).
var clientKinds = []struct {
	name string
	opts []func(*redis.Options)
}{
	{"recommended-client", []func(*redis.Options){recommended}},
	{"default-client", nil},
}

// outcome is what one Check in a traffic test gave.
type outcome struct {
	at        time.Time // when the Check started
	took      time.Duration
	after     bool // it started after the event under test
	allowed   bool
	degraded  bool
	minRetry  time.Duration // shortest RetryAfter of its results
	err       error
	resultsOK bool // one result per rule
}

// trafficRun is the traffic of [traffic] under way.
type trafficRun struct {
	made atomic.Int64 // decisions made so far
	wait func() []outcome
}

// traffic runs Checks of rules from g goroutines until stop is closed.
// Its wait returns every outcome once they have stopped. after tells
// whether the event under test has happened yet.
func traffic(l *core.Limiter, g int, rules func(i int) []core.Rule, after *atomic.Bool, stop <-chan struct{}) *trafficRun {
	var (
		mu  sync.Mutex
		all []outcome
		wg  sync.WaitGroup
		run trafficRun
	)
	for i := range g {
		wg.Go(func() {
			rs := rules(i)
			var mine []outcome
			for {
				select {
				case <-stop:
					mu.Lock()
					all = append(all, mine...)
					mu.Unlock()
					return
				default:
				}
				o := outcome{at: time.Now(), after: after.Load()}
				ctx := requestCtx()
				d, err := l.Check(ctx, staticRequest{ctx}, rs)
				o.took = time.Since(o.at)
				o.allowed, o.degraded, o.err = d.Allowed, d.Degraded(), err
				o.resultsOK = len(d.Results) == len(rs)
				o.minRetry = time.Hour
				for _, r := range d.Results {
					o.minRetry = min(o.minRetry, r.RetryAfter)
				}
				mine = append(mine, o)
				run.made.Add(1)
				// leave the CPU to the Limiter's timers: the test measures
				// deadlines, not how a saturated scheduler queues goroutines
				time.Sleep(500 * time.Microsecond)
			}
		})
	}
	run.wait = func() []outcome {
		wg.Wait()
		return all
	}
	return &run
}

// warmUp has g goroutines decide at once until every decision comes from
// Redis, so that the client's pool holds a connection for each and Redis
// knows the script: a cold start of dozens of connections under -race can
// miss a 50ms deadline.
func warmUp(t *testing.T, l *core.Limiter, g int, rules func(i int) []core.Rule) {
	t.Helper()
	waitFor(t, 30*time.Second, func() bool {
		var degraded atomic.Bool
		var wg sync.WaitGroup
		for i := range g {
			wg.Go(func() {
				ctx := requestCtx()
				d, err := l.Check(ctx, staticRequest{ctx}, rules(i))
				if err != nil || d.Degraded() {
					degraded.Store(true)
				}
			})
		}
		wg.Wait()
		return !degraded.Load() && l.BreakerState() == core.BreakerClosed
	})
}

// stallWatch notices when the whole process stops running for a while:
// on a shared machine the scheduler or the host can pause every goroutine,
// and no deadline can hold through that.
type stallWatch struct {
	mu     sync.Mutex
	stalls []stall
	stop   chan struct{}
	done   chan struct{}
}

type stall struct {
	from time.Time
	late time.Duration
}

// stallTick is how often a stallWatch looks at the clock.
const stallTick = 2 * time.Millisecond

func watchStalls() *stallWatch {
	w := &stallWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		const tick = stallTick
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			from := time.Now()
			time.Sleep(tick)
			if late := time.Since(from) - tick; late > 10*time.Millisecond {
				w.mu.Lock()
				w.stalls = append(w.stalls, stall{from, late})
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *stallWatch) close() {
	close(w.stop)
	<-w.done
}

// excuse returns the longest stall of the process within [from, from+d].
func (w *stallWatch) excuse(from time.Time, d time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	for _, s := range w.stalls {
		if s.from.Before(from.Add(d)) && s.from.Add(s.late).After(from) {
			longest = max(longest, s.late)
		}
	}
	return longest
}

// during returns the longest stall, from the watch's look before it to
// its look after, that overlaps [from, from+d].
func (w *stallWatch) during(from time.Time, d time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	for _, s := range w.stalls {
		span := s.late + stallTick
		if s.from.Before(from.Add(d)) && s.from.Add(span).After(from) {
			longest = max(longest, span)
		}
	}
	return longest
}

// checkDeadline fails the test if a decision took longer than the deadline
// plus deadlineMargin, unless the whole process stalled for the excess.
func checkDeadline(t *testing.T, w *stallWatch, o outcome, deadline time.Duration) {
	t.Helper()
	checkDeadlineWithin(t, w, o, deadline, deadlineMargin)
}

// checkDeadlineWithin fails the test if a decision took longer than the
// deadline plus margin, unless the whole process stalled for the excess.
func checkDeadlineWithin(t *testing.T, w *stallWatch, o outcome, deadline, margin time.Duration) {
	t.Helper()
	limit := deadline + margin
	if o.took <= limit {
		return
	}
	if stalled := w.excuse(o.at, o.took); o.took-stalled <= limit {
		t.Logf("a decision took %v, during which the process stalled for %v", o.took, stalled)
		return
	}
	t.Errorf("a decision took %v, want at most the deadline %v plus %v", o.took, deadline, margin)
}

// ampleRules returns one rule that never limits, on an identity of its own.
func ampleRules(i int) []core.Rule {
	return []core.Rule{rule("default", core.PerHour(core.MaxRate), fmt.Sprintf("user:%d", i))}
}

// TestKillRedisUnderTraffic kills Redis (SIGKILL) in the middle of
// concurrent traffic: FailLocal and FailOpen answer every request,
// FailClosed denies every request after the kill, and no decision waits
// longer than the deadline plus a margin.
func TestKillRedisUnderTraffic(t *testing.T) {
	for _, policy := range []core.FailurePolicy{core.FailLocal, core.FailOpen, core.FailClosed} {
		t.Run(policy.String(), func(t *testing.T) {
			srv := redistest.StartServer(t)
			l := newLimiter(t, testkit.MustRedis(srv.Client(t, recommended)), core.WithFailurePolicy(policy), core.WithTimeout(trafficTimeout))
			warmUp(t, l, 32, ampleRules)
			watch := watchStalls()
			defer watch.close()
			var killed atomic.Bool
			stop := make(chan struct{})
			wait := traffic(l, 32, ampleRules, &killed, stop).wait
			time.Sleep(300 * time.Millisecond)
			killStart := time.Now()
			srv.Kill(t)
			killed.Store(true)
			time.Sleep(700 * time.Millisecond)
			close(stop)
			outcomes := wait()

			var before, beforeFromRedis, after int
			for _, o := range outcomes {
				checkDeadline(t, watch, o, trafficTimeout)
				if !o.resultsOK {
					t.Fatalf("decision without one result per rule: %+v", o)
				}
				if !o.after {
					if o.at.Add(o.took).Before(killStart) {
						// Redis is up, but a busy machine can make it miss
						// the deadline: then the policy decides
						before++
						if !o.degraded {
							beforeFromRedis++
							if o.err != nil || !o.allowed {
								t.Errorf("before the kill: allowed %v, err %v", o.allowed, o.err)
							}
						}
					}
					continue // decided while Redis was dying: any answer goes
				}
				after++
				switch policy {
				case core.FailClosed:
					if o.allowed || !o.degraded || !errors.Is(o.err, core.ErrUnavailable) || o.minRetry < time.Second {
						t.Fatalf("after the kill: allowed %v, degraded %v, retry %v, err %v: want a degraded denial wrapping ErrUnavailable, retry ≥ 1s",
							o.allowed, o.degraded, o.minRetry, o.err)
					}
				default:
					if o.err != nil || !o.allowed || !o.degraded {
						t.Fatalf("after the kill: allowed %v, degraded %v, err %v: want a degraded allow", o.allowed, o.degraded, o.err)
					}
				}
			}
			t.Logf("%d decisions before the kill (%d from Redis), %d after", before, beforeFromRedis, after)
			if beforeFromRedis == 0 || after < 100 {
				t.Errorf("%d decisions from Redis before the kill and %d after: too few to tell", beforeFromRedis, after)
			}
			if got := l.BreakerState(); got == core.BreakerClosed {
				t.Errorf("breaker %v after the kill, want open", got)
			}
		})
	}
}

// TestPauseRedis stops Redis (SIGSTOP: connections accepted, no answers)
// under traffic: every decision returns within the deadline plus a margin,
// and once the breaker is open, without waiting for Redis (most in well
// under a millisecond, on a quiet machine). Then Redis
// continues (SIGCONT) and decisions go back to it. It runs with a client
// configured as WithTimeout advises and with a go-redis default client,
// which ignores context deadlines.
func TestPauseRedis(t *testing.T) {
	for _, kind := range clientKinds {
		t.Run(kind.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			l := newLimiter(t, testkit.MustRedis(srv.Client(t, kind.opts...)), core.WithTimeout(trafficTimeout))
			r := rule("default", core.PerHour(core.MaxRate), "user:1")
			warmUp(t, l, 16, ampleRules)
			srv.Pause(t)
			paused := true
			t.Cleanup(func() { // before the Limiter's Close, which waits for abandoned calls
				if paused {
					srv.Resume(t)
				}
			})
			watch := watchStalls()
			defer watch.close()
			var after atomic.Bool
			after.Store(true)
			stop := make(chan struct{})
			wait := traffic(l, 16, ampleRules, &after, stop).wait
			time.Sleep(400 * time.Millisecond)
			close(stop)
			for _, o := range wait() {
				checkDeadline(t, watch, o, trafficTimeout)
				if o.err != nil || !o.allowed || !o.degraded {
					t.Fatalf("against a stopped Redis: allowed %v, degraded %v, err %v: want a degraded allow", o.allowed, o.degraded, o.err)
				}
			}
			if got := l.BreakerState(); got == core.BreakerClosed {
				t.Fatalf("breaker %v against a stopped Redis, want open", got)
			}

			// the breaker is open: a decision costs no store call, no wait
			lat := make([]time.Duration, 2000)
			for i := range lat {
				start := time.Now()
				if _, err := check(t, l, r); err != nil {
					t.Fatal(err)
				}
				lat[i] = time.Since(start)
			}
			slices.Sort(lat)
			p50, p90 := lat[len(lat)/2], lat[len(lat)*9/10]
			t.Logf("breaker open: p50 %v, p90 %v, max %v", p50, p90, lat[len(lat)-1])
			// a decision that waited on the stopped Redis would take the
			// whole deadline; one that did not, however slow the machine,
			// takes less: the tenth of them a loaded machine delays most
			// do not change the p90
			if p90 >= trafficTimeout {
				t.Errorf("decisions with the breaker open: p50 %v, p90 %v; want p90 under the deadline %v: they wait for no store", p50, p90, trafficTimeout)
			}

			srv.Resume(t)
			paused = false
			start := time.Now()
			waitFor(t, netFaultBack, func() bool {
				d, err := check(t, l, r)
				if err != nil {
					t.Fatal(err)
				}
				return !d.Degraded()
			})
			t.Logf("back on Redis %v after SIGCONT", time.Since(start))
		})
	}
}

// TestDeadlinesOnStoppedRedis stops redis-server (SIGSTOP) and tells the
// caller that gives up from the store that fails, over both kinds of
// client and both kinds of store. A caller whose own deadline comes before
// the Limiter's gets its context's error, and the breaker counts nothing:
// with go-redis keeping deadlines on its connection, the call's read times
// out at that deadline, which may come before the context's own timer
// ends it, so the Limiter cannot go by ctx.Err alone. A call that misses
// the Limiter's deadline is the store's failure: the failure policy
// decides, and the observer is told the Limiter's timeout, whichever
// timer fired first (or, for a call that was never sent, the store's
// error, which says so).
func TestDeadlinesOnStoppedRedis(t *testing.T) {
	for _, kind := range clientKinds {
		for _, batched := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/batched=%v", kind.name, batched), func(t *testing.T) {
				srv := redistest.StartServer(t)
				var opts []redisstore.Option
				if !batched {
					opts = append(opts, redisstore.WithoutBatching())
				}
				store := testkit.MustRedis(srv.Client(t, kind.opts...), opts...)
				rec := &recorder{}
				patient := newLimiter(t, store, core.WithTimeout(time.Minute), core.WithObserver(rec),
					core.WithBreaker(core.BreakerConfig{Failures: 1, Backoff: time.Hour, MaxBackoff: time.Hour}))
				// a breaker that a slow start (under -race, on a loaded
				// machine) cannot open
				impatient := newLimiter(t, store, core.WithTimeout(100*time.Millisecond), core.WithObserver(rec),
					core.WithBreaker(core.BreakerConfig{Failures: 1000, Backoff: time.Hour, MaxBackoff: time.Hour}))
				r := rule("default", core.PerHour(core.MaxRate), "user:1")
				if d, err := check(t, patient, r); err != nil || d.Degraded() {
					t.Fatalf("before the stop: degraded %v, %v", d.Degraded(), err)
				}
				waitFor(t, 10*time.Second, func() bool { // its connection made within its deadline
					d, err := check(t, impatient, r)
					return err == nil && !d.Degraded()
				})
				srv.Pause(t)
				paused := true
				t.Cleanup(func() { // before the Limiters' Close, which waits for abandoned calls
					if paused {
						srv.Resume(t)
					}
				})

				for i := range 5 {
					ctx, cancel := context.WithTimeout(requestCtx(), 20*time.Millisecond)
					_, err := patient.Check(ctx, staticRequest{ctx}, []core.Rule{r})
					cancel()
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("call %d, the caller's 20 ms deadline first: %v; want its context's error", i, err)
					}
					if got := patient.BreakerState(); got != core.BreakerClosed {
						t.Fatalf("call %d: breaker %v after a caller gave up; want closed: giving up is no store failure", i, got)
					}
				}

				rec.mu.Lock()
				before := len(rec.calls)
				rec.mu.Unlock()
				d, err := check(t, impatient, r)
				if err != nil || !d.Allowed || !d.Degraded() {
					t.Fatalf("past the Limiter's deadline: allowed %v, degraded %v, %v; want the failure policy's allow", d.Allowed, d.Degraded(), err)
				}
				rec.mu.Lock()
				calls := slices.Clone(rec.calls[before:])
				rec.mu.Unlock()
				// a call that waited for a pipeline stuck in I/O and never
				// went out keeps the store's error, which says so
				if len(calls) != 1 || !errors.Is(calls[0], context.DeadlineExceeded) ||
					!strings.Contains(calls[0].Error(), "no answer within") && !errors.Is(calls[0], core.ErrNotSent) {
					t.Fatalf("the observer was told %v of the call past the Limiter's deadline; want the Limiter's timeout", calls)
				}

				srv.Resume(t)
				paused = false
				if d, err := check(t, patient, r); err != nil || d.Degraded() {
					t.Fatalf("after the resume: degraded %v, %v", d.Degraded(), err)
				}
			})
		}
	}
}

// TestRestartRedis kills Redis under traffic and restarts it on the same
// port: decisions go back to Redis by themselves, within netFaultBack, and
// no request fails on the way.
func TestRestartRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	l := newLimiter(t, testkit.MustRedis(srv.Client(t, recommended)), core.WithTimeout(trafficTimeout))
	warmUp(t, l, 8, ampleRules)
	var restarted atomic.Bool
	stop := make(chan struct{})
	wait := traffic(l, 8, ampleRules, &restarted, stop).wait
	time.Sleep(200 * time.Millisecond)
	srv.Kill(t)
	time.Sleep(500 * time.Millisecond)
	srv.Restart(t)
	up := time.Now()
	restarted.Store(true)
	r := rule("default", core.PerHour(core.MaxRate), "user:probe")
	var back time.Duration
	waitFor(t, 2*netFaultBack, func() bool {
		d, err := check(t, l, r)
		if err != nil {
			t.Fatal(err)
		}
		back = time.Since(up)
		return !d.Degraded()
	})
	time.Sleep(200 * time.Millisecond)
	close(stop)
	outcomes := wait()
	t.Logf("back on Redis %v after the restart; %d decisions in all", back, len(outcomes))
	if back > netFaultBack {
		t.Errorf("decisions went back to Redis %v after the restart, want within %v", back, netFaultBack)
	}
	var degraded, late, lateDegraded int
	for _, o := range outcomes {
		if o.err != nil || !o.allowed || !o.resultsOK {
			t.Fatalf("a request failed on the way: allowed %v, err %v", o.allowed, o.err)
		}
		if o.degraded {
			degraded++
		}
		if o.at.After(up.Add(back)) {
			late++
			if o.degraded {
				lateDegraded++
			}
		}
	}
	t.Logf("%d degraded decisions; since Redis is back: %d of %d", degraded, lateDegraded, late)
	if degraded == 0 {
		t.Error("no degraded decision during the outage")
	}
	if late == 0 || lateDegraded*4 > late {
		t.Errorf("%d of %d decisions degraded since Redis came back", lateDegraded, late)
	}
}

// TestDeniedKeyHammer has 256 goroutines hammer one denied key, and checks
// that Redis gets at most one command per retry-after interval: while a
// denial Redis sent back is in force, no command for the key reaches it.
// Commands are counted by INFO commandstats, and timed by a store wrapper.
// Each interval ends with the key allowing one more request, which Redis
// must decide, and the next denial renews the cache; every other request is
// answered locally.
func TestDeniedKeyHammer(t *testing.T) {
	srv := redistest.StartServer(t)
	rec := &recordingStore{Store: testkit.MustRedis(srv.Client(t))}
	times := &callTimes{}
	// deadlines are not under test: 256 busy goroutines on two cores may
	// delay a reply past 50ms
	l := newLimiter(t, rec, core.WithTimeout(5*time.Second), core.WithObserver(times))
	const interval = 500 * time.Millisecond
	r := rule("login", core.Limit{Rate: 2, Period: time.Second, Burst: 1}, "user:hammer")
	for {
		d, err := check(t, l, r)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			break
		}
	}
	ctx := context.Background()
	srv.ResetStats(t, ctx)
	before := len(rec.calls())
	const hammer = 2 * time.Second
	var allowed, denied atomic.Int64
	stop := time.Now().Add(hammer)
	var wg sync.WaitGroup
	for range 256 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				d, err := check(t, l, r)
				if err != nil || d.Degraded() {
					t.Errorf("decision %+v, %v: want one from Redis or its cache", d, err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	stats := srv.CommandStats(t, ctx)
	cmds := stats["evalsha"] + stats["eval"]
	calls := rec.calls()
	t.Logf("%d allowed, %d denied, %d script calls in %v (retry-after %v)", allowed.Load(), denied.Load(), cmds, hammer, interval)
	if got := int64(len(calls) - before); got != cmds {
		t.Errorf("%d store calls seen, %d script calls counted by Redis", got, cmds)
	}
	if max := int64(hammer/interval) + 1; allowed.Load() > max {
		t.Errorf("%d allowed in %v of 1 per %v", allowed.Load(), hammer, interval)
	}
	if denied.Load() < 1000 {
		t.Errorf("only %d denials: the key was not hammered", denied.Load())
	}
	took := times.durations()
	if len(took) != len(calls) {
		t.Fatalf("%d store calls timed by the Limiter, %d seen", len(took), len(calls))
	}
	for i := 1; i < len(calls); i++ {
		prev, c := calls[i-1], calls[i]
		if c.start.Before(prev.end) {
			t.Fatalf("store calls %d and %d for one key overlap: the crowd was not coalesced", i-1, i)
		}
		// c's denial is remembered for its retry-after from the moment the
		// Limiter sent c, which the wrapper sees later, after a goroutine
		// of the call's own was scheduled: c's end less what the Limiter
		// timed of c is no later than that moment (calls do not overlap,
		// so the i-th timed is c), and before its retry-after has passed
		// from then no store call may come
		sent := c.end.Add(-took[i])
		if i+1 < len(calls) && !c.allowed && calls[i+1].start.Before(sent.Add(c.retry)) {
			t.Errorf("store call %d came %v after call %d was sent, whose denial was in force for %v",
				i+1, calls[i+1].start.Sub(sent), i, c.retry)
		}
	}
}

// callTimes is an Observer that keeps how long each store call took, by
// the Limiter's clock, in the order the calls returned.
type callTimes struct {
	mu sync.Mutex
	d  []time.Duration
}

func (o *callTimes) Decided(context.Context, core.DecisionEvent)         {}
func (o *callTimes) BreakerChanged(core.BreakerState, core.BreakerState) {}

func (o *callTimes) StoreCalled(d time.Duration, _ error) {
	o.mu.Lock()
	o.d = append(o.d, d)
	o.mu.Unlock()
}

func (o *callTimes) durations() []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.d)
}

// recordingStore times every store call and keeps its outcome.
type recordingStore struct {
	core.Store
	mu  sync.Mutex
	log []storeCall
}

type storeCall struct {
	start, end time.Time
	allowed    bool
	retry      time.Duration
}

func (s *recordingStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	c := storeCall{start: time.Now()}
	res, err := s.Store.AllowAllN(ctx, checks, n)
	c.end = time.Now()
	if err == nil {
		c.allowed, c.retry = res[0].Allowed, res[0].RetryAfter
	}
	s.mu.Lock()
	s.log = append(s.log, c)
	s.mu.Unlock()
	return res, err
}

func (s *recordingStore) calls() []storeCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := slices.Clone(s.log)
	slices.SortFunc(c, func(a, b storeCall) int { return a.start.Compare(b.start) })
	return c
}

// calledKey marks a Check's context with a flag that flagStore sets when
// the call reaches the store.
type calledKey struct{}

type flagStore struct{ core.Store }

func (s flagStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	if f, ok := ctx.Value(calledKey{}).(*atomic.Bool); ok {
		f.Store(true)
	}
	return s.Store.AllowAllN(ctx, checks, n)
}

// TestDeniedCacheExactRedis runs concurrent random traffic on a few keys
// against a real redis-server and checks every answer of the denied-key
// cache against Redis right after: the same request sent to Redis directly
// must be denied. A denied request spends nothing, so asking is a peek. The
// check is conclusive when Redis answered before the cached denial could
// have expired; answers that straddle the expiry are not counted.
func TestDeniedCacheExactRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	raw := testkit.MustRedis(srv.Client(t))
	for _, alg := range []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			l := newLimiter(t, flagStore{raw}, core.WithPrefix(fmt.Sprintf("exact-%s-%d:", alg, rand.Uint64())), core.WithTimeout(time.Second))
			a := core.Limit{Rate: 20, Period: 200 * time.Millisecond, Burst: 5, Algorithm: alg}
			b := core.Limit{Rate: 10, Period: 300 * time.Millisecond, Burst: 4, Algorithm: alg}
			var conclusive, straddled, cached atomic.Int64
			// 600ms of traffic, and on a loaded machine, which gets less
			// done in that time, more: until 20 cache answers are confirmed,
			// within a generous bound
			stop, bound := time.Now().Add(600*time.Millisecond), time.Now().Add(time.Minute)
			going := func() bool {
				now := time.Now()
				return now.Before(stop) || (conclusive.Load() < 20 && now.Before(bound))
			}
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), uint64(alg)))
					for going() {
						id := fmt.Sprintf("user:%d", rng.IntN(4))
						cost := 1 + rng.IntN(2)
						rules := [][]core.Rule{{rule("a", a, id)}, {rule("b", b, id)}, {rule("a", a, id), rule("b", b, id)}}[rng.IntN(3)]
						for i := range rules {
							rules[i].Cost = func(core.Request) int { return cost }
						}
						called := new(atomic.Bool)
						ctx := context.WithValue(requestCtx(), calledKey{}, called)
						begin := time.Now()
						d, err := l.Check(ctx, staticRequest{ctx}, rules)
						if err != nil {
							t.Error(err)
							return
						}
						if called.Load() {
							continue
						}
						cached.Add(1)
						if d.Allowed || d.Degraded() {
							t.Errorf("a decision made without Redis: %+v", d)
							return
						}
						var wait time.Duration // the cached denial holds at least this long after begin
						checks := make([]core.Check, len(rules))
						for i, r := range rules {
							k, _ := l.StorageKey(r.Name, id)
							checks[i] = core.Check{Key: k, Limit: r.Limit}
							wait = max(wait, d.Results[i].RetryAfter)
						}
						res, err := raw.AllowAllN(context.Background(), checks, cost)
						answered := time.Since(begin)
						if err != nil {
							t.Error(err)
							return
						}
						switch {
						case !res[0].Allowed:
							conclusive.Add(1)
						case answered < wait:
							t.Errorf("the cache denied %v at cost %d (retry after %v), and Redis allowed it %v later", checks, cost, wait, answered)
							return
						default:
							straddled.Add(1)
						}
					}
				})
			}
			wg.Wait()
			t.Logf("%d cache answers: %d confirmed by Redis, %d straddled their expiry", cached.Load(), conclusive.Load(), straddled.Load())
			if conclusive.Load() < 20 {
				t.Errorf("only %d cache answers confirmed: the test proves little", conclusive.Load())
			}
		})
	}
}
