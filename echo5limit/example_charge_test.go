package echo5limit_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/labstack/echo/v5"

	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/echo5limit"
	"github.com/ratekit/ratekit/memorystore"
)

// A token budget of 100 a minute per API key: the handler reports each
// token of its answer with AddCost, the middleware charges them once the
// answer is done, even past the budget, and the next request waits out
// the debt.
func ExampleAddCost() {
	still := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // a still clock: the output is exact
	store, err := memorystore.New(memorystore.WithClock(func() time.Time { return still }))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	limiter, err := core.NewLimiter(store)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	tokens := core.Rule{
		Name:  "tokens",
		Limit: core.PerMinute(100),
		Key:   func(core.Request) (string, error) { return "apikey:demo", nil },
	}

	e := echo.New()
	e.POST("/v1/complete", func(c *echo.Context) error {
		for i := range 150 { // a completion of 150 tokens
			fmt.Fprintf(c.Response(), "token %d\n", i)
			echo5limit.AddCost(c, 1)
		}
		return nil
	}, echo5limit.MustNew(limiter, []core.Rule{tokens}, echo5limit.WithCharged("tokens")))
	send := func() string {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("POST", "/v1/complete", nil))
		return fmt.Sprintf("%d remaining: %s Retry-After: %q", w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"))
	}
	fmt.Println(send())
	// the charge lands in the background once the answer is done
	for {
		if p, err := limiter.Peek(context.Background(), tokens, "apikey:demo"); err != nil || !p.Allowed {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Println(send())
	// Output:
	// 200 remaining: 99 Retry-After: ""
	// 429 remaining: 0 Retry-After: "31"
}
