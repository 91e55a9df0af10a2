// Package outboundkit holds the outbound fixture the observers' tests
// share. It is a package apart from testkit so that the tests of packages
// that use testkit (core's among them) do not depend on package outbound.
package outboundkit

import (
	"net/http"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/outbound"
)

// OutboundTraffic drives an outbound Limiter named "api" (1000 a second,
// burst 10, on a miniredis of its own) that reports to o through known
// events: three waits on key "k", granted at once, then a Transport
// request whose upstream answers 429 with Retry-After: 2, which is a
// fourth granted wait, one 429 seen and one pause of 2 s for Retry-After.
// The observers' tests compare what o recorded with those.
func OutboundTraffic(t testing.TB, o outbound.Observer) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	l, err := outbound.New(rdb, "api", outbound.PerSecond(1000).WithBurst(10), outbound.WithObserver(o))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range 3 {
		if err := l.Wait(t.Context(), "k"); err != nil {
			t.Fatal(err)
		}
	}
	tr := &outbound.Transport{Limiter: l, Base: roundTripper(func(r *http.Request) (*http.Response, error) {
		h := http.Header{"Retry-After": {"2"}}
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: h, Body: http.NoBody, Request: r}, nil
	})}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://upstream.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// roundTripper is an http.RoundTripper of one function.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
