package core_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/memorystore"
)

// shardedStore is a store of shards named by the first byte of a key's
// hash tag ("a" for the keys of identity "a1"), as a Redis Cluster client
// names the master serving a key's slot; a shard fails while it is down.
type shardedStore struct {
	mem *memorystore.Store

	mu    sync.Mutex
	down  map[string]bool
	calls []string // the first key of every call, in order
}

var errShardDown = errors.New("shard down")

func newShardedStore(t *testing.T) *shardedStore {
	s := &shardedStore{mem: testkit.MustMemory(), down: map[string]bool{}}
	t.Cleanup(func() { s.mem.Close() })
	return s
}

func shardOfKey(key string) string {
	_, tag, _ := strings.Cut(key, "{")
	return tag[:1]
}

func (s *shardedStore) Traits() core.Traits { return core.Traits{Shard: shardOfKey} }

func (s *shardedStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	s.mu.Lock()
	s.calls = append(s.calls, checks[0].Key)
	down := s.down[shardOfKey(checks[0].Key)]
	s.mu.Unlock()
	if down {
		return nil, errShardDown
	}
	return s.mem.AllowAllN(ctx, checks, n)
}

func (s *shardedStore) setDown(shard string, down bool) {
	s.mu.Lock()
	s.down[shard] = down
	s.mu.Unlock()
}

// callsSince returns the keys of the calls made since the first n.
func (s *shardedStore) callsSince(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls[n:])
}

func (s *shardedStore) ncalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// shardedLimiter returns a Limiter over s whose breakers open after 3
// failures and probe within a second, and the changes its hook hears.
func shardedLimiter(t *testing.T, s core.Store, opts ...core.Option) (*core.Limiter, func() []string) {
	var (
		mu      sync.Mutex
		changes []string
	)
	opts = append([]core.Option{
		core.WithBreaker(core.BreakerConfig{Failures: 3, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second}),
		core.OnBreakerChange(func(from, to core.BreakerState) {
			mu.Lock()
			changes = append(changes, from.String()+"→"+to.String())
			mu.Unlock()
		}),
	}, opts...)
	l, err := core.NewLimiter(s, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(changes)
	}
}

// decideID decides one request of identity id under a rule that never
// limits, and reports whether the decision was degraded.
func decideID(t *testing.T, l *core.Limiter, id string) bool {
	t.Helper()
	rules := []core.Rule{{Name: "r", Limit: core.PerHour(1000), Key: func(core.Request) (string, error) { return id, nil }}}
	d, err := l.Check(context.Background(), failoverRequest{}, rules)
	if err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return d.Degraded()
}

// TestShardBreakers fails one shard of two: only its keys go to the
// failure policy, the other shard's keys are still decided by the store,
// and the failing shard is probed with a key of the identity that failed,
// until it is back.
func TestShardBreakers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newShardedStore(t)
		l, changes := shardedLimiter(t, s)
		defer l.Close()
		s.setDown("a", true)
		for range 3 {
			if !decideID(t, l, "a1") {
				t.Fatal("a decision on a failing shard was not degraded")
			}
		}
		if got := l.BreakerState(); got != core.BreakerOpen {
			t.Fatalf("breaker %v after 3 failures of shard a, want open", got)
		}
		n := s.ncalls()
		if decideID(t, l, "a2") {
			if got := s.callsSince(n); len(got) != 0 {
				t.Errorf("store calls %v for a key of the open shard, want none", got)
			}
		} else {
			t.Error("a key of the open shard was decided by the store")
		}
		for i := range 10 { // more than the threshold: shard b's breaker stays closed
			if decideID(t, l, fmt.Sprintf("b%d", i)) {
				t.Fatalf("a key of shard b was degraded while only shard a failed")
			}
		}
		n = s.ncalls()
		time.Sleep(2 * time.Second) // a few probes, all failing
		synctest.Wait()
		probes := s.callsSince(n)
		if len(probes) < 2 {
			t.Fatalf("%d probes in 2s, want at least 2", len(probes))
		}
		for _, k := range probes {
			if k != "ratekit:{a1}" {
				t.Errorf("probe of key %q, want ratekit:{a1}: the hash tag of the key that failed", k)
			}
		}
		s.setDown("a", false)
		time.Sleep(time.Second + time.Nanosecond) // the next probe comes within MaxBackoff
		synctest.Wait()
		if got := l.BreakerState(); got != core.BreakerClosed {
			t.Fatalf("breaker %v once shard a is back, want closed", got)
		}
		if decideID(t, l, "a1") {
			t.Error("a key of shard a degraded after its breaker closed")
		}
		want := []string{"closed→open"}
		for range len(probes) {
			want = append(want, "open→half-open", "half-open→open")
		}
		want = append(want, "open→half-open", "half-open→closed")
		if got := changes(); !slices.Equal(got, want) {
			t.Errorf("breaker changes %v, want %v", got, want)
		}
	})
}

// TestShardBreakersWholeStore fails every shard: every shard's breaker
// opens, and the Limiter's breaker, which the hooks report, opens once and
// closes once every shard is back.
func TestShardBreakersWholeStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newShardedStore(t)
		l, changes := shardedLimiter(t, s, core.WithFailurePolicy(core.FailClosed), core.WithBreaker(core.BreakerConfig{Failures: 3, Backoff: time.Minute, MaxBackoff: time.Minute}))
		defer l.Close()
		s.setDown("a", true)
		s.setDown("b", true)
		rules := func(id string) []core.Rule {
			return []core.Rule{{Name: "r", Limit: core.PerHour(1000), Key: func(core.Request) (string, error) { return id, nil }}}
		}
		for _, id := range []string{"a1", "a1", "b1", "b1", "a1", "b1"} {
			if _, err := l.Check(context.Background(), failoverRequest{}, rules(id)); !errors.Is(err, errShardDown) {
				t.Fatalf("%s: err %v, want the store's error", id, err)
			}
		}
		n := s.ncalls()
		for _, id := range []string{"a2", "b2"} {
			d, err := l.Check(context.Background(), failoverRequest{}, rules(id))
			if !errors.Is(err, core.ErrBreakerOpen) || !errors.Is(err, errShardDown) || d.Allowed {
				t.Errorf("%s: allowed %v, err %v; want a denial wrapping ErrBreakerOpen and the store's error", id, d.Allowed, err)
			}
		}
		if got := s.callsSince(n); len(got) != 0 {
			t.Errorf("store calls %v with every shard's breaker open, want none", got)
		}
		if got, want := changes(), []string{"closed→open"}; !slices.Equal(got, want) {
			t.Errorf("breaker changes %v, want %v", got, want)
		}
		s.setDown("a", false)
		time.Sleep(time.Minute + time.Minute/2 + time.Nanosecond) // every first probe has come
		synctest.Wait()
		if got := l.BreakerState(); got != core.BreakerOpen {
			t.Fatalf("breaker %v with shard b down, want open", got)
		}
		s.setDown("b", false)
		time.Sleep(time.Minute + time.Nanosecond)
		synctest.Wait()
		if got := l.BreakerState(); got != core.BreakerClosed {
			t.Fatalf("breaker %v with every shard back, want closed", got)
		}
		if got := changes(); got[len(got)-1] != "half-open→closed" || slices.Index(got, "half-open→closed") != len(got)-1 {
			t.Errorf("breaker changes %v, want one closing, at the end", got)
		}
	})
}

// TestShardBreakersConsecutive counts each shard's failures apart: calls
// that answer on another shard do not reset them, one that answers on the
// same shard does.
func TestShardBreakersConsecutive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newShardedStore(t)
		l, _ := shardedLimiter(t, s)
		defer l.Close()
		fail := func(id string, times int) {
			s.setDown(id[:1], true)
			for range times {
				decideID(t, l, id)
			}
			s.setDown(id[:1], false)
		}
		fail("a1", 2)
		decideID(t, l, "a1") // answers: a's count starts again
		fail("a1", 2)
		if got := l.BreakerState(); got != core.BreakerClosed {
			t.Fatalf("breaker %v after 2 + 2 failures with an answer between, want closed", got)
		}
		decideID(t, l, "b1") // answers on another shard: a's count goes on
		fail("a1", 1)
		if got := l.BreakerState(); got != core.BreakerOpen {
			t.Fatalf("breaker %v after 3 consecutive failures of shard a, want open", got)
		}
	})
}
