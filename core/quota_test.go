package core_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// miniLimiter returns a Limiter over a redisstore.Store over a fresh
// miniredis whose clock is at testkit.Start, with a deadline a loaded
// machine meets (the tests that use it are about quotas, not deadlines)
// unless opts set another.
func miniLimiter(t *testing.T, opts ...core.Option) (*core.Limiter, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t)
	mr.SetTime(testkit.Start)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { client.Close() })
	store := testkit.MustRedis(client)
	t.Cleanup(func() { store.Close() })
	return newLimiter(t, store, append([]core.Option{core.WithTimeout(5 * time.Second)}, opts...)...), mr
}

func TestPeekSpendsNothing(t *testing.T) {
	l, _ := miniLimiter(t)
	r := rule("api", core.PerMinute(5), "ip:192.0.2.1")
	for range 2 {
		if _, err := check(t, l, r); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		res, err := l.Peek(context.Background(), r, "ip:192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		if !res.Allowed || res.Remaining != 3 || res.RetryAfter != 0 || res.ResetAfter <= 0 {
			t.Fatalf("peek after 2 of 5: %+v, want allowed, 3 remaining, a reset ahead", res)
		}
	}
	d, err := check(t, l, r)
	if err != nil || d.Results[0].Remaining != 2 {
		t.Fatalf("a request after three peeks: %+v %v, want 2 remaining", d, err)
	}
	res, err := l.Peek(context.Background(), r, "ip:192.0.2.9")
	if err != nil || res.Remaining != 5 || !res.Allowed {
		t.Errorf("peek of an identity that spent nothing: %+v %v, want 5 remaining", res, err)
	}
}

func TestRefundGivesBackWhatWasSpent(t *testing.T) {
	l, _ := miniLimiter(t)
	login := rule("login", core.PerMinute(3), "ip:192.0.2.1")
	global := rule("global", core.PerMinute(100), "ip:192.0.2.1")
	for range 5 {
		d, err := check(t, l, global, login)
		if err != nil || !d.Allowed {
			t.Fatalf("check: %+v %v", d, err)
		}
		if err := l.Refund(context.Background(), d, "login"); err != nil {
			t.Fatal(err)
		}
	}
	res, err := l.Peek(context.Background(), login, "ip:192.0.2.1")
	if err != nil || res.Remaining != 3 {
		t.Errorf("login after five refunded requests: %+v %v, want 3 remaining", res, err)
	}
	res, err = l.Peek(context.Background(), global, "ip:192.0.2.1")
	if err != nil || res.Remaining != 95 {
		t.Errorf("global, never refunded: %+v %v, want 95 remaining", res, err)
	}
}

func TestRefundOfADenialGivesNothing(t *testing.T) {
	l, _ := miniLimiter(t)
	r := rule("login", core.PerMinute(1), "ip:192.0.2.1")
	if d, _ := check(t, l, r); !d.Allowed {
		t.Fatal("first request denied")
	}
	for range 2 { // the second is answered by the denied-key cache
		d, err := check(t, l, r)
		if err != nil || d.Allowed {
			t.Fatalf("second request: %+v %v, want a denial", d, err)
		}
		if err := l.Refund(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if d, _ := check(t, l, r); d.Allowed {
		t.Error("a refunded denial gave back a unit it never spent")
	}
}

// Units spent by the fallback store go back to it.
func TestRefundOfAFallbackDecision(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	l := newLimiter(t, downStore{}, core.WithClock(clock.Now))
	r := rule("login", core.PerMinute(2), "ip:192.0.2.1")
	for range 4 {
		d, err := check(t, l, r)
		if err != nil || !d.Allowed || !d.Degraded() {
			t.Fatalf("check: %+v %v, want a degraded allowance", d, err)
		}
		if err := l.Refund(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
}

// downStore fails every call, stating no traits.
type downStore struct{}

func (downStore) AllowAllN(context.Context, []core.Check, int) ([]core.Result, error) {
	return nil, errDown
}

func TestQuotaCallsNeedAQuotaStore(t *testing.T) {
	l := newLimiter(t, downStore{})
	r := rule("api", core.PerMinute(5), "ip:192.0.2.1")
	if _, err := l.Peek(context.Background(), r, "ip:192.0.2.1"); !errors.Is(err, core.ErrNotSupported) {
		t.Errorf("Peek: %v, want ErrNotSupported", err)
	}
	if err := l.Reset(context.Background(), "api", "ip:192.0.2.1"); !errors.Is(err, core.ErrNotSupported) {
		t.Errorf("Reset: %v, want ErrNotSupported", err)
	}
	if _, err := l.Peek(context.Background(), core.Rule{Name: "api", Limit: core.PerMinute(5)}, "x"); !errors.Is(err, core.ErrInvalidRule) {
		t.Errorf("Peek of a rule without a key function: %v, want ErrInvalidRule", err)
	}
}

// resetWait bounds how long a replica may take to hear a reset: far
// beyond what delivery takes, so that only a lost message fails.
const resetWait = 20 * time.Second

// A reset made through one Limiter frees the identity on the others that
// remember a denial of it, over a real redis-server.
func TestResetReachesEveryReplica(t *testing.T) {
	resetReachesReplicas(t, redistest.StartServer(t))
}

// The same, with each Limiter's client logged in as the user that the ACL
// line of docs/acl.md makes, as it stands: nothing is reported to OnError.
func TestResetReachesEveryReplicaAsDocsACLUser(t *testing.T) {
	srv := redistest.StartServer(t)
	user, password := redistest.ApplyDocsACL(t, srv)
	resetReachesReplicas(t, srv, redistest.LoginAs(user, password))
}

// resetReachesReplicas runs three Limiters over clients of srv made with
// opts; two remember a denial of one identity, the third resets it, and
// both then allow it. No Limiter reports an error.
func resetReachesReplicas(t *testing.T, srv *redistest.Server, opts ...func(*redis.Options)) {
	t.Helper()
	var reported atomic.Int64
	limiter := func() *core.Limiter {
		client := srv.Client(t, append([]func(*redis.Options){func(o *redis.Options) { o.ContextTimeoutEnabled = true }}, opts...)...)
		store := testkit.MustRedis(client)
		t.Cleanup(func() { store.Close() })
		return newLimiter(t, store, core.WithTimeout(time.Second), core.OnError(func(err error) {
			reported.Add(1)
			t.Errorf("OnError: %v", err)
		}))
	}
	a, replicas := limiter(), []*core.Limiter{limiter(), limiter()}
	// each store subscribes in the background; a reset published before a
	// replica's subscription is in place would not reach it
	redistest.AwaitSubscribers(t, redisstore.ResetChannel, 3, resetWait, srv.Client(t))
	r := rule("login", core.PerMinute(1), "ip:192.0.2.1")
	for i, b := range replicas {
		if d, _ := check(t, b, r); d.Allowed != (i == 0) {
			t.Fatalf("replica %d, first request: allowed %v", i, d.Allowed)
		}
		for range 2 { // the second is answered by b's denied-key cache
			if d, _ := check(t, b, r); d.Allowed {
				t.Fatalf("replica %d: a request past the limit allowed", i)
			}
		}
	}
	if err := a.Reset(context.Background(), "login", "ip:192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	for _, b := range replicas {
		awaitAllowed(t, b, r)
	}
	if n := reported.Load(); n != 0 {
		t.Errorf("%d errors reported", n)
	}
}

// awaitAllowed waits until b allows a request under r, which a reset made
// full again: a peek, which reads the store, finds it full, so only b's
// denied-key cache can deny. The request it allows is given back, so the
// quota stays full for the next replica.
func awaitAllowed(t *testing.T, b *core.Limiter, r core.Rule) {
	t.Helper()
	deadline := time.Now().Add(resetWait)
	for {
		if res, err := b.Peek(context.Background(), r, "ip:192.0.2.1"); err != nil || res.Remaining != 1 {
			t.Fatalf("peek after the reset: %+v %v, want the quota full", res, err)
		}
		d, err := check(t, b, r)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			if err := b.Refund(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a replica still denies %v after the reset", resetWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A reset that lands while a store call is out, after Redis denied it and
// before the Limiter reads the answer, is not undone by the Limiter
// remembering that denial: the next request goes to the store, and passes.
// The reset runs whole in that gap, or begins before the call (its first
// forget done) and lands in the gap.
func TestResetDuringACall(t *testing.T) {
	const key = "ratekit:login:{ip:192.0.2.1}"
	isReset := func(cmd redis.Cmder) bool {
		a := cmd.Args()
		return len(a) > 1 && strings.Contains(fmt.Sprint(a[1]), "PUBLISH") && slices.Contains(a, any(key))
	}
	isDecision := func(cmd redis.Cmder) bool {
		return cmd.Err() == nil && !isReset(cmd) && slices.Contains(cmd.Args(), any(key))
	}
	for _, begun := range []bool{false, true} {
		t.Run(fmt.Sprint("begun before: ", begun), func(t *testing.T) {
			mr := miniredis.RunT(t)
			mr.SetTime(testkit.Start)
			client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { client.Close() })
			var (
				l              *core.Limiter
				holding, armed atomic.Bool
				held, release  = make(chan struct{}), make(chan struct{})
				reset          = make(chan error, 1)
			)
			resetNow := func() { reset <- l.Reset(context.Background(), "login", "ip:192.0.2.1") }
			client.AddHook(cmdHook{
				before: func(cmd redis.Cmder) {
					if isReset(cmd) && holding.CompareAndSwap(true, false) {
						close(held)
						<-release
					}
				},
				after: func(cmd redis.Cmder) {
					if !isDecision(cmd) || !armed.CompareAndSwap(true, false) {
						return
					}
					if begun {
						close(release)
					} else {
						resetNow()
					}
					if err := <-reset; err != nil {
						t.Error(err)
					}
				},
			})
			store := testkit.MustRedis(client)
			t.Cleanup(func() { store.Close() })
			l = newLimiter(t, store, core.WithTimeout(5*time.Second))
			r := rule("login", core.PerMinute(1), "ip:192.0.2.1")
			if d, _ := check(t, l, r); !d.Allowed {
				t.Fatal("first request denied")
			}
			if begun {
				holding.Store(true)
				go resetNow()
				<-held
			}
			armed.Store(true)
			if d, _ := check(t, l, r); d.Allowed || armed.Load() {
				t.Fatal("second request allowed, or no reset during its call")
			}
			if d, err := check(t, l, r); err != nil || !d.Allowed {
				t.Fatalf("the request after the reset: %+v %v, want it allowed", d, err)
			}
		})
	}
}

// cmdHook is a go-redis hook that calls before with each command as it
// goes out and after once it has its reply, alone or in a pipeline; either
// may be nil.
type cmdHook struct{ before, after func(redis.Cmder) }

func (cmdHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h cmdHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.each(h.before, cmd)
		err := next(ctx, cmd)
		h.each(h.after, cmd)
		return err
	}
}

func (h cmdHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.each(h.before, cmds...)
		err := next(ctx, cmds)
		h.each(h.after, cmds...)
		return err
	}
}

func (cmdHook) each(f func(redis.Cmder), cmds ...redis.Cmder) {
	if f != nil {
		for _, c := range cmds {
			f(c)
		}
	}
}

// A replica whose subscription to resets was lost forgets the denials it
// remembers once the subscription is back: a reset published meanwhile
// (here one it never hears, the key deleted behind its back) frees the
// identity on it too.
func TestResetsMissedWhileUnsubscribed(t *testing.T) {
	redistest.Require(t)
	srv := redistest.StartServer(t)
	client := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	store := testkit.MustRedis(client)
	t.Cleanup(func() { store.Close() })
	l := newLimiter(t, store, core.WithTimeout(time.Second))
	admin := srv.Client(t)
	redistest.AwaitSubscribers(t, redisstore.ResetChannel, 1, 20*time.Second, admin)
	r := rule("login", core.PerMinute(1), "ip:192.0.2.1")
	if d, _ := check(t, l, r); !d.Allowed {
		t.Fatal("first request denied")
	}
	for range 2 { // the second is answered by the denied-key cache
		if d, _ := check(t, l, r); d.Allowed {
			t.Fatal("second request allowed")
		}
	}
	ctx := context.Background()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	// the replica allows again once it has subscribed again
	waitFor(t, 20*time.Second, func() bool {
		d, err := check(t, l, r)
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	})
}

// A reset clears the Limiter's own fallback state, so that a client
// limited during an outage is freed at once.
func TestResetClearsFallbackState(t *testing.T) {
	clock := testkit.NewClock(testkit.Start)
	l := newLimiter(t, downStore{}, core.WithClock(clock.Now))
	r := rule("login", core.PerMinute(1), "ip:192.0.2.1")
	if d, _ := check(t, l, r); !d.Allowed {
		t.Fatal("first request denied")
	}
	if d, _ := check(t, l, r); d.Allowed {
		t.Fatal("second request allowed by the fallback")
	}
	_ = l.Reset(context.Background(), "login", "ip:192.0.2.1") // the store is down, and no QuotaStore
	if d, _ := check(t, l, r); !d.Allowed {
		t.Error("a request after the reset was denied by the fallback's old state")
	}
}

// Watching resets does no I/O in NewLimiter: a Redis whose dials hang
// (a black hole, until the client's dial timeout) does not hold it.
func TestWatchingResetsWaitsOnNothing(t *testing.T) {
	var dials atomic.Int32 // dials that ended
	client := redis.NewClient(&redis.Options{
		Addr: "192.0.2.1:6379", // never dialed: the dialer below answers
		Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) {
			defer dials.Add(1)
			select { // a black hole, for as long as a dial timeout
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(200 * time.Millisecond):
				return nil, errors.New("dial timeout")
			}
		},
		MaxRetries: -1,
	})
	t.Cleanup(func() { client.Close() })
	store, err := redisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	dials.Store(0) // redisstore.New's version check dials, within a second; NewLimiter must not
	l, err := core.NewLimiter(store)
	if err != nil {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("NewLimiter returned after %d dials had ended: it waited on the subscription", n)
	}
	l.Close() // returns by the dial timeout at worst
}

// allPanicHook makes every command of a client panic, once it has said so.
type allPanicHook struct{ called chan struct{} }

func (h allPanicHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h allPanicHook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(context.Context, redis.Cmder) error {
		select {
		case h.called <- struct{}{}:
		default:
		}
		panic("hook: boom")
	}
}
func (h allPanicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A client hook that panics while the reset watch subscribes ends the
// watch, not the process.
func TestWatchingResetsSurvivesAPanickingHook(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { client.Close() })
	hook := allPanicHook{called: make(chan struct{}, 1)}
	client.AddHook(hook)
	store, err := redisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	l, err := core.NewLimiter(store)
	if err != nil {
		t.Fatal(err)
	}
	<-hook.called // the subscription reached the hook
	l.Close()
}
