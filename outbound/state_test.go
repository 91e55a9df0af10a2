package outbound_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/outbound"
)

// rateObserver records the rates RateChanged reports.
type rateObserver struct {
	debugObserver
	mu    sync.Mutex
	rates []float64
}

func (o *rateObserver) RateChanged(_ string, r float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rates = append(o.rates, r)
}

func (o *rateObserver) last() float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.rates) == 0 {
		return 0
	}
	return o.rates[len(o.rates)-1]
}

// TestAIMDKeepsFractionalRate holds the key's stored state to the rate it
// was lowered to, fraction and all, on a real redis-server: 10/s lowered by
// 0.75 is 7.5/s, which the next reservation reads back and spaces turns
// by (1/7.5 s), where a rate written as a whole number would read 7/s.
// The integers of the state are written in a format of their own (see
// state.lua), and this is the case that needs the other.
func TestAIMDKeepsFractionalRate(t *testing.T) {
	srv := redistest.StartServer(t)
	client := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries = true, -1 })
	obs := &rateObserver{}
	l, err := outbound.New(client, "aimd", outbound.Limit{Rate: 10, Period: time.Second, Burst: 1},
		outbound.WithMargin(0), outbound.WithHeartbeat(time.Hour), outbound.WithObserver(obs),
		outbound.WithAIMD(outbound.AIMD{Decrease: 0.75, Increase: 1, Hold: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.Reserve(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := l.Refused(ctx, "k", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// the next reservations read the lowered rate back from the key
	for i := range 2 {
		r, err := l.Reserve(ctx, "k")
		if err != nil || r.Degraded() {
			t.Fatalf("reservation %d: degraded %v, %v", i, r.Degraded(), err)
		}
		if got := obs.last(); math.Abs(got-7.5) > 0.01 {
			t.Fatalf("reservation %d after the refusal: rate %.4f/s, want 7.5/s (rates seen %v)", i, got, obs.rates)
		}
	}
}
