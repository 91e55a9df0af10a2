package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestMiddlewareFailurePolicies feeds Handle the decisions that the
// Limiter's failure policies promise when the store fails, and checks the
// answers.
func TestMiddlewareFailurePolicies(t *testing.T) {
	storeErr := errors.New("dial tcp 127.0.0.1:6379: connection refused")
	limit := PerMinute(100)
	degraded := func(allowed bool, remaining int, retry time.Duration) Decision {
		return Decision{Allowed: allowed, Limiting: 0, Results: []RuleResult{{
			Rule:   "default",
			Result: Result{Limit: limit, Allowed: allowed, Remaining: remaining, RetryAfter: retry, ResetAfter: 12 * time.Second, Degraded: true},
		}}}
	}
	tests := []struct {
		name        string
		cfg         MiddlewareConfig
		d           Decision
		err         error
		wantStatus  int
		wantHeaders []Header
	}{
		{
			name: "fail open: proceeds",
			d:    degraded(true, 99, 0),
			wantHeaders: []Header{
				{HeaderLimit, "100"}, {HeaderRemaining, "99"}, {HeaderReset, "12"},
				{HeaderPolicy, `"default";q=100;w=60`}, {HeaderRateLimit, `"default";r=99;t=12`},
			},
		},
		{
			name:       "fail local: denied locally",
			d:          degraded(false, 0, 1500*time.Millisecond),
			wantStatus: http.StatusTooManyRequests,
			wantHeaders: []Header{
				{HeaderLimit, "100"}, {HeaderRemaining, "0"}, {HeaderReset, "12"},
				{HeaderPolicy, `"default";q=100;w=60`}, {HeaderRateLimit, `"default";r=0;t=12`},
				{HeaderRetryAfter, "2"},
			},
		},
		{
			name:        "fail closed: 503 with Retry-After only",
			d:           degraded(false, 0, 2500*time.Millisecond),
			err:         fmt.Errorf("%w: %w", ErrUnavailable, storeErr),
			wantStatus:  http.StatusServiceUnavailable,
			wantHeaders: []Header{{HeaderRetryAfter, "3"}},
		},
		{
			name:        "fail closed, status chosen",
			cfg:         MiddlewareConfig{FailClosedStatus: http.StatusTooManyRequests},
			d:           degraded(false, 0, time.Second),
			err:         fmt.Errorf("%w: %w", ErrUnavailable, storeErr),
			wantStatus:  http.StatusTooManyRequests,
			wantHeaders: []Header{{HeaderRetryAfter, "1"}},
		},
		{
			name:       "store error without a policy: 500",
			d:          Decision{Limiting: -1},
			err:        storeErr,
			wantStatus: http.StatusInternalServerError,
		},
	}
	rules := []Rule{{Name: "default", Limit: limit, Key: func(Request) (string, error) { return "static:x", nil }}}
	l, err := NewLimiter(NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMiddleware(l, rules, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			m.check = func(context.Context, Request, []Rule) (Decision, error) { return tt.d, tt.err }
			out := m.Handle(HTTPRequest(httptest.NewRequest("GET", "/", nil)))
			if got, want := out.Status, tt.wantStatus; got != want {
				t.Fatalf("status %d, want %d", got, want)
			}
			if got, want := out.Err, tt.err; got != want {
				t.Errorf("err %v, want %v", got, want)
			}
			if got, want := out.Limited(), tt.wantStatus != 0 && tt.err == nil; got != want {
				t.Errorf("Limited() = %v, want %v", got, want)
			}
			if tt.wantStatus != 0 && len(out.Body) == 0 {
				t.Error("no body")
			}
			if got, want := out.Headers.Len(), len(tt.wantHeaders); got != want {
				t.Errorf("%d header fields, want %d", got, want)
			}
			for i := range min(out.Headers.Len(), len(tt.wantHeaders)) {
				if got, want := out.Headers.At(i), tt.wantHeaders[i]; got != want {
					t.Errorf("field %d = %q, want %q", i, got, want)
				}
			}
		})
	}
}
