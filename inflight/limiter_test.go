package inflight_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/testkit"
)

// At most limit slots are taken; a released one is free again at once.
func TestAcquireCap(t *testing.T) {
	l, mr := newLimiter(t)
	const key = "ratekit:uploads:{ip:203.0.113.7}"
	var leases []*inflight.Lease
	for i := 1; i <= 3; i++ {
		le, res := acquire(t, l, key, 3)
		if !res.Allowed || res.InFlight != i || res.Limit != 3 || res.Degraded {
			t.Fatalf("acquisition %d: %+v, want allowed with %d in flight", i, res, i)
		}
		leases = append(leases, le)
	}
	_, res := acquire(t, l, key, 3)
	if got, want := res, (inflight.Result{Limit: 3, InFlight: 3, RetryAfter: time.Second}); got != want {
		t.Fatalf("fourth: %+v, want %+v", got, want)
	}
	if err := leases[1].Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, res := acquire(t, l, key, 3); !res.Allowed || res.InFlight != 3 {
		t.Fatalf("after a release: %+v, want allowed with 3 in flight", res)
	}
	if got, want := len(mustMembers(t, mr, key)), 3; got != want {
		t.Fatalf("%d holders in Redis, want %d", got, want)
	}
	// keys of other identities have caps of their own
	if _, res := acquire(t, l, "ratekit:uploads:{ip:203.0.113.8}", 3); !res.Allowed || res.InFlight != 1 {
		t.Fatalf("other key: %+v, want allowed with 1 in flight", res)
	}
}

func mustMembers(t *testing.T, mr *miniredis.Miniredis, key string) []string {
	t.Helper()
	m, err := mr.ZMembers(key)
	if errors.Is(err, miniredis.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A holder that stops renewing (its process died) loses its slot once its
// lease runs out, in Redis's clock, and not before.
func TestExpiredHoldersFreeSlots(t *testing.T) {
	l, mr := newLimiter(t, inflight.WithLease(10*time.Second))
	const key = "ratekit:jobs:{all}"
	acquire(t, l, key, 2)
	acquire(t, l, key, 2)
	if got, want := mr.TTL(key), 10*time.Second; got != want {
		t.Errorf("TTL %v, want %v: the key expires with its last lease", got, want)
	}
	mr.SetTime(t0.Add(10*time.Second - time.Millisecond))
	if _, res := acquire(t, l, key, 2); res.Allowed {
		t.Fatalf("a millisecond before the leases run out: %+v, want denied", res)
	}
	mr.SetTime(t0.Add(10 * time.Second))
	_, res := acquire(t, l, key, 2)
	if !res.Allowed || res.InFlight != 1 {
		t.Fatalf("once the leases ran out: %+v, want allowed with 1 in flight", res)
	}
}

// A key keeps the expiry of its longest lease, whatever the lease time of
// the Limiter that writes it last.
func TestKeyExpiryKeepsLongestLease(t *testing.T) {
	long, mr := newLimiter(t, inflight.WithLease(time.Minute))
	short, err := inflight.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), inflight.WithLease(time.Second), inflight.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	const key = "ratekit:jobs:{all}"
	acquire(t, long, key, 5)
	acquire(t, short, key, 5)
	if got, want := mr.TTL(key), time.Minute; got != want {
		t.Errorf("TTL %v, want %v", got, want)
	}
}

// Keys are core's: the same prefix, name, hash tag and hashing of unsafe
// identities.
func TestKeyMatchesCore(t *testing.T) {
	for _, prefix := range []string{core.DefaultPrefix, "", "app:"} {
		l, _ := newLimiter(t, inflight.WithPrefix(prefix))
		for _, id := range []string{"ip:203.0.113.7", "user:{42}", "#abc", "a\x00b", strings.Repeat("x", 129), strings.Repeat("y", 128)} {
			got, gerr := l.Key("uploads", id)
			want, werr := testkit.KeyOf(prefix, "uploads", id) // as core's Limiter builds keys
			if got != want || (gerr == nil) != (werr == nil) {
				t.Errorf("prefix %q, identity %q: Key = %q, %v; core: %q, %v", prefix, id, got, gerr, want, werr)
			}
		}
	}
	l, _ := newLimiter(t)
	for _, tt := range []struct{ rule, id string }{{"", "ip:1"}, {"a{b", "ip:1"}, {"uploads", ""}} {
		if _, err := l.Key(tt.rule, tt.id); err == nil {
			t.Errorf("Key(%q, %q): no error", tt.rule, tt.id)
		}
	}
}

func TestNewErrors(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	tests := []struct {
		name string
		opt  inflight.Option
	}{
		{"nil option", nil},
		{"lease too short", inflight.WithLease(99 * time.Millisecond)},
		{"zero timeout", inflight.WithTimeout(0)},
		{"prefix with brace", inflight.WithPrefix("a{")},
		{"unknown policy", inflight.WithFailurePolicy(9)},
		{"zero replicas", inflight.WithReplicas(0)},
		{"nil OnError", inflight.OnError(nil)},
	}
	for _, tt := range tests {
		if l, err := inflight.New(rdb, tt.opt); err == nil {
			l.Close()
			t.Errorf("%s: no error", tt.name)
		}
	}
	if _, err := inflight.New(nil); err == nil {
		t.Error("nil client: no error")
	}
}

func TestAcquireErrors(t *testing.T) {
	l, mr := newLimiter(t)
	tests := []struct {
		name  string
		key   string
		limit int
		want  error
	}{
		{"empty key", "", 1, core.ErrInvalidIdentity},
		{"zero limit", "k", 0, core.ErrInvalidLimit},
		{"key of another type", "string", 1, core.ErrKeyRejected},
	}
	mr.Set("string", "a rate limit's key")
	for _, tt := range tests {
		le, _, err := l.Acquire(context.Background(), tt.key, tt.limit)
		if !errors.Is(err, tt.want) || le != nil {
			t.Errorf("%s: lease %v, error %v, want %v", tt.name, le, err, tt.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := l.Acquire(ctx, "k", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v, want context.Canceled", err)
	}
}

// Release is idempotent, nil-safe, and frees the slot for every replica.
func TestRelease(t *testing.T) {
	l, mr := newLimiter(t)
	le, _ := acquire(t, l, "k", 1)
	for range 2 {
		if err := le.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := mustMembers(t, mr, "k"); len(got) != 0 {
		t.Fatalf("holders after release: %q", got)
	}
	var none *inflight.Lease
	if err := none.Release(context.Background()); err != nil || none.Degraded() || none.Lost() {
		t.Fatalf("nil lease: %v", err)
	}
	// a canceled request context still releases
	le, _ = acquire(t, l, "k", 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := le.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, res := acquire(t, l, "k", 1); !res.Allowed {
		t.Fatalf("after a release with a canceled context: %+v", res)
	}
}

// While Redis is down, the failure policy decides.
func TestFailurePolicies(t *testing.T) {
	tests := []struct {
		name     string
		opts     []inflight.Option
		allowed  int // of 4 attempts at a cap of 4
		wantErr  error
		wantLim  int
		released bool // a release frees a local slot
	}{
		{"local", nil, 4, nil, 4, true},
		{"local, 3 replicas", []inflight.Option{inflight.WithReplicas(3)}, 2, nil, 2, true},
		{"open", []inflight.Option{inflight.WithFailurePolicy(core.FailOpen)}, 4, nil, 4, false},
		{"closed", []inflight.Option{inflight.WithFailurePolicy(core.FailClosed)}, 0, core.ErrUnavailable, 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs int
			// a short deadline: go-redis dials a closed port five times
			opts := append(tt.opts, inflight.WithTimeout(20*time.Millisecond), inflight.OnError(func(error) { errs++ }))
			l, mr := newLimiter(t, opts...)
			mr.Close()
			var leases []*inflight.Lease
			allowed := 0
			for range 4 {
				le, res, err := l.Acquire(context.Background(), "k", 4)
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
				if !res.Degraded || res.Limit != tt.wantLim || le.Degraded() != res.Allowed {
					t.Fatalf("result %+v, lease degraded %v", res, le.Degraded())
				}
				if res.Allowed {
					allowed++
					leases = append(leases, le)
				} else if res.RetryAfter != time.Second {
					t.Fatalf("denied with RetryAfter %v, want 1s", res.RetryAfter)
				}
			}
			if allowed != tt.allowed || errs != 4 {
				t.Fatalf("%d allowed, %d errors reported; want %d and 4", allowed, errs, tt.allowed)
			}
			if len(leases) > 0 && tt.released {
				leases[0].Release(context.Background())
				if _, res, _ := l.Acquire(context.Background(), "k", 4); !res.Allowed {
					t.Fatalf("after releasing a local slot: %+v", res)
				}
			}
		})
	}
}

// The deadline holds against a Redis that accepts connections and never
// answers, through a client that ignores contexts; Close then waits for the
// abandoned calls, and no goroutine outlives it.
func TestDeadlineAgainstSilentRedis(t *testing.T) {
	noLeaks(t)
	silent := silentServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: silent, ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	l, err := inflight.New(rdb, inflight.WithTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	le, res, err := l.Acquire(context.Background(), "k", 1)
	if elapsed := time.Since(start); elapsed > 250*time.Millisecond {
		t.Errorf("Acquire took %v against a deadline of 20ms", elapsed)
	}
	if err != nil || !res.Degraded || !res.Allowed || !le.Degraded() {
		t.Fatalf("Acquire: %+v, %v; want a local slot", res, err)
	}
	le.Release(context.Background())
	l.Close()
}

// Against a Redis that never answers, through a client that keeps
// deadlines on its connection, a caller whose deadline comes before the
// Limiter's gets its context's error, and no local slot: go-redis's read
// may time out at that deadline before the context's timer ends it, and
// the Limiter still tells the caller who gave up from a failing Redis. A
// call that misses the Limiter's own deadline gets a local slot.
func TestCallerDeadlineAgainstSilentRedis(t *testing.T) {
	silent := silentServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: silent, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	patient, err := inflight.New(rdb, inflight.WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer patient.Close()
	for i := range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		le, res, err := patient.Acquire(ctx, "k", 1)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || le != nil {
			t.Fatalf("call %d, the caller's 20 ms deadline first: %+v, %v; want its context's error", i, res, err)
		}
	}
	var (
		mu   sync.Mutex
		told []error
	)
	impatient, err := inflight.New(rdb, inflight.WithTimeout(20*time.Millisecond), inflight.OnError(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	le, res, err := impatient.Acquire(context.Background(), "k", 1)
	if err != nil || !res.Degraded || !res.Allowed || !le.Degraded() {
		t.Fatalf("past the Limiter's deadline: %+v, %v; want a local slot", res, err)
	}
	le.Release(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if len(told) == 0 || !errors.Is(told[0], context.DeadlineExceeded) {
		t.Fatalf("OnError was told %v; want the Limiter's deadline first", told)
	}
}

// silentServer accepts connections and never answers; it stops with the
// test.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// Close stops the renewal goroutine and is idempotent.
func TestCloseStopsRenewal(t *testing.T) {
	noLeaks(t)
	mr := startMiniredis(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr})
	defer rdb.Close()
	l, err := inflight.New(rdb, inflight.WithLease(inflight.MinLease))
	if err != nil {
		t.Fatal(err)
	}
	le, _ := acquire(t, l, "k", 1)
	time.Sleep(3 * inflight.MinLease / 2) // a few renewal rounds
	for range 2 {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := le.Release(context.Background()); err != nil {
		t.Fatalf("Release after Close: %v", err)
	}
	rdb.Close()
}
