package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/memorystore"
)

// TestDeniedSpendsNothing checks a request against a per-IP rule of
// 100/min and a per-user rule of 1/min, five times: the first is allowed,
// the four others are denied by the per-user rule, decided after the
// per-IP rule spent. The per-IP rule gives back what each denied request
// spent, whoever spent it: a redis-server, a memory store, the fallback.
func TestDeniedSpendsNothing(t *testing.T) {
	for _, s := range refundStores(t) {
		t.Run(s.name, func(t *testing.T) {
			perIP := rule("per-ip", core.PerMinute(100), "ip:192.0.2.7")
			perUser := rule("per-user", core.PerMinute(1), "user:"+t.Name())
			for i := range 5 {
				d, err := check(t, s.l, perIP, perUser)
				if err != nil || d.Allowed != (i == 0) {
					t.Fatalf("request %d: allowed %v, %v", i+1, d.Allowed, err)
				}
				if i > 0 && d.Results[d.Limiting].Rule != "per-user" {
					t.Fatalf("request %d denied by %q, want per-user", i+1, d.Results[d.Limiting].Rule)
				}
			}
			d, err := check(t, s.l, perIP)
			if err != nil {
				t.Fatal(err)
			}
			// the one allowed request and this one: 98 left
			if got := d.Results[0].Remaining; got != 98 {
				t.Errorf("per-ip remaining after 1 allowed and 4 denied requests, and this one: %d, want 98", got)
			}
		})
	}
}

// TestDeniedSpendsNothingRefundedOnce refunds a denied decision whose
// earlier identity was given back already: nothing is given twice.
func TestDeniedSpendsNothingRefundedOnce(t *testing.T) {
	mem, err := memorystore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	l := newLimiter(t, mem)
	perIP := rule("per-ip", core.PerMinute(3), "ip:192.0.2.8")
	perUser := rule("per-user", core.PerMinute(1), "user:once")
	for range 2 {
		check(t, l, perIP, perUser)
	}
	d, err := check(t, l, perIP, perUser) // denied, given back
	if err != nil || d.Allowed {
		t.Fatalf("third request: allowed %v, %v", d.Allowed, err)
	}
	if err := l.Refund(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	// one spent (the first request): 2 left, then 1 after this one
	if d, _ := check(t, l, perIP); d.Results[0].Remaining != 1 {
		t.Errorf("per-ip remaining: %d, want 1", d.Results[0].Remaining)
	}
}

// refundFails is a memory store whose refunds fail.
type refundFails struct{ *memorystore.Store }

var errRefund = errors.New("refund refused")

func (refundFails) RefundAllN(context.Context, []core.Check, int) ([]core.Result, error) {
	return nil, errRefund
}

// storeCalls is an Observer that keeps the errors of store calls.
type storeCalls struct {
	mu   sync.Mutex
	errs []error
}

func (o *storeCalls) Decided(context.Context, core.DecisionEvent) {}
func (o *storeCalls) StoreCalled(_ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, err)
}
func (o *storeCalls) BreakerChanged(core.BreakerState, core.BreakerState) {}

// TestDeniedSpendsNothingRefundFails makes the give-back fail: the
// decision stays a denial without an error, and OnError and the Observer
// hear of the failure.
func TestDeniedSpendsNothingRefundFails(t *testing.T) {
	mem, err := memorystore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	var (
		obs      storeCalls
		mu       sync.Mutex
		reported []error
	)
	// a store that is not in process, so that the failure counts
	l := newLimiter(t, outOfProcess{refundFails{mem}}, core.WithObserver(&obs), core.OnError(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}))
	perIP := rule("per-ip", core.PerMinute(100), "ip:192.0.2.9")
	perUser := rule("per-user", core.PerMinute(1), "user:fails")
	check(t, l, perIP, perUser)
	d, err := check(t, l, perIP, perUser)
	if err != nil || d.Allowed {
		t.Fatalf("second request: allowed %v, %v, want a denial and no error", d.Allowed, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !errors.Is(reported[0], errRefund) || !strings.Contains(reported[0].Error(), "denied request") {
		t.Errorf("OnError heard %v, want the failed give-back", reported)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	failed := 0
	for _, err := range obs.errs {
		if errors.Is(err, errRefund) {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("Observer heard %v, want one failed store call", obs.errs)
	}
}

// outOfProcess hides the traits of the QuotaStore it holds: a Limiter
// calls it as it calls Redis.
type outOfProcess struct{ core.QuotaStore }

func (outOfProcess) Traits() core.Traits { return core.Traits{} }
