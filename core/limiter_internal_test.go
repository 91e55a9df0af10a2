package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// downStore is a Store whose every call fails.
type downStore struct{}

var errStoreDown = errors.New("store down")

func (downStore) AllowN(context.Context, string, Limit, int) (Result, error) {
	return Result{}, errStoreDown
}

func (downStore) AllowAllN(context.Context, []Check, int) ([]Result, error) {
	return nil, errStoreDown
}

// countingStore counts the calls that reach a Store.
type countingStore struct {
	Store
	calls atomic.Int64
}

func (s *countingStore) AllowAllN(ctx context.Context, checks []Check, n int) ([]Result, error) {
	s.calls.Add(1)
	return s.Store.AllowAllN(ctx, checks, n)
}

// testClock is a clock moved by hand, shared by a miniredis, a memorystore.Store
// and a Limiter.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

var clockStart = time.Date(2026, 3, 14, 15, 9, 26, 535_897_000, time.UTC)

// clockedRedis returns a store over a miniredis whose clock is the one
// returned, which advance moves for both, from clockStart.
func clockedRedis(t *testing.T) (clock *testClock, _ Store, advance func(time.Duration)) {
	clock = &testClock{now: clockStart}
	m := miniredis.RunT(t)
	m.SetTime(clockStart)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return clock, NewRedisStore(c), func(d time.Duration) {
		clock.add(d)
		m.SetTime(clock.Now())
		m.FastForward(d)
	}
}

// identityRule returns a rule whose key function returns *id.
func identityRule(name string, limit Limit, id *string) Rule {
	return Rule{Name: name, Limit: limit, Key: func(Request) (string, error) { return *id, nil }}
}

type emptyRequest struct{}

func (emptyRequest) Context() context.Context     { return context.Background() }
func (emptyRequest) Method() string               { return "GET" }
func (emptyRequest) Path() string                 { return "/" }
func (emptyRequest) Route() string                { return "" }
func (emptyRequest) Header(string) string         { return "" }
func (emptyRequest) HeaderValues(string) []string { return nil }
func (emptyRequest) Query(string) string          { return "" }
func (emptyRequest) RemoteAddr() string           { return "192.0.2.1:1" }

// TestFallbackBounded drives 200k distinct identities through FailLocal
// during an outage that lasts (a store that always fails), with time moving
// on, and checks that the fallback store holds only the identities whose
// state has not yet expired, or at most its maximum.
func TestFallbackBounded(t *testing.T) {
	identities := 200_000
	if raceDetector {
		identities = 50_000
	}
	tests := []struct {
		name    string
		limit   Limit
		maxKeys int
		bound   int
	}{
		// a GCRA key of 10/s lives 100ms after one request and one new
		// identity arrives per ms: about 100 keys are alive at any time;
		// the store keeps an entry a second past its state's expiry, and
		// its expiry works in ticks of about a second, so about 2000 more
		// are held
		{"expiry", PerSecond(10), 1 << 20, 3000},
		// a key of 10/h lives 6 minutes: only the maximum bounds the store
		{"maximum", PerHour(10), 5000, 5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &testClock{now: clockStart}
			l, err := NewLimiter(downStore{}, WithClock(clock.Now), WithFallbackMaxKeys(tt.maxKeys))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var id string
			rules := []Rule{identityRule("r", tt.limit, &id)}
			peak := 0
			for i := range identities {
				id = fmt.Sprintf("ip:10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
				d, err := l.Check(context.Background(), emptyRequest{}, rules)
				if err != nil || !d.Allowed || !d.Degraded() {
					t.Fatalf("identity %d: %+v, %v: want allowed locally", i, d, err)
				}
				clock.add(time.Millisecond)
				if i%5_000 == 4_999 {
					n := l.fallbackStore.Len()
					peak = max(peak, n)
					if n > tt.bound {
						t.Fatalf("after %d identities the fallback store holds %d keys, want at most %d", i+1, n, tt.bound)
					}
				}
			}
			t.Logf("%d identities over %v: at most %d keys held", identities, clock.Now().Sub(clockStart), peak)
			if got := l.BreakerState(); got == BreakerClosed {
				t.Errorf("breaker %v through the outage, want open", got)
			}
		})
	}
}

// TestDeniedCacheExact runs random traffic against a miniredis whose clock
// is the Limiter's, so that every answer of the denied-key cache can be
// checked against the store at the very same instant, boundaries included:
// asking the store again is a peek, since a denied request spends nothing.
func TestDeniedCacheExact(t *testing.T) {
	for _, alg := range []Algorithm{GCRA, FixedWindow, SlidingWindowLog, SlidingWindowCounter} {
		t.Run(alg.String(), func(t *testing.T) {
			clock, raw, advance := clockedRedis(t)
			counted := &countingStore{Store: raw}
			// a generous deadline: every decision must be the store's or the
			// cache's, and a loaded machine must not hand one to the fallback
			l, err := NewLimiter(counted, WithTimeout(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			l.now = func() int64 { return int64(clock.Now().Sub(clockStart)) }
			l.clock = clock.Now // every reading of the Limiter's time is clock's

			rng := rand.New(rand.NewPCG(1, uint64(alg)))
			a := Limit{Rate: 5, Period: time.Second, Burst: 3, Algorithm: alg}
			b := Limit{Rate: 3, Period: 2 * time.Second, Burst: 3, Algorithm: alg}
			var id string
			ruleSets := [][]Rule{
				{identityRule("a", a, &id)},
				{identityRule("b", b, &id)},
				{identityRule("a", a, &id), identityRule("b", b, &id)},
			}
			advances := []time.Duration{0, 0, time.Microsecond, time.Millisecond, 37 * time.Millisecond, 150 * time.Millisecond, 400 * time.Millisecond}
			var (
				cached, denied, hitsAtEdge int
				lastRetry                  time.Duration // of the last denial
			)
			steps := 1500
			if raceDetector {
				steps = 800
			}
			for range steps {
				switch k := rng.IntN(len(advances) + 2); {
				case k < len(advances):
					advance(advances[k])
				case lastRetry > 0:
					// right before or at the end of the last denial's wait
					advance(lastRetry - time.Duration(k-len(advances))*time.Microsecond)
					lastRetry = 0
				}
				id = fmt.Sprintf("user:%d", rng.IntN(3))
				rules := ruleSets[rng.IntN(len(ruleSets))]
				cost := 1 + rng.IntN(3)
				if rng.IntN(50) == 0 {
					cost = 4 // above every capacity: never
				}
				for i := range rules {
					r := rules[i]
					r.Cost = func(Request) int { return cost }
					rules[i] = r
				}
				before := counted.calls.Load()
				d, err := l.Check(context.Background(), emptyRequest{}, rules)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					denied++
					if lim := d.Results[d.Limiting]; lim.RetryAfter > 0 {
						lastRetry = lim.RetryAfter
					}
				}
				if counted.calls.Load() != before {
					continue // the store decided
				}
				// the cache decided: the store must deny the same request now
				cached++
				if d.Allowed {
					t.Fatalf("the cache allowed %+v", d)
				}
				checks := make([]Check, len(rules))
				for i, r := range rules {
					checks[i] = Check{Key: mustKey(t, l, r.Name, id), Limit: r.Limit}
				}
				res, err := raw.AllowAllN(context.Background(), checks, cost)
				if err != nil {
					t.Fatal(err)
				}
				for i := range res {
					if res[i].Allowed {
						t.Fatalf("the cache denied %v at cost %d, which the store allows: %+v", checks, cost, res)
					}
					got := d.Results[i].Result
					// a fixed window's waits are whole ms of the server's
					// clock, each up to 1ms short of the window's end: a
					// wait read earlier may end up to 1ms after one read now,
					// still never past the end
					var quantum time.Duration
					if alg == FixedWindow {
						quantum = time.Millisecond
					}
					if got.RetryAfter > 0 && got.RetryAfter > res[i].RetryAfter+quantum {
						t.Fatalf("rule %s: cache says retry after %v, the store %v", d.Results[i].Rule, got.RetryAfter, res[i].RetryAfter)
					}
					if got.RetryAfter > 0 && got.RetryAfter <= time.Millisecond {
						hitsAtEdge++
					}
				}
			}
			t.Logf("%d denials, %d answered by the cache (%d within 1ms of expiry)", denied, cached, hitsAtEdge)
			if cached < steps/15 {
				t.Errorf("only %d cache answers: the test proves little", cached)
			}
		})
	}
}

func mustKey(t *testing.T, l *Limiter, rule, id string) string {
	t.Helper()
	k, err := l.storageKey(rule, id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestDeniedCacheHitAllocs checks that answering a denied key from the
// cache allocates nothing.
func TestDeniedCacheHitAllocs(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer c.Close()
	// a generous deadline: a loaded machine must not turn the fixture's
	// calls into missed deadlines
	l, err := NewLimiter(NewRedisStore(c), WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	checks := []Check{{Key: "ratekit:r:{user:1}", Limit: PerHour(1)}, {Key: "ratekit:s:{user:1}", Limit: PerHour(100)}}
	results := make([]Result, len(checks))
	ctx := context.Background()
	for range 2 {
		if _, err := l.decideGroup(ctx, checks, 1, results); err != nil {
			t.Fatal(err)
		}
	}
	if results[0].Allowed || results[0].Degraded || results[0].RetryAfter <= 0 {
		t.Fatalf("fixture: %+v, want a denial", results[0])
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := l.decideGroup(ctx, checks, 1, results); err != nil || results[0].Allowed {
			t.Fatal("not a cached denial")
		}
	})
	if allocs != 0 {
		t.Errorf("a cache hit allocates %v times, want 0", allocs)
	}
}
