package core_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/memorystore"
)

// A Limiter over Redis keeps limiting when Redis goes away: by default it
// decides locally (FailLocal) and marks those decisions as degraded, while
// what Redis already denied stays denied until its retry-after.
func ExampleLimiter_Check() {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	client := redis.NewClient(&redis.Options{
		Addr:                  m.Addr(),
		ContextTimeoutEnabled: true, // give up at the Limiter's deadline
		MaxRetries:            -1,   // no retries within the deadline
	})
	defer client.Close()
	limiter, err := core.NewLimiter(testkit.MustRedis(client), core.WithTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	user := "user:42"
	rules := []core.Rule{{
		Name:  "default",
		Limit: core.PerMinute(3),
		Key:   func(core.Request) (string, error) { return user, nil },
	}}
	req := adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil))
	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		d, err := limiter.Check(ctx, req, rules)
		if err != nil {
			panic(err)
		}
		lim := d.Results[d.Limiting]
		fmt.Printf("request %d: allowed=%v degraded=%v retry-after=%v\n", i, d.Allowed, d.Degraded(), lim.RetryAfter.Round(time.Second))
	}

	m.Close() // Redis goes away
	for _, user = range []string{"user:42", "user:7"} {
		d, err := limiter.Check(ctx, req, rules)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: allowed=%v degraded=%v\n", user, d.Allowed, d.Degraded())
	}
	// Output:
	// request 1: allowed=true degraded=false retry-after=0s
	// request 2: allowed=true degraded=false retry-after=0s
	// request 3: allowed=true degraded=false retry-after=0s
	// request 4: allowed=false degraded=false retry-after=20s
	// user:42: allowed=false degraded=false
	// user:7: allowed=true degraded=true
}

// Under FailClosed a Limiter whose store is down denies every request, and
// says why: adapters answer 503 with Retry-After.
func ExampleWithFailurePolicy() {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	addr := m.Addr()
	m.Close() // nothing listens there any more
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	limiter, err := core.NewLimiter(testkit.MustRedis(client), core.WithFailurePolicy(core.FailClosed))
	if err != nil {
		panic(err)
	}
	defer limiter.Close()

	rules := []core.Rule{{
		Name:  "default",
		Limit: core.PerMinute(100),
		Key:   func(core.Request) (string, error) { return "user:42", nil },
	}}
	d, err := limiter.Check(context.Background(), adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil)), rules)
	fmt.Println("allowed:", d.Allowed)
	fmt.Println("degraded:", d.Degraded())
	fmt.Println("unavailable:", errors.Is(err, core.ErrUnavailable))
	fmt.Println("retry after:", d.Results[0].RetryAfter)
	// Output:
	// allowed: false
	// degraded: true
	// unavailable: true
	// retry after: 1s
}

// A caller that decides request after request can keep each decision's
// results in a buffer of its own; here one buffer is reused, since each
// decision is done with before the next.
func ExampleLimiter_CheckInto() {
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
		Name:  "default",
		Limit: core.PerMinute(2),
		Key:   func(core.Request) (string, error) { return "user:42", nil },
	}}
	req := adapter.HTTPRequest(httptest.NewRequest("GET", "/", nil))
	var buf [4]core.RuleResult
	for i := 1; i <= 3; i++ {
		d, err := limiter.CheckInto(context.Background(), req, rules, buf[:0])
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d: allowed=%v remaining=%d\n", i, d.Allowed, d.Results[0].Remaining)
	}
	// Output:
	// request 1: allowed=true remaining=1
	// request 2: allowed=true remaining=0
	// request 3: allowed=false remaining=0
}
