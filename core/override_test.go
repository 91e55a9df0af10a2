package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// overRule returns a rule named name that limits id by limit and takes
// overrides.
func overRule(name string, limit core.Limit, id string) core.Rule {
	r := rule(name, limit, id)
	r.Overrides = true
	return r
}

// spend checks r k times and returns the last decision's result.
func spend(t *testing.T, l *core.Limiter, r core.Rule, k int) core.RuleResult {
	t.Helper()
	var d core.Decision
	for range k {
		var err error
		if d, err = check(t, l, r); err != nil {
			t.Fatal(err)
		}
	}
	return d.Results[0]
}

func TestOverrideRaisesAndLowersOneIdentity(t *testing.T) {
	l, _ := miniLimiter(t)
	ctx := context.Background()
	limit := core.PerMinute(3)
	alice, bob, carol := overRule("api", limit, "user:alice"), overRule("api", limit, "user:bob"), overRule("api", limit, "user:carol")
	if err := l.SetOverride(ctx, alice, "user:alice", core.PerMinute(5), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.SetOverride(ctx, bob, "user:bob", core.PerMinute(1), 0); err != nil {
		t.Fatal(err)
	}
	if p, err := l.Peek(ctx, alice, "user:alice"); err != nil || p.Limit != core.PerMinute(5) || p.Remaining != 5 {
		t.Fatalf("peek at alice: %+v %v, want 5 of 5 per minute", p, err)
	}
	for _, c := range []struct {
		r       core.Rule
		k       int
		limit   core.Limit
		allowed bool
	}{
		{alice, 5, core.PerMinute(5), true}, {alice, 1, core.PerMinute(5), false},
		{bob, 1, core.PerMinute(1), true}, {bob, 1, core.PerMinute(1), false},
		{carol, 3, limit, true}, {carol, 1, limit, false},
	} {
		got := spend(t, l, c.r, c.k)
		if got.Allowed != c.allowed || got.Limit != c.limit {
			t.Fatalf("%d more of %s: %+v, want allowed %v under %v", c.k, c.r.Name, got, c.allowed, c.limit)
		}
	}
	if err := l.ClearOverride(ctx, "api", "user:bob"); err != nil {
		t.Fatal(err)
	}
	// bob spent 1 of 3 under the rule's limit: 2 more pass
	if got := spend(t, l, bob, 2); !got.Allowed || got.Limit != limit || got.Remaining != 0 {
		t.Fatalf("bob after ClearOverride: %+v, want the last of 3 per minute", got)
	}
}

// An override beats the limit of the caller's plan.
func TestOverrideBeatsPlan(t *testing.T) {
	l, _ := miniLimiter(t)
	r := overRule("api", core.PerMinute(2), "user:alice")
	r.LimitOf = func(core.Request) (core.Limit, bool) { return core.PerMinute(10), true }
	if got := spend(t, l, r, 1); got.Limit != core.PerMinute(10) {
		t.Fatalf("before the override: %+v, want the plan's limit", got)
	}
	if err := l.SetOverride(context.Background(), r, "user:alice", core.PerMinute(100), 0); err != nil {
		t.Fatal(err)
	}
	if got := spend(t, l, r, 1); got.Limit != core.PerMinute(100) || got.Remaining != 98 {
		t.Fatalf("after the override: %+v, want 98 of 100 per minute", got)
	}
}

// An override takes the rule's algorithm, and expires with its TTL.
func TestOverrideExpires(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	c, advance := testkit.FakeRedis(t, clock)
	l := newLimiter(t, testkit.MustRedis(c), core.WithClock(clock.Now), core.WithTimeout(5*time.Second))
	fixed := core.Limit{Rate: 2, Period: time.Hour, Algorithm: core.FixedWindow}
	r := overRule("api", fixed, "user:alice")
	if err := l.SetOverride(context.Background(), r, "user:alice", core.PerHour(4), time.Minute); err != nil {
		t.Fatal(err)
	}
	want := core.Limit{Rate: 4, Period: time.Hour, Burst: 4, Algorithm: core.FixedWindow}
	if got := spend(t, l, r, 3); !got.Allowed || got.Limit != want {
		t.Fatalf("3 under the override: %+v, want allowed under %v", got, want)
	}
	advance(time.Minute)
	if got := spend(t, l, r, 1); got.Allowed || got.Limit != fixed {
		t.Fatalf("after the TTL: %+v, want denied under the rule's %v", got, fixed)
	}
}

func TestSetOverrideRefusesBadInput(t *testing.T) {
	l, _ := miniLimiter(t)
	ctx := context.Background()
	r := overRule("api", core.PerMinute(3), "user:alice")
	plain := rule("api", core.PerMinute(3), "user:alice")
	log := overRule("api", core.PerMinute(3).WithAlgorithm(core.SlidingWindowLog), "user:alice")
	for _, c := range []struct {
		what  string
		r     core.Rule
		id    string
		limit core.Limit
		ttl   time.Duration
		want  error
	}{
		{"a rule without Overrides", plain, "user:alice", core.PerMinute(5), 0, core.ErrInvalidLimit},
		{"a zero rate", r, "user:alice", core.Limit{Period: time.Minute, Burst: 1}, 0, core.ErrInvalidLimit},
		{"a log faster than MaxLogRate", log, "user:alice", core.PerMinute(core.MaxLogRate + 1), 0, core.ErrInvalidLimit},
		{"a negative ttl", r, "user:alice", core.PerMinute(5), -time.Second, core.ErrInvalidLimit},
		{"an empty identity", r, "", core.PerMinute(5), 0, core.ErrInvalidIdentity},
	} {
		if err := l.SetOverride(ctx, c.r, c.id, c.limit, c.ttl); !errors.Is(err, c.want) {
			t.Errorf("SetOverride with %s: %v, want %v", c.what, err, c.want)
		}
	}
	if err := l.ClearOverride(ctx, "a{b", "user:alice"); !errors.Is(err, core.ErrInvalidName) {
		t.Errorf("ClearOverride of a bad rule name: %v", err)
	}
	down := newLimiter(t, downStore{})
	if err := down.SetOverride(ctx, r, "user:alice", core.PerMinute(5), 0); !errors.Is(err, core.ErrNotSupported) {
		t.Errorf("SetOverride over a store without overrides: %v", err)
	}
	if err := down.ClearOverride(ctx, "api", "user:alice"); !errors.Is(err, core.ErrNotSupported) {
		t.Errorf("ClearOverride over a store without overrides: %v", err)
	}
}

// An override key holding anything but an override counts as none.
func TestOverrideGarbageIsNone(t *testing.T) {
	l, mr := miniLimiter(t)
	limit := core.PerMinute(3)
	for i, v := range []string{"", "abc", "5", "5 60000", "0 60000 5", "5 0 5", "5 60000 0", "5 60000 5 6",
		"-5 60000 5", "5.5 60000 5", "99999999999999999999 60000 5", "2000 1 2000", "1 60000 1073741825",
		"1 31622400001 1"} {
		id := "user:" + string(rune('a'+i))
		mr.Set("ratekit:api:{"+id+"}:override", v)
		if got := spend(t, l, overRule("api", limit, id), 1); got.Limit != limit || got.Remaining != 2 {
			t.Errorf("override %q: %+v, want the rule's limit", v, got)
		}
	}
	mr.HSet("ratekit:api:{user:hash}:override", "rate", "5")
	if got := spend(t, l, overRule("api", limit, "user:hash"), 1); got.Limit != limit {
		t.Errorf("a hash at the override key: %+v, want the rule's limit", got)
	}
}

// A denial the denied-key cache remembers under an override is answered
// under the override's limit, without asking Redis.
func TestOverrideDenialCached(t *testing.T) {
	l, mr := miniLimiter(t)
	r := overRule("api", core.PerMinute(3), "user:alice")
	if err := l.SetOverride(context.Background(), r, "user:alice", core.PerMinute(1), 0); err != nil {
		t.Fatal(err)
	}
	spend(t, l, r, 2) // allowed, then denied by Redis
	// The override's own message on the reset channel, or the Limiter's
	// first subscription, may reach it after that denial was cached, and
	// rightly forgets it: the next denial from Redis is cached again. A
	// denial spends nothing, so asking again changes nothing in Redis.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		before := mr.CommandCount()
		got := spend(t, l, r, 1)
		n := mr.CommandCount() - before
		if got.Allowed || got.Limit != core.PerMinute(1) {
			t.Fatalf("a denial under the override: %+v, want denied under 1 per minute", got)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a denial under the override still costs %d commands 10 s on, want 0: from the cache", n)
		}
	}
}

// storeOn returns a Limiter over a new client of srv, with the deadlines
// of a real deployment.
func storeOn(t *testing.T, srv *redistest.Server) *core.Limiter {
	client := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	store := testkit.MustRedis(client)
	t.Cleanup(func() { store.Close() })
	return newLimiter(t, store, core.WithTimeout(time.Second))
}

// An override set through one Limiter applies at the other's next
// decision, and a denial the other remembers under the old limit goes
// once it hears of the override; clearing it applies at once too.
func TestOverrideReachesEveryReplica(t *testing.T) {
	redistest.Require(t)
	srv := redistest.StartServer(t)
	a, b := storeOn(t, srv), storeOn(t, srv)
	// each store subscribes in the background; an override published
	// before b's subscription is in place would not reach b's memory
	redistest.AwaitSubscribers(t, redisstore.ResetChannel, 2, resetWait, srv.Client(t))
	ctx := context.Background()
	r := overRule("login", core.PerMinute(1), "ip:192.0.2.1")
	if got := spend(t, b, r, 3); got.Allowed { // the third from b's denied-key cache
		t.Fatal("a second request allowed")
	}
	if err := a.SetOverride(ctx, r, "ip:192.0.2.1", core.PerMinute(5), 0); err != nil {
		t.Fatal(err)
	}
	if p, err := b.Peek(ctx, r, "ip:192.0.2.1"); err != nil || p.Limit != core.PerMinute(5) || p.Remaining != 4 {
		t.Fatalf("b's peek after the override: %+v %v, want 4 of 5", p, err)
	}
	deadline := time.Now().Add(resetWait)
	for {
		got := spend(t, b, r, 1)
		if got.Allowed {
			if got.Limit != core.PerMinute(5) {
				t.Fatalf("allowed under %v, want the override", got.Limit)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica still denies %v after the override", resetWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := a.ClearOverride(ctx, "login", "ip:192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if got := spend(t, b, r, 1); got.Allowed || got.Limit != core.PerMinute(1) {
		t.Fatalf("b right after ClearOverride: %+v, want denied under the rule's limit", got)
	}
}

// A rule that takes overrides costs Redis one script call per decision,
// as a plain rule does, alone or grouped with a plain rule.
func TestOverrideCostsNoRoundTrip(t *testing.T) {
	redistest.Require(t)
	srv := redistest.StartServer(t)
	l := storeOn(t, srv)
	ctx := context.Background()
	over, plain := overRule("api", core.PerHour(1000), "user:alice"), rule("burst", core.PerHour(1000), "user:alice")
	if err := l.SetOverride(ctx, over, "user:alice", core.PerHour(2000), time.Hour); err != nil {
		t.Fatal(err)
	}
	if ttl := srv.Client(t).PTTL(ctx, "ratekit:api:{user:alice}:override").Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Fatalf("the override's key expires in %v, want an hour", ttl)
	}
	scripts := func() int64 {
		s := srv.CommandStats(t, ctx)
		return s["evalsha"] + s["eval"]
	}
	for _, rules := range [][]core.Rule{{over}, {plain}, {over, plain}} {
		if _, err := check(t, l, rules...); err != nil { // loads the script: EVALSHA, then EVAL
			t.Fatal(err)
		}
		before := scripts()
		for range 50 {
			if d, err := check(t, l, rules...); err != nil || !d.Allowed {
				t.Fatalf("%+v %v", d, err)
			}
		}
		if n := scripts() - before; n != 50 {
			t.Errorf("%d rules: %d script calls for 50 decisions", len(rules), n)
		}
	}
}

// Over a Cluster, an override key lies in its storage key's slot.
func TestOverrideCluster(t *testing.T) {
	redistest.Require(t)
	c := redistest.StartCluster(t, 3).Client(t)
	store := testkit.MustRedis(c)
	t.Cleanup(func() { store.Close() })
	// a deadline that a busy machine's first calls to a new Cluster (slot
	// map, dials, script loads) meet: the test is about slots, not time
	l := newLimiter(t, store, core.WithTimeout(5*time.Second))
	ctx := context.Background()
	for _, id := range []string{"user:alice", "user:bob", "user:carol", "user:dave"} {
		r := overRule("api", core.PerMinute(2), id)
		if err := l.SetOverride(ctx, r, id, core.PerMinute(4), 0); err != nil {
			t.Fatal(err)
		}
		if got := spend(t, l, r, 4); !got.Allowed || got.Limit != core.PerMinute(4) {
			t.Fatalf("%s: %+v, want the 4th of 4 allowed", id, got)
		}
	}
}

// A cost above the rule's capacity is left to the store when an override
// may raise it, and passes under an override that holds it.
func TestOverrideHoldsCostAboveRuleCapacity(t *testing.T) {
	l, _ := miniLimiter(t)
	r := overRule("upload", core.PerMinute(2), "user:alice")
	r.Cost = func(core.Request) int { return 5 }
	if got := spend(t, l, r, 1); got.Allowed || !got.Never() {
		t.Fatalf("5 units under 2 per minute: %+v, want never allowed", got)
	}
	if err := l.SetOverride(context.Background(), r, "user:alice", core.PerMinute(10), 0); err != nil {
		t.Fatal(err)
	}
	if got := spend(t, l, r, 1); !got.Allowed || got.Remaining != 5 {
		t.Fatalf("5 units under an override of 10: %+v, want allowed, 5 left", got)
	}
}
