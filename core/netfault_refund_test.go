package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/netfault"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
)

// replies 70 ms late, every one: each decision misses the 50 ms deadline,
// while Redis runs every script it is sent
var late70 = netfault.Fault{Name: "late70", Type: "latency", Stream: "downstream", Attributes: map[string]any{"latency": 70, "jitter": 0}}

// spikeRun is a Limiter over a client through a fault proxy to a
// redis-server, and a Limiter over a client of the server itself, which
// reads what the keys hold.
type spikeRun struct {
	proxy  *netfault.Proxy
	client *redis.Client
	l      *core.Limiter
	peeker *core.Limiter
	direct *redis.Client // of the server itself, for peeker

	mu   sync.Mutex
	errs []error // what the Limiter reported
}

func startSpikeRun(t *testing.T, srv *redistest.Server, opts ...func(*redis.Options)) *spikeRun {
	t.Helper()
	r := &spikeRun{proxy: netfault.Start(t, srv.Addr())}
	o := &redis.Options{Addr: r.proxy.Addr()}
	for _, f := range opts {
		f(o)
	}
	r.client = redis.NewClient(o)
	l, err := core.NewLimiter(testkit.MustRedis(r.client), core.OnError(func(err error) {
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	r.l = l
	// a pool kept warm, as traffic keeps it: go-redis sends a connection's
	// HELLO with its first command, whose late reply would fail a decision
	// before its command went out; warm connections carry it to Redis
	redistest.WarmConns(t, r.client, 16)
	o = &redis.Options{Addr: srv.Addr()}
	recommended(o)
	r.direct = redis.NewClient(o)
	if r.peeker, err = core.NewLimiter(testkit.MustRedis(r.direct), core.WithTimeout(time.Second)); err != nil {
		t.Fatal(err)
	}
	return r
}

// shutdown closes the Limiter, the client and the proxy, in that order.
func (r *spikeRun) shutdown() {
	r.l.Close()
	_ = r.client.Close()
	r.proxy.Stop()
	r.peeker.Close()
	_ = r.direct.Close()
}

// login decides one login attempt under rule, and refunds it when the
// password was right, as a count-only rule of failures does; it returns
// the decision, whether the store said it never sent the decision's call
// (an error wrapping core.ErrNotSent reported during the check, other than
// a background refund's), and the refund's error.
func (r *spikeRun) login(t *testing.T, rule core.Rule, right bool) (_ core.Decision, unsent bool, _ error) {
	t.Helper()
	r.mu.Lock()
	before := len(r.errs)
	r.mu.Unlock()
	d, err := check(t, r.l, rule)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	r.mu.Lock()
	for _, e := range r.errs[before:] {
		unsent = unsent || errors.Is(e, core.ErrNotSent) && !strings.Contains(e.Error(), "refund")
	}
	r.mu.Unlock()
	if !d.Allowed || !right {
		return d, unsent, nil
	}
	return d, unsent, r.l.Refund(context.Background(), d)
}

// waitRemaining waits up to 5 s for the key of rule to hold want units by
// the server's own answer, and returns what it last held.
func (r *spikeRun) waitRemaining(t *testing.T, rule core.Rule, id string, want int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := r.peeker.Peek(context.Background(), rule, id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Remaining == want || time.Now().After(deadline) {
			return res.Remaining
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCountOnlyAfterLatencySpike is a login throttle of failures (3 a
// minute, count-only: a right password's unit is refunded) through 70 ms
// late replies, at the 50 ms deadline, with each kind of client: four
// right passwords and a wrong one during the spike are each decided by the
// fallback, while Redis runs every decision sent to it too. Once the spike
// is over, Redis holds the wrong password's unit and nothing of the right
// ones, and right passwords pass. A call that waited in the store's queue
// for a pipeline past its deadline (both slots held by calls the spike
// made late) was never sent: Redis spent nothing of it, and holds nothing
// of the wrong password if its call was that one.
func TestCountOnlyAfterLatencySpike(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, kind := range clientKinds {
		t.Run(kind.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, proxyGoroutines()...)
			r := startSpikeRun(t, srv, kind.opts...)
			defer r.shutdown()
			id := fmt.Sprintf("user:alice-%s-%d", kind.name, time.Now().UnixNano())
			login := rule("login", core.PerMinute(3), id)
			// the same limit on another identity: its script is loaded
			warmUp(t, r.l, 1, func(int) []core.Rule { return []core.Rule{rule("login", core.PerMinute(3), id+"-warm")} })

			r.proxy.Inject(t, late70)
			degraded, refundErrs, unsent := 0, 0, 0
			wrongSent := true
			for _, right := range []bool{true, true, false, true, true} {
				d, notSent, err := r.login(t, login, right)
				if notSent {
					unsent++
					wrongSent = wrongSent && right
				}
				if !d.Allowed {
					t.Fatalf("an attempt during the spike denied: %+v", d)
				}
				if d.Degraded() {
					degraded++
				}
				if err != nil {
					refundErrs++
				}
			}
			r.proxy.Lift(t, late70)
			t.Logf("during the spike: 5 attempts, %d decided by the fallback, %d never sent, %d refunds that missed the deadline", degraded, unsent, refundErrs)
			if degraded == 0 {
				t.Fatal("fixture: no attempt missed the deadline")
			}

			want := 2 // the wrong password's unit spent, the right ones' given back
			if !wrongSent {
				want = 3 // the wrong password's call never went out
			}
			if got := r.waitRemaining(t, login, id, want); got != want {
				t.Errorf("after the spike Redis holds %d of 3 units left, want %d: the wrong password's unit spent if its call went out (%v), the right ones' given back", got, want, wrongSent)
			}
			waitFor(t, 2*netFaultBack, func() bool { return r.l.BreakerState() == core.BreakerClosed })
			denied := 0
			for range 3 {
				if d, _, _ := r.login(t, login, true); !d.Allowed {
					denied++
				}
			}
			if denied > 0 {
				t.Errorf("after the spike, %d of 3 right passwords denied (429)", denied)
			}
		})
	}
}
