package caddyratekit_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// failingMatcher is a request matcher whose every match fails, as a
// matcher that must read a body that is cut off does.
type failingMatcher struct{}

var errMatch = errors.New("the matcher failed")

func (failingMatcher) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.matchers.ratekit_test_failing", New: func() caddy.Module { return new(failingMatcher) }}
}

func (failingMatcher) MatchWithError(*http.Request) (bool, error) { return false, errMatch }

var _ caddyhttp.RequestMatcherWithError = failingMatcher{}

func init() { caddy.RegisterModule(failingMatcher{}) }

// A rule's matcher that fails makes the request fail, as a route's
// matcher does, and spends nothing of the other rules.
func TestMatcherError(t *testing.T) {
	mr, url := redisURL(t)
	h := fromJSON(t, handlerJSON(url, `{"name":"plain","limit":5,"period":60000000000},
		{"name":"matched","limit":5,"period":60000000000,"match":[{"ratekit_test_failing":{}}]}`, ""))
	provision(t, h)
	a := get(t, h, "/", "198.51.100.1")
	if a.status != http.StatusInternalServerError || a.next || !errors.Is(a.err, errMatch) {
		t.Errorf("%d, next %v, err %v; want 500 wrapping the matcher's error", a.status, a.next, a.err)
	}
	// the plain rule's unit was given back: a full GCRA bucket has no key
	if keys := keysOf(mr); len(keys) != 0 {
		t.Errorf("Redis keys %q after a failed request, want none", keys)
	}
}
