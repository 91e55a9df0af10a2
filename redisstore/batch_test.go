package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// TestBatchingNoScript flushes the server's script cache between calls:
// pipelined EVALSHAs answered NOSCRIPT go again by EVAL, and no call fails.
func TestBatchingNoScript(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	s := testkit.MustRedis(c, redisstore.WithBatching(redisstore.Batching{MaxBatch: 64, Parallel: 2, MaxWait: 0}))
	defer s.Close()
	ctx := context.Background()
	limit := core.PerHour(1000)
	for round := range 3 {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 50 {
			wg.Go(func() {
				key := testkit.UniqueKey(t, "noscript")
				if r, err := testkit.AllowOne(s, ctx, key, limit, 1); err != nil || !r.Allowed {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		if n := failed.Load(); n > 0 {
			t.Fatalf("round %d: %d of 50 calls failed after SCRIPT FLUSH", round, n)
		}
	}
}

// TestBatchingExact sends 256 goroutines at one key through one batching
// store: pipelines keep every decision atomic, so exactly the limit passes.
func TestBatchingExact(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	s := testkit.MustRedis(c, redisstore.WithBatching(redisstore.Batching{MaxBatch: 0, Parallel: 0, MaxWait: 0}))
	defer s.Close()
	for _, alg := range testkit.Algorithms {
		key := testkit.UniqueKey(t, "batch-"+alg.String())
		limit := core.PerHour(500).WithAlgorithm(alg)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range 256 {
			wg.Go(func() {
				for range 4 {
					r, err := testkit.AllowOne(s, context.Background(), key, limit, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if r.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got := admitted.Load(); got != 500 {
			t.Errorf("%v: admitted %d of 1024, want 500", alg, got)
		}
	}
}

// TestBatchingClose checks that Close stops the batcher's goroutines and
// that later calls fail with ErrClosed.
func TestBatchingClose(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := testkit.MustRedis(c, redisstore.WithBatching(redisstore.Batching{MaxBatch: 0, Parallel: 0, MaxWait: 0}))
	key := testkit.UniqueKey(t, "close")
	if _, err := testkit.AllowOne(s, context.Background(), key, core.PerHour(10), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := testkit.AllowOne(s, context.Background(), key, core.PerHour(10), 1); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("after Close: err = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestBatchingContextEnds sends calls whose contexts end while they queue,
// while their pipeline is in flight, or before they start: each returns
// its answer or its context's error, the calls after them still get
// answers, and Close leaves no goroutine behind.
func TestBatchingContextEnds(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := testkit.MustRedis(c, redisstore.WithBatching(redisstore.Batching{MaxBatch: 8, Parallel: 2, MaxWait: 0}))
	limit := core.PerHour(1_000_000)
	var wg sync.WaitGroup
	for i := range 128 {
		wg.Go(func() {
			key := testkit.UniqueKey(t, "ctx")
			for j := range 20 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((i+j)%7)*50*time.Microsecond)
				_, err := testkit.AllowOne(s, ctx, key, limit, 1)
				cancel()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want nil or the context's error", err)
					return
				}
			}
			if _, err := testkit.AllowOne(s, context.Background(), key, limit, 1); err != nil {
				t.Errorf("after the ended contexts: %v", err)
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBatchingCallerDeadline: a pipeline ends on its connection at the
// latest of its callers' deadlines, as go-redis's read does, with a socket
// timeout that may come before the context's timer fires. Each caller, the
// one that led the pipeline as well as those that waited for it, is still
// told its context's error, the same way each time.
func TestBatchingCallerDeadline(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	c.AddHook(timeoutAtDeadline{})
	s := testkit.MustRedis(c, redisstore.WithBatching(redisstore.Batching{MaxBatch: 4, Parallel: 1, MaxWait: 0}))
	defer s.Close()
	limit := core.PerHour(1_000)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			key := testkit.UniqueKey(t, "deadline")
			for range 10 {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
				_, err := testkit.AllowOne(s, ctx, key, limit, 1)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("err = %v, want the context's deadline", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// timeoutAtDeadline is a go-redis hook that fails every command and
// pipeline whose context has a deadline at that deadline, with the socket
// timeout go-redis returns when a deadline set on its connection passes.
type timeoutAtDeadline struct{}

func (timeoutAtDeadline) DialHook(next redis.DialHook) redis.DialHook { return next }

func (timeoutAtDeadline) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return timeoutAt(ctx, []redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (timeoutAtDeadline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return timeoutAt(ctx, cmds, func() error { return next(ctx, cmds) })
	}
}

func timeoutAt(ctx context.Context, cmds []redis.Cmder, next func() error) error {
	d, ok := ctx.Deadline()
	if !ok {
		return next()
	}
	time.Sleep(time.Until(d))
	err := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, cmd := range cmds {
		cmd.SetErr(err)
	}
	return err
}

// TestBatchingMerged holds pipelines open so that calls of one GCRA limit,
// and calls of one fixed-window limit, share script calls (gcra_many.lua,
// fixed_many.lua; all of them on one server, those of one identity on a
// Cluster), with costs above 1 and costs above the capacity. Each
// identity's allowed calls of each limit must chain, Remaining after one
// plus the next one's cost giving the Remaining before it, from the
// capacity down: every call saw the state the one before it left, none
// was lost or decided twice.
func TestBatchingMerged(t *testing.T) {
	srv := redistest.StartServer(t)
	cl := redistest.StartCluster(t, 3)
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
	}{{"standalone", srv.Client(t)}, {"cluster", cl.Client(t)}} {
		t.Run(tc.name, func(t *testing.T) {
			// no script is loaded: the first merged calls are answered
			// NOSCRIPT and go again by EVAL
			if err := tc.client.ScriptFlush(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			var merged, evals atomic.Int64
			var mergedByRule sync.Map // rule -> *atomic.Int64
			tc.client.AddHook(countMerged{&merged, &evals, &mergedByRule})
			s := testkit.MustRedis(tc.client, redisstore.WithBatching(redisstore.Batching{MaxBatch: 64, Parallel: 1, MaxWait: 2 * time.Millisecond}))
			defer s.Close()
			const burst, ids = 20, 4
			// every algorithm's one-key calls of one limit merge, and so do
			// calls of several limits; the sliding ones get a window in
			// which no unit leaves or weighs
			gcra, counter := core.PerHour(burst), slidingMidWindow(t, burst)
			cases := []struct {
				name   string
				limits []core.Limit
			}{
				{"gcra", []core.Limit{gcra}},
				{"fixed", []core.Limit{core.PerHour(burst).WithAlgorithm(core.FixedWindow)}},
				{"sliding-counter", []core.Limit{counter}},
				{"sliding-log", []core.Limit{{Rate: burst, Period: 24 * time.Hour, Burst: burst, Algorithm: core.SlidingWindowLog}}},
				{"gcra and sliding-counter", []core.Limit{gcra, counter}},
			}
			type allowed struct{ cost, remaining int }
			// keys[c][id][l]: case c's key of identity id under its limit l,
			// whose rule is "merged<c>-<l>"
			keys := make([][ids][]string, len(cases))
			got := make([][ids][][]allowed, len(cases))
			for c, cs := range cases {
				for id := range ids {
					identity := fmt.Sprintf("ip:%s-%d", t.Name(), rand.Uint64())
					for l := range cs.limits {
						k, err := testkit.KeyOf("rk:", fmt.Sprintf("merged%d-%d", c, l), identity)
						if err != nil {
							t.Fatal(err)
						}
						keys[c][id] = append(keys[c][id], k)
					}
					got[c][id] = make([][]allowed, len(cs.limits))
				}
			}
			var (
				mu sync.Mutex
				wg sync.WaitGroup
			)
			ctx := context.Background()
			for g := range 64 {
				wg.Go(func() {
					id := g % ids
					for j := range 4 {
						cost := 1 + (g+j)%2
						if g%16 == 5 && j == 0 {
							cost = burst + 1
						}
						for c, cs := range cases {
							checks := make([]core.Check, len(cs.limits))
							for l, lim := range cs.limits {
								checks[l] = core.Check{Key: keys[c][id][l], Limit: lim}
							}
							res, err := s.AllowAllN(ctx, checks, cost)
							if err != nil {
								t.Error(err)
								return
							}
							for l, r := range res {
								if cost > burst && (r.Allowed || !r.Never()) {
									t.Errorf("%s: cost %d over burst %d: %+v, want denied, never", cs.name, cost, burst, r)
								}
								if r.Allowed != res[0].Allowed {
									t.Errorf("%s: results %+v: want all allowed or all denied", cs.name, res)
								}
								if r.Allowed {
									mu.Lock()
									got[c][id][l] = append(got[c][id][l], allowed{cost, r.Remaining})
									mu.Unlock()
								}
							}
						}
					}
				})
			}
			wg.Wait()
			t.Logf("merged script calls: %d, by EVAL: %d", merged.Load(), evals.Load())
			if merged.Load() == 0 || evals.Load() == 0 {
				t.Fatal("no calls shared a script call, or none went by EVAL: the fixture does not test merging after NOSCRIPT")
			}
			for c, cs := range cases {
				if n, _ := mergedByRule.Load(fmt.Sprintf("merged%d-0", c)); n == nil || n.(*atomic.Int64).Load() == 0 {
					t.Errorf("%s: no calls shared a script call", cs.name)
				}
				for id := range ids {
					for l := range cs.limits {
						calls := got[c][id][l]
						slices.SortFunc(calls, func(a, b allowed) int { return b.remaining - a.remaining })
						left := burst
						for _, a := range calls {
							if a.remaining != left-a.cost {
								t.Fatalf("identity %d, %s, limit %d: allowed calls %v do not chain down from %d", id, cs.name, l, calls, burst)
							}
							left = a.remaining
						}
						if left > 1 {
							t.Errorf("identity %d, %s, limit %d: %d units left unspent under a demand of about 90", id, cs.name, l, left)
						}
						k := keys[c][id][l]
						if ttl, err := tc.client.PTTL(ctx, k).Result(); err != nil || ttl < 0 {
							t.Errorf("PTTL %s = %v, %v: want an expiry", k, ttl, err)
						}
					}
				}
			}
		})
	}
}

// slidingMidWindow returns a sliding window counter's limit of rate units
// whose current window is hours from either edge, so that a test's calls
// all count in the first window of their keys, where the algorithm is
// exact: a day, or 25 hours near midnight (UTC), whose windows turn at
// other hours.
func slidingMidWindow(t *testing.T, rate int) core.Limit {
	t.Helper()
	l := core.Limit{Rate: rate, Period: 24 * time.Hour, Burst: rate, Algorithm: core.SlidingWindowCounter}
	if into := time.Duration(time.Now().UnixNano()) % l.Period; into < time.Hour || into > l.Period-time.Hour {
		l.Period += time.Hour
	}
	return l
}

// countMerged counts the script calls that decide more than one call (two
// of whose keys have one rule, as testkit.KeyOf writes keys), those of them
// sent by EVAL, and those by the rule of their first key.
type countMerged struct {
	n, evals *atomic.Int64
	byRule   *sync.Map // rule -> *atomic.Int64
}

func (h countMerged) count(cmd redis.Cmder) {
	a := cmd.Args()
	if len(a) < 4 || a[0] != "evalsha" && a[0] != "eval" {
		return
	}
	nk, _ := a[2].(int)
	rules := make(map[string]bool, nk)
	merged, first := false, ""
	for i, k := range a[3 : 3+nk] {
		key, _ := k.(string)
		_, rest, _ := strings.Cut(key, ":")
		rule, _, _ := strings.Cut(rest, ":")
		merged = merged || rules[rule]
		rules[rule] = true
		if i == 0 {
			first = rule
		}
	}
	if !merged {
		return
	}
	h.n.Add(1)
	if a[0] == "eval" {
		h.evals.Add(1)
	}
	n, _ := h.byRule.LoadOrStore(first, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

func (countMerged) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countMerged) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h countMerged) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}

// TestBatchingKeepsDeadlinesOverDefaultClient stops redis-server (SIGSTOP)
// under a batching store over a client without ContextTimeoutEnabled,
// which ignores the context's deadline on the socket, here with no read
// timeout at all: a call whose I/O ran on the caller's goroutine through
// the client as it is would wait for as long as the server is stopped.
// Over a client whose timeouts set socket deadlines the store's calls go
// through a view of it that keeps them (redisopt.Divert); over one that
// sets none (ReadTimeout -2), pipelines go out from the store's senders.
// Either way every call returns while the server is stopped, with its own
// context's error; so do peeks and refunds, which have pipeline slots of
// their own; no goroutine is made per call (at most one per pipeline slot
// is stuck in I/O); once the server resumes, calls are decided; and Close
// leaves no goroutine behind.
func TestBatchingKeepsDeadlinesOverDefaultClient(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{
		{"no read timeout", -1},
		{"no socket deadlines", -2},
	} {
		t.Run(tc.name, func(t *testing.T) { batchingKeepsDeadlines(t, tc.timeout) })
	}
}

func batchingKeepsDeadlines(t *testing.T, readTimeout time.Duration) {
	srv := redistest.StartServer(t)
	c := srv.Client(t, func(o *redis.Options) { o.ReadTimeout = readTimeout })
	ignore := goleak.IgnoreCurrent()
	const parallel = 2
	s := testkit.MustRedis(c, redisstore.WithBatching(redisstore.Batching{Parallel: parallel}))
	limit := core.PerHour(1_000_000)
	ctx := context.Background()
	key := testkit.UniqueKey(t, "stall")
	if _, err := testkit.AllowOne(s, ctx, key, limit, 1); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	srv.Pause(t)
	var wg sync.WaitGroup
	errs := make(chan error, 72)
	for range 64 {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err := testkit.AllowOne(s, cctx, key, limit, 1)
			errs <- err
		})
	}
	checks := []core.Check{{Key: key, Limit: limit}}
	for i := range 8 {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			var err error
			if i%2 == 0 {
				_, err = s.PeekAll(cctx, checks)
			} else {
				_, err = s.RefundAllN(cctx, checks, 1)
			}
			errs <- err
		})
	}
	returned := make(chan struct{})
	go func() { wg.Wait(); close(returned) }()
	select {
	case <-returned:
	case <-time.After(time.Minute): // a guard against a hang, not a measurement
		srv.Resume(t)
		t.Fatal("calls into the stopped server did not return: they waited on its socket")
	}
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a call into a stopped server: %v; want context.DeadlineExceeded", err)
		}
	}
	// the callers are gone; what remains are the senders stuck in I/O,
	// the decisions' and the quota calls'. A caller that gave up on a
	// pipeline in flight leaves a goroutine that waits for its answer
	// (and leads the next batch if it is handed one); it ends once that
	// pipeline returns, which may come a little after the caller did.
	settle := time.Now().Add(10 * time.Second) // a guard against a leak, not a measurement
	n := runtime.NumGoroutine() - before
	for n > 2*parallel && time.Now().Before(settle) {
		time.Sleep(10 * time.Millisecond)
		n = runtime.NumGoroutine() - before
	}
	if n > 2*parallel {
		t.Errorf("%d goroutines more than before the stall; want at most %d (one sender per slot)", n, 2*parallel)
	}
	srv.Resume(t)
	for i := range 3 {
		r, err := testkit.AllowOne(s, ctx, key, limit, 1)
		if err != nil || !r.Allowed {
			t.Fatalf("call %d after the resume: %+v, %v; want allowed", i, r, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	goleak.VerifyNone(t, ignore)
}
