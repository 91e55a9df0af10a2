package nethttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/redisstore"
)

// storeErrors records the store's failures as an Observer and OnError
// hear them.
type storeErrors struct {
	mu                sync.Mutex
	observed, onError []error
}

func (s *storeErrors) Decided(context.Context, core.DecisionEvent) {}
func (s *storeErrors) BreakerChanged(_, _ core.BreakerState)       {}
func (s *storeErrors) StoreCalled(_ time.Duration, err error) {
	if err != nil {
		s.mu.Lock()
		s.observed = append(s.observed, err)
		s.mu.Unlock()
	}
}

func (s *storeErrors) report(err error) {
	s.mu.Lock()
	s.onError = append(s.onError, err)
	s.mu.Unlock()
}

// heard reports whether both the observer and OnError heard a failure.
func (s *storeErrors) heard() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.observed) > 0 && len(s.onError) > 0
}

// TestChargeOutage: Redis dies while an answer is produced, so the charge
// of its 150 units, made once it is done, fails. The failure is heard by
// the observer and OnError, and the failure policy decides: under
// FailLocal the fallback store is charged and denies the next request;
// under FailOpen nothing is, and the next request passes; under
// FailClosed the next request is refused with 503.
func TestChargeOutage(t *testing.T) {
	for _, tc := range []struct {
		policy core.FailurePolicy
		next   int // the next request's status
	}{
		{core.FailLocal, http.StatusTooManyRequests},
		{core.FailOpen, http.StatusOK},
		{core.FailClosed, http.StatusServiceUnavailable},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			srv := redistest.StartServer(t)
			store, err := redisstore.New(srv.Client(t))
			if err != nil {
				t.Fatal(err)
			}
			errs := &storeErrors{}
			l, err := core.NewLimiter(store, core.WithFailurePolicy(tc.policy), core.WithObserver(errs),
				core.OnError(errs.report), core.WithTimeout(10*time.Second)) // a loaded machine still reaches a live Redis
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			r := core.Rule{Name: "tokens", Limit: core.PerMinute(100), Key: func(core.Request) (string, error) { return "apikey:k", nil }}
			h := nethttp.MustNew(l, []core.Rule{r}, nethttp.WithCharged("tokens"))(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				io.WriteString(w, "an answer of 150 tokens")
				srv.Kill(t) // Redis dies before the answer is charged
				nethttp.AddCost(req, 150)
			}))

			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", "/", nil))
			if w.Code != http.StatusOK {
				t.Fatalf("the first request, Redis up: %d", w.Code)
			}
			for deadline := time.Now().Add(30 * time.Second); !errs.heard(); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the failed charge was not reported to the observer and OnError")
				}
			}
			w = httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("POST", "/", nil))
			if w.Code != tc.next {
				t.Fatalf("the next request, Redis down: %d, want %d", w.Code, tc.next)
			}
		})
	}
}
