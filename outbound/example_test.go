package outbound_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/outbound"
)

// Every process that makes a Limiter of the same name over the same Redis
// shares one schedule per key: here ten requests a second to one account
// of an upstream, one at a time.
func ExampleLimiter_Wait() {
	mr, err := miniredis.Run() // a Redis server in practice
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()

	l, err := outbound.New(rdb, "payments", outbound.PerSecond(10), outbound.WithMargin(0))
	if err != nil {
		panic(err)
	}
	defer l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	for range 3 {
		if err := l.Wait(ctx, "acct_42"); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("three turns, the last after", time.Since(start).Round(100*time.Millisecond))
	// Output: three turns, the last after 200ms
}

// A Transport makes an http.Client wait for its turn, keyed here by the
// upstream's host and the account in a header, and pauses the whole fleet's
// key when the upstream answers 429 with Retry-After.
func ExampleTransport() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	}))
	defer upstream.Close()
	mr, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	// a deadline of a second for each Redis call (the default is 50ms)
	l, err := outbound.New(rdb, "upstream", outbound.PerSecond(50), outbound.WithTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	defer l.Close()

	client := &http.Client{Transport: &outbound.Transport{
		Limiter: l,
		Key: func(r *http.Request) (string, error) {
			return r.URL.Host + "/" + r.Header.Get("X-Account"), nil
		},
		Retries: 1, // a 429 is sent again after its Retry-After, through the limiter
	}}
	req, _ := http.NewRequest(http.MethodGet, upstream.URL, nil)
	req.Header.Set("X-Account", "acct_42")
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}
