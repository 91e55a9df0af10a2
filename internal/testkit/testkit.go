// Package testkit holds the fixtures that the tests of core and of the
// store packages share: stores built from options a test knows to be
// valid, one-key decisions, a settable clock and fresh keys. It is
// imported by tests only.
package testkit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/storekey"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/redisstore"
)

// MustRedis is redisstore.New for a client and options a test knows to be
// valid.
func MustRedis(client redis.Scripter, opts ...redisstore.Option) *redisstore.Store {
	s, err := redisstore.New(client, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// MustMemory is memorystore.New for options a test knows to be valid.
func MustMemory(opts ...memorystore.Option) *memorystore.Store {
	s, err := memorystore.New(opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// MustLeasing is leasestore.New for options a test knows to be valid.
func MustLeasing(inner core.Store, opts ...leasestore.Option) *leasestore.Store {
	s, err := leasestore.New(inner, opts...)
	if err != nil {
		panic(err)
	}
	return s
}

// Batched returns a store over c that coalesces calls into pipelines,
// closed when the test ends.
func Batched(tb testing.TB, c redis.Scripter) core.Store {
	s := MustRedis(c, redisstore.WithBatching(redisstore.Batching{}))
	tb.Cleanup(func() { s.Close() })
	return s
}

// AllowOne decides n units of one key with s.
func AllowOne(s core.Store, ctx context.Context, key string, limit core.Limit, n int) (core.Result, error) {
	res, err := s.AllowAllN(ctx, []core.Check{{Key: key, Limit: limit}}, n)
	if err != nil {
		return core.Result{}, err
	}
	if len(res) != 1 {
		return core.Result{}, fmt.Errorf("%d results for one check", len(res))
	}
	return res[0], nil
}

// Traits returns the Traits s states, or none.
func Traits(s core.Store) core.Traits {
	if r, ok := s.(interface{ Traits() core.Traits }); ok {
		return r.Traits()
	}
	return core.Traits{}
}

// KeyOf returns the storage key of identity under rule with prefix, as a
// Limiter with that prefix builds it.
func KeyOf(prefix, rule, identity string) (string, error) {
	if err := storekey.ValidateName("prefix", prefix, true); err != nil {
		return "", err
	}
	if err := storekey.ValidateName("rule name", rule, false); err != nil {
		return "", err
	}
	return storekey.Key(prefix, rule, identity)
}

// UniqueKey returns a fresh key for one identity under rule.
func UniqueKey(t testing.TB, rule string) string {
	k, err := KeyOf("rk:", rule, fmt.Sprintf("ip:%s-%d", t.Name(), rand.Uint64()))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Clock is a settable clock, for a memory store and a miniredis alike.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Start is an arbitrary instant inside a minute, well clear of any window
// edge for the periods the tests use.
var Start = time.Date(2026, 3, 14, 15, 9, 26, 535_897_000, time.UTC)

// Algorithms lists every algorithm.
var Algorithms = []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter}

// FakeRedis starts a miniredis on clock, and returns a client of it and a
// function that steps clock and the server's time together.
func FakeRedis(t testing.TB, clock *Clock) (*redis.Client, func(time.Duration)) {
	m := miniredis.RunT(t)
	m.SetTime(clock.Now())
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { c.Close() })
	return c, func(d time.Duration) {
		clock.Add(d)
		m.SetTime(clock.Now())
		m.FastForward(d)
	}
}

// ScripterOnly hides every method of a client but those of redis.Scripter,
// as a wrapper of the user's own might.
type ScripterOnly struct{ redis.Scripter }

// BenchGoroutines are the counts of goroutines benchmarks run at.
var BenchGoroutines = []int{1, 16, 64, 256}

// BenchKeys returns n distinct keys of distinct identities, and checks that
// they are what they claim.
func BenchKeys(b testing.TB, prefix string, n int) []string {
	keys := make([]string, n)
	seen := make(map[string]struct{}, n)
	for i := range keys {
		k, err := KeyOf(prefix, "rule", fmt.Sprintf("ip:10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
		seen[k] = struct{}{}
	}
	if len(seen) != n {
		b.Fatalf("fixture: %d distinct keys, want %d", len(seen), n)
	}
	return keys
}

// RunConcurrent calls decide b.N times in total from g goroutines and reports
// decisions/s, the share of denials and, where the platform tells it, the
// process's CPU time per decision (cpu-ns/op: user and system, every
// thread, GC included; a redis-server the test started is a process of its
// own and not counted), which tells the client's cost of a decision apart
// from the time it waits for Redis. It fails the benchmark if any call
// errs or if not every decision was made.
func RunConcurrent(b *testing.B, g int, decide func(i int) (allowed bool, err error)) {
	b.Helper()
	RunConcurrentEach(b, g, func() func(int) (bool, error) { return decide })
}

// RunConcurrentEach is RunConcurrent with a decide function of each
// goroutine's own, from newDecide, which may keep what it reuses from call
// to call, as a request's goroutine reuses its buffers: one per call
// instead would be an array of b.N, which the first touch of each page
// and every GC's scan of it would charge to the timed loop.
func RunConcurrentEach(b *testing.B, g int, newDecide func() func(i int) (allowed bool, err error)) {
	b.Helper()
	b.ReportAllocs()
	var next, done, denied atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	decides := make([]func(int) (bool, error), g)
	for w := range decides {
		decides[w] = newDecide()
	}
	b.ResetTimer()
	cpu0, cpuOK := processCPU()
	begin := time.Now()
	for _, decide := range decides {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				ok, err := decide(int(i))
				if err != nil {
					first := err // err itself stays on the stack
					firstErr.CompareAndSwap(nil, &first)
					return
				}
				if !ok {
					denied.Add(1)
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	cpu1, _ := processCPU()
	b.StopTimer()
	if p := firstErr.Load(); p != nil {
		b.Fatal(*p)
	}
	if got := done.Load(); got != int64(b.N) {
		b.Fatalf("fixture: %d decisions made, want %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(denied.Load())/float64(b.N), "denied/op")
	if cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// EvalshaStats returns the calls and total µs of EVALSHA and EVAL from INFO
// commandstats.
func EvalshaStats(b testing.TB, ctx context.Context, c *redis.Client) (calls int64, usec float64) {
	b.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || name != "cmdstat_evalsha" && name != "cmdstat_eval" {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				calls += n
			case "usec":
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				usec += n
			}
		}
	}
	if calls == 0 {
		b.Fatalf("fixture: no EVALSHA counted in %q", info)
	}
	return calls, usec
}
