package nethttp_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/nethttp"
)

// A token budget: each API key may use 100 tokens a minute. A request is
// admitted while its key is not in debt; its handler reports each token
// it streams with AddCost, and once the answer is done the middleware
// charges them all, even past the budget. The next request waits out the
// debt.
func ExampleAddCost() {
	// a still clock: the output is exact
	still := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
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
	apiKey, err := keyfuncs.APIKey() // from X-API-Key, hashed
	if err != nil {
		log.Fatal(err)
	}
	tokens := core.Rule{Name: "tokens", Limit: core.PerMinute(100), Key: apiKey}

	complete := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range 150 { // a completion of 150 tokens, streamed
			fmt.Fprintf(w, "token %d\n", i)
			nethttp.AddCost(r, 1)
		}
	})
	api := nethttp.MustNew(limiter, []core.Rule{tokens}, nethttp.WithCharged("tokens"))(complete)

	newRequest := func() *http.Request {
		req := httptest.NewRequest("POST", "/v1/complete", nil)
		req.Header.Set("X-API-Key", "k-123")
		return req
	}
	send := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, newRequest())
		return w
	}
	w := send()
	fmt.Println(w.Code, "remaining before the charge:", w.Header().Get("X-RateLimit-Remaining"))

	// The charge lands in the background once the answer is done; a
	// client's next request comes later than the example's would.
	id, err := apiKey(adapter.HTTPRequest(newRequest()))
	if err != nil {
		log.Fatal(err)
	}
	for {
		if p, err := limiter.Peek(context.Background(), tokens, id); err != nil || !p.Allowed {
			break
		}
		time.Sleep(time.Millisecond)
	}

	w = send()
	fmt.Println(w.Code, "remaining:", w.Header().Get("X-RateLimit-Remaining"), "Retry-After:", w.Header().Get("Retry-After"))
	// Output:
	// 200 remaining before the charge: 99
	// 429 remaining: 0 Retry-After: 31
}

// A rule whose cost is 10 admits a request only while its key has 10
// units left, and spends them at once; once the answer is done, the
// middleware charges what the handler reported in their place: here 4, so
// 6 go back to the key.
func ExampleWithCharged() {
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
		Cost:  func(core.Request) int { return 10 }, // the least a request needs, spent up front
	}
	api := nethttp.MustNew(limiter, []core.Rule{tokens}, nethttp.WithCharged("tokens"))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintln(w, "a short answer")
			nethttp.AddCost(r, 4)
		}))

	w := httptest.NewRecorder()
	api.ServeHTTP(w, httptest.NewRequest("POST", "/v1/complete", nil))
	fmt.Println(w.Code, "remaining:", w.Header().Get("X-RateLimit-Remaining"))

	// the charge lands in the background once the answer is done
	for {
		p, err := limiter.Peek(context.Background(), tokens, "apikey:demo")
		if err != nil || p.Remaining != 90 {
			fmt.Println("after the charge:", p.Remaining)
			break
		}
		time.Sleep(time.Millisecond)
	}
	// Output:
	// 200 remaining: 90
	// after the charge: 96
}
