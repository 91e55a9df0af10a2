package examples_test

// Snippets of docs/extending.md, checked like those of snippets_test.go.
// TestCountingStore runs: it proves the guide's decorator with the store
// conformance suite.

import (
	"context"
	"log"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/core/storetest"
	"github.com/ratekit/ratekit/memorystore"
)

// snippet:decorator
// countingStore counts the calls to the store it wraps.
type countingStore struct {
	core.Store
	calls atomic.Int64
}

func (s *countingStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	s.calls.Add(1)
	return s.Store.AllowAllN(ctx, checks, n)
}

// Traits forwards the wrapped store's traits, so that the Limiter keeps
// calling it the fast way.
func (s *countingStore) Traits() core.Traits {
	if t, ok := s.Store.(interface{ Traits() core.Traits }); ok {
		return t.Traits()
	}
	return core.Traits{}
}

// snippet:end

// snippet:storetest
func TestCountingStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store {
		mem, err := memorystore.New()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mem.Close() })
		return &countingStore{Store: mem}
	})
}

// snippet:end

// The decorator keeps the traits of the store it wraps, and counts.
func TestCountingStoreTraits(t *testing.T) {
	mem, err := memorystore.New()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	s := &countingStore{Store: mem}
	if got, want := s.Traits().InProcess, mem.Traits().InProcess; got != want || !got {
		t.Errorf("countingStore's Traits().InProcess = %v, want %v as the memory store's", got, want)
	}
	if _, err := s.AllowAllN(context.Background(), []core.Check{{Key: "ratekit:t:{x}", Limit: core.PerMinute(1)}}, 1); err != nil {
		t.Fatal(err)
	}
	if got := s.calls.Load(); got != 1 {
		t.Errorf("calls = %d, want 1", got)
	}
}

// The three steps of an adapter, for net/http.
func Example_adapter() {
	limiter, rules := quickStart()
	// snippet:adapter
	mw, err := adapter.New(limiter, rules, adapter.Config{}) // validates the rules and the config
	if err != nil {
		log.Fatal(err)
	}
	limited := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			out := mw.Handle(adapter.HTTPRequest(r)) // 1 and 2: the request in, the outcome out
			out.Headers.SetHTTP(w.Header())          // 3: the fields, on every answer
			if out.Proceed() {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", adapter.ProblemContentType)
			w.WriteHeader(out.Status) // 429, the fail-closed status, 401, 503 or 500
			w.Write(out.Body)
		})
	}
	// snippet:end
	_ = limited
}
