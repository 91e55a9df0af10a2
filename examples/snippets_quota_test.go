package examples_test

// Snippets of docs/quotas.md and docs/adapters.md, checked like those of
// snippets_test.go.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/redisstore"
)

// Rules replaced at run time, and per-plan limits.
func Example_ruleSet() {
	limiter := redisLimiter()
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	// snippet:ruleset
	rules, err := core.NewRuleSet([]core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}})
	if err != nil {
		log.Fatal(err)
	}
	handler := nethttp.MustNew(limiter, nil, nethttp.WithRuleSet(rules))(mux)
	// later, from a reload or an admin call: validated, then swapped in at once
	if err := rules.Replace([]core.Rule{{Name: "default", Limit: core.PerMinute(200), Key: clientIP}}); err != nil {
		log.Printf("rules stay as they were: %v", err)
	}
	// snippet:end
	_ = handler
}

// A login throttle that counts only failed attempts.
func Example_countOnly() {
	limiter := redisLimiter()
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	handleLogin := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) }
	// snippet:countonly
	loginRules := []core.Rule{{Name: "login", Limit: core.PerMinute(3), Key: clientIP}}
	failures := nethttp.MustNew(limiter, loginRules,
		nethttp.WithCountOnly("login", func(status int) bool { return status == http.StatusUnauthorized }))
	mux.Handle("POST /login", failures(http.HandlerFunc(handleLogin)))
	// snippet:end
}

// Reading and clearing a client's quota, as an admin would.
func Example_peekReset() {
	limiter := redisLimiter()
	ctx := context.Background()
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	// snippet:peekreset
	rule := core.Rule{Name: "default", Limit: core.PerMinute(100), Key: clientIP}
	quota, err := limiter.Peek(ctx, rule, "ip:203.0.113.7") // spends nothing
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d of %d left, full again in %v\n", quota.Remaining, quota.Limit.Capacity(), quota.ResetAfter)
	// clears the key in Redis, and the memory of every replica watching it
	if err := limiter.Reset(ctx, "default", "ip:203.0.113.7"); err != nil {
		log.Fatal(err)
	}
	// snippet:end
}

// A customer's own limit, set by an admin call and seen by every replica.
func Example_overrides() {
	limiter := redisLimiter()
	ctx := context.Background()
	tenant, err := keyfuncs.Header("X-Tenant-Id") // set by the gateway
	if err != nil {
		log.Fatal(err)
	}
	// snippet:overrides
	rule := core.Rule{Name: "api", Limit: core.PerMinute(100), Key: tenant, Overrides: true}
	// acme gets 1000 a minute for 24 hours, on every replica from its next request
	id := "header:X-Tenant-Id:acme"
	if err := limiter.SetOverride(ctx, rule, id, core.PerMinute(1000), 24*time.Hour); err != nil {
		log.Fatal(err)
	}
	// back to the rule's 100 a minute before then
	if err := limiter.ClearOverride(ctx, "api", id); err != nil {
		log.Fatal(err)
	}
	// snippet:end
}

// Refunding a decision a handler made itself.
func Example_refund() {
	limiter := redisLimiter()
	var req core.Request // a request as adapters view it
	var rules []core.Rule
	sendMail := func() error { return errors.New("mail server down") }
	// snippet:refund
	d, err := limiter.Check(req.Context(), req, rules)
	if err != nil || !d.Allowed {
		return // answer 429, 503 or 500
	}
	if err := sendMail(); err != nil {
		// the attempt failed on our side: it should not count against the caller
		_ = limiter.Refund(context.WithoutCancel(req.Context()), d, "mail")
	}
	// snippet:end
}

// Namespaces: limits of one service, and limits several services share.
func Example_namespaces() {
	store := redisStore()
	// snippet:namespaces
	// keys "billing:login:{ip:...}": the billing service's own login limit
	billing, err := core.NewLimiter(store, core.WithPrefix("billing:"))
	if err != nil {
		log.Fatal(err)
	}
	// keys "acme:api:{apikey:...}": one API quota that every service of the
	// company enforces together, whatever service a call reaches
	shared, err := core.NewLimiter(store, core.WithPrefix("acme:"))
	if err != nil {
		log.Fatal(err)
	}
	// snippet:end
	_, _ = billing, shared
}

// An error handler that answers each failure by the status it would get.
func Example_errorStatus() {
	// snippet:errorstatus
	onError := nethttp.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, status int, err error) {
		slog.Warn("rate limiter", "status", status, "err", err) // err's text is for logs only
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "5")
		}
		http.Error(w, http.StatusText(status), status)
	})
	// snippet:end
	_ = onError
}

// redisStore returns a redisstore.Store over a Redis on localhost.
func redisStore() *redisstore.Store {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1})
	store, err := redisstore.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	return store
}

// redisLimiter returns a Limiter over redisStore.
func redisLimiter() *core.Limiter {
	limiter, err := core.NewLimiter(redisStore())
	if err != nil {
		log.Fatal(err)
	}
	return limiter
}
