package ginlimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/ginlimit"
	"github.com/ratekit/ratekit/memorystore"
)

// A token budget of 100 a minute per API key: the handler reports each
// token it streams with AddCost, the middleware charges them once the
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

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/v1/complete", ginlimit.MustNew(limiter, []core.Rule{tokens}, ginlimit.WithCharged("tokens")), func(c *gin.Context) {
		for i := range 150 { // a completion of 150 tokens, streamed
			fmt.Fprintf(c.Writer, "token %d\n", i)
			c.Writer.Flush()
			ginlimit.AddCost(c, 1)
		}
	})
	send := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("POST", "/v1/complete", nil))
		return w
	}
	fmt.Println(send().Code)
	// the charge lands in the background once the answer is done
	for p, err := limiter.Peek(context.Background(), tokens, "apikey:demo"); err == nil && p.Allowed; p, err = limiter.Peek(context.Background(), tokens, "apikey:demo") {
		time.Sleep(time.Millisecond)
	}
	w := send()
	fmt.Println(w.Code, "remaining:", w.Header().Get("X-RateLimit-Remaining"), "Retry-After:", w.Header().Get("Retry-After"))
	// Output:
	// 200
	// 429 remaining: 0 Retry-After: 31
}
