package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
)

// TestAlgorithmChangeOnLiveKeys switches a rule's algorithm while its keys
// live, for every ordered pair of algorithms, on a real redis-server and on
// a memorystore.Store: the key written under the old algorithm is taken for
// absent, so the first decision under the new one is an allowed one from
// the store, with no error, no degraded decision and no breaker opening.
func TestAlgorithmChangeOnLiveKeys(t *testing.T) {
	srv := redistest.StartServer(t)
	client := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	stores := map[string]core.Store{
		"redis-server":         testkit.MustRedis(client),
		"redis-server-batched": testkit.Batched(t, client),
		"memory":               testkit.MustMemory(),
	}
	for name, store := range stores {
		t.Run(name, func(t *testing.T) {
			var failures atomic.Int64
			l := newLimiter(t, store, core.WithTimeout(10*time.Second), core.WithBreaker(core.BreakerConfig{Failures: 1}),
				core.OnError(func(error) { failures.Add(1) }))
			for _, from := range testkit.Algorithms {
				for _, to := range testkit.Algorithms {
					if from == to {
						continue
					}
					id := fmt.Sprintf("user:%s-%v-%v", name, from, to)
					old := rule("switch", core.PerMinute(3).WithAlgorithm(from), id)
					for range 3 {
						if d, err := check(t, l, old); err != nil || !d.Allowed || d.Degraded() {
							t.Fatalf("%v: %+v, %v", from, d, err)
						}
					}
					if d, err := check(t, l, old); err != nil || d.Allowed {
						t.Fatalf("%v: the 4th of 3 allowed: %+v, %v", from, d, err)
					}
					// the same rule, now under another algorithm
					d, err := check(t, l, rule("switch", core.PerMinute(3).WithAlgorithm(to), id))
					if err != nil || !d.Allowed || d.Degraded() || d.Results[0].Remaining != 2 {
						t.Errorf("%v → %v: %+v, %v; want a fresh key decided by the store", from, to, d, err)
					}
				}
			}
			if got := failures.Load(); got != 0 || l.BreakerState() != core.BreakerClosed {
				t.Errorf("%d failed store calls, breaker %v; want none, closed", got, l.BreakerState())
			}
		})
	}
}

// TestKeyErrorIsNotAnOutage: an error reply about one call's keys (here a
// Redis function of the user's own that fails on one key) is returned to
// the caller wrapping ErrKeyRejected, and never opens the breaker: the
// other keys go on being decided by Redis.
func TestKeyErrorIsNotAnOutage(t *testing.T) {
	srv := redistest.StartServer(t)
	client := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	store := &rejectingStore{inner: testkit.MustRedis(client), client: client, bad: "user:bad"}
	l := newLimiter(t, store, core.WithTimeout(10*time.Second), core.WithBreaker(core.BreakerConfig{Failures: 1}))
	for range 5 {
		_, err := check(t, l, rule("r", core.PerMinute(100), "user:bad"))
		if !errors.Is(err, core.ErrKeyRejected) || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Fatalf("error %v, want one wrapping ErrKeyRejected and the reply", err)
		}
	}
	if l.BreakerState() != core.BreakerClosed {
		t.Fatal("key errors opened the breaker")
	}
	if d, err := check(t, l, rule("r", core.PerMinute(100), "user:good")); err != nil || !d.Allowed || d.Degraded() {
		t.Fatalf("another key: %+v, %v; want decided by Redis", d, err)
	}
}

// rejectingStore runs a command that Redis refuses with WRONGTYPE for the
// key of one identity, and passes every other call on.
type rejectingStore struct {
	inner  core.Store
	client *redis.Client
	bad    string
}

func (s *rejectingStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	if strings.Contains(checks[0].Key, s.bad) {
		s.client.Set(ctx, checks[0].Key, "x", time.Minute)
		if err := s.client.HGet(ctx, checks[0].Key, "f").Err(); err != nil {
			return nil, err
		}
	}
	return s.inner.AllowAllN(ctx, checks, n)
}

func (s *rejectingStore) Traits() core.Traits { return testkit.Traits(s.inner) }

// TestReplicasShareNeverNever: under FailLocal with WithReplicas, a cost
// that fits the global limit but not one replica's share is denied with a
// wait, never as a cost no wait can help.
func TestReplicasShareNeverNever(t *testing.T) {
	store := newFakeStore(t, modeFail)
	l := newLimiter(t, store, core.WithReplicas(4), core.WithBreaker(core.BreakerConfig{Failures: 1, Backoff: time.Hour}))
	r := rule("r", core.PerMinute(10), "user:1")
	r.Cost = func(core.Request) int { return 5 } // the share is 3
	d, err := check(t, l, r)
	if err != nil || d.Allowed || !d.Degraded() {
		t.Fatalf("%+v, %v: want a local denial", d, err)
	}
	if res := d.Results[0]; res.Never() || res.RetryAfter < time.Second {
		t.Fatalf("%+v: want a wait of at least a second, not never", res)
	}
	r.Cost = func(core.Request) int { return 11 } // above the global limit
	if d, _ := check(t, l, r); !d.Results[0].Never() {
		t.Fatalf("%+v: a cost above the global limit is never allowed", d.Results[0])
	}
}
