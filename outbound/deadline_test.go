package outbound_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/outbound"
)

// callObserver records the errors of the Redis calls RedisCalled reports.
type callObserver struct {
	debugObserver
	mu   sync.Mutex
	errs []error
}

func (o *callObserver) RedisCalled(_ string, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs = append(o.errs, err)
}

// since returns the errors reported after the first n calls.
func (o *callObserver) since(n int) []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.errs[n:]...)
}

func (o *callObserver) calls() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.errs)
}

// TestDeadlineOnStoppedRedis stops redis-server (SIGSTOP) under a Limiter,
// over a client that keeps deadlines (the quick start's, whose calls take
// a pooled deadline) and over go-redis's defaults (whose calls run on a
// goroutine of their own, abandoned at the deadline). Each reservation
// still returns while the server is stopped, its Redis call failing with
// the Limiter's timeout; a caller's earlier deadline ends the call first,
// with the caller's own error; and once the server resumes, turns come
// from Redis again.
func TestDeadlineOnStoppedRedis(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  func(*redis.Options)
	}{
		{"keeps deadlines", func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries = true, -1 }},
		{"defaults", func(o *redis.Options) { o.ReadTimeout = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartServer(t)
			client := srv.Client(t, tc.opt)
			obs := &callObserver{}
			l, err := outbound.New(client, "stall", outbound.Limit{Rate: 1000, Period: time.Second, Burst: 1000},
				outbound.WithTimeout(100*time.Millisecond), outbound.WithHeartbeat(time.Hour),
				outbound.WithBreaker(100, time.Hour), outbound.WithFleetSize(1), outbound.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			ctx := context.Background()
			fromRedis(t, l, "before the stop")

			srv.Pause(t)
			stopped := true
			defer func() {
				if stopped {
					srv.Resume(t)
				}
			}()
			before := obs.calls()
			for i := range 3 {
				r, err := reserveGuarded(t, l, ctx)
				if err != nil || !r.Degraded() {
					t.Fatalf("reservation %d on the stopped server: %v, or a turn from Redis; want a turn of this process's share", i, err)
				}
			}
			errs := obs.since(before)
			if len(errs) < 3 {
				t.Fatalf("%d Redis calls for 3 reservations on the stopped server: %v", len(errs), errs)
			}
			for i, err := range errs {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Redis call %d on the stopped server: %v; want the Limiter's timeout", i, err)
				}
			}

			// a caller whose own deadline comes first ends the call by it,
			// whichever of go-redis's read and the context's timer sees it
			// first (the one or the other, from run to run)
			for i := range 5 {
				short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				before = obs.calls()
				_, err := reserveGuarded(t, l, short)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("caller %d, its 20 ms deadline first on the stopped server: %v; want its context's error", i, err)
				}
				if errs := obs.since(before); len(errs) != 1 || errs[0] == nil {
					t.Errorf("caller %d: its Redis calls reported %v; want one failure", i, errs)
				}
			}

			srv.Resume(t)
			stopped = false
			fromRedis(t, l, "after the resume")
		})
	}
}

// fromRedis reserves turns of key k until one comes from Redis, for up to
// 10 s: under -race on a loaded machine, a first call on a new connection
// may miss a short deadline.
func fromRedis(t *testing.T, l *outbound.Limiter, when string) {
	t.Helper()
	var err error
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
		var r *outbound.Reservation
		if r, err = l.Reserve(context.Background(), "k"); err == nil && !r.Degraded() {
			return
		}
	}
	t.Fatalf("%s: no turn from Redis within 10 s (last error %v)", when, err)
}

// reserveGuarded reserves a turn of key k, and fails the test if the
// reservation does not return within a minute: a guard against a hang,
// not a measurement.
func reserveGuarded(t *testing.T, l *outbound.Limiter, ctx context.Context) (*outbound.Reservation, error) {
	t.Helper()
	type result struct {
		r   *outbound.Reservation
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := l.Reserve(ctx, "k")
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		return res.r, res.err
	case <-time.After(time.Minute):
		t.Fatal("a reservation on the stopped server did not return: the deadline was not kept")
		return nil, nil
	}
}
