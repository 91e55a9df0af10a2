package examples_test

// Snippets of docs/tokens.md, checked like those of snippets_test.go.

import (
	"context"
	"log"
	"net/http"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/keyfuncs"
)

// A token budget: admit while not in debt, charge the answer's cost.
func Example_tokenBudget() {
	limiter := redisLimiter()
	apiKey, err := keyfuncs.APIKey() // X-API-Key, hashed
	if err != nil {
		log.Fatal(err)
	}
	streamTokens := func(w http.ResponseWriter, r *http.Request) int { return 0 }
	// snippet:tokens
	rules := []core.Rule{{Name: "tokens", Limit: core.PerMinute(10_000), Key: apiKey}}
	complete := func(w http.ResponseWriter, r *http.Request) {
		d, err := limiter.Check(r.Context(), adapter.HTTPRequest(r), rules)
		if err != nil || !d.Allowed {
			http.Error(w, "over the token budget", http.StatusTooManyRequests)
			return
		}
		tokens := streamTokens(w, r) // the answer, streamed: its cost known only now
		// charged whatever is left, into a debt the next requests wait out; the
		// decision's own unit is part of it
		if _, err := limiter.ChargeDecision(context.WithoutCancel(r.Context()), d, tokens); err != nil {
			log.Printf("charge: %v", err)
		}
	}
	// snippet:end
	_ = complete
}
