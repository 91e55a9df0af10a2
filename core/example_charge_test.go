package core_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/memorystore"
)

// A token budget: a request is admitted while its key is not in debt, and
// once its answer is done it is charged what it really cost, even past the
// budget. The next request then waits until the debt is repaid.
func ExampleLimiter_ChargeDecision() {
	store, err := memorystore.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	limiter, err := core.NewLimiter(store)
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	rules := []core.Rule{{
		Name:  "tokens",
		Limit: core.PerMinute(100), // 100 tokens a minute
		Key:   func(core.Request) (string, error) { return "apikey:demo", nil },
	}}
	req := adapter.HTTPRequest(httptest.NewRequest("POST", "/v1/complete", nil))
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		d, err := limiter.Check(ctx, req, rules)
		if err != nil {
			panic(err)
		}
		if !d.Allowed {
			fmt.Printf("request %d: denied, in debt\n", i)
			continue
		}
		// ... the answer streams 70 tokens ...
		res, err := limiter.ChargeDecision(ctx, d, 70)
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: charged %d, %d left\n", i, res[0].Charged, res[0].Remaining)
	}
	// Output:
	// request 1: charged 70, 30 left
	// request 2: charged 70, 0 left
	// request 3: denied, in debt
}

// Charge spends units outside of a decision, whatever the key holds, up to
// the debt bound.
func ExampleLimiter_Charge() {
	store, err := memorystore.New()
	if err != nil {
		panic(err)
	}
	defer store.Close()
	limiter, err := core.NewLimiter(store)
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	rule := core.Rule{
		Name:  "tokens",
		Limit: core.PerMinute(100),
		Key:   func(core.Request) (string, error) { return "apikey:demo", nil },
	}
	res, err := limiter.Charge(context.Background(), rule, "apikey:demo", 5000)
	if err != nil {
		panic(err)
	}
	fmt.Println("charged:", res.Charged, "allowed:", res.Allowed, "wait:", res.RetryAfter.Round(1e9))
	// Output: charged: 1100 allowed: false wait: 10m1s
}
