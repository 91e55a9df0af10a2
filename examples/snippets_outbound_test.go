package examples_test

// Snippets of docs/outbound.md, checked like those of snippets_test.go.

import (
	"context"
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/outbound"
)

// accountOf names the account a request is made for, as an application
// knows it.
func accountOf(r *http.Request) string { return r.Header.Get("X-Account") }

// The outbound API, compiled and not run: it needs a Redis.
func Example_outboundAPI() {
	ctx := context.Background()
	// snippet:outbound-api
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true, MaxRetries: -1})
	l, err := outbound.New(rdb, "stripe", outbound.PerSecond(100))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	err = l.Wait(ctx, "acct_42")                  // sleeps until this caller's turn
	r, err := l.Reserve(ctx, "acct_42")           // a turn: r.TimeToAct(), r.Delay(), r.Cancel(ctx)
	ok, err := l.Allow(ctx, "acct_42")            // a turn only if it is now
	err = l.Pause(ctx, "acct_42", 30*time.Second) // the whole fleet, for 30 s
	// snippet:end
	_, _, _ = r, ok, err

	// snippet:outbound-transport
	client := &http.Client{Transport: &outbound.Transport{
		Limiter: l,
		Key:     func(r *http.Request) (string, error) { return r.URL.Host + "/" + accountOf(r), nil },
		Retries: 1,
	}}
	// snippet:end
	_ = client
}
