package adapter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/memorystore"
)

// TestMiddlewareFailurePolicies feeds Handle the decisions that the
// Limiter's failure policies promise when the store fails, and checks the
// answers.
func TestMiddlewareFailurePolicies(t *testing.T) {
	storeErr := errors.New("dial tcp 127.0.0.1:6379: connection refused")
	limit := core.PerMinute(100)
	degraded := func(allowed bool, remaining int, retry time.Duration) core.Decision {
		return core.Decision{Allowed: allowed, Limiting: 0, Results: []core.RuleResult{{
			Rule:   "default",
			Result: core.Result{Limit: limit, Allowed: allowed, Remaining: remaining, RetryAfter: retry, ResetAfter: 12 * time.Second, Degraded: true},
		}}}
	}
	tests := []struct {
		name        string
		cfg         Config
		d           core.Decision
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
			err:         fmt.Errorf("%w: %w", core.ErrUnavailable, storeErr),
			wantStatus:  http.StatusServiceUnavailable,
			wantHeaders: []Header{{HeaderRetryAfter, "3"}},
		},
		{
			name:        "fail closed, status chosen",
			cfg:         Config{FailClosedStatus: http.StatusTooManyRequests},
			d:           degraded(false, 0, time.Second),
			err:         fmt.Errorf("%w: %w", core.ErrUnavailable, storeErr),
			wantStatus:  http.StatusTooManyRequests,
			wantHeaders: []Header{{HeaderRetryAfter, "1"}},
		},
		{
			name:       "store error without a policy: 500",
			d:          core.Decision{Limiting: -1},
			err:        storeErr,
			wantStatus: http.StatusInternalServerError,
		},
	}
	rules := []core.Rule{{Name: "default", Limit: limit, Key: func(core.Request) (string, error) { return "static:x", nil }}}
	store, err := memorystore.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	l, err := core.NewLimiter(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(l, rules, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			m.check = func(context.Context, core.Request, []core.Rule, []core.RuleResult) (core.Decision, error) {
				return tt.d, tt.err
			}
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
