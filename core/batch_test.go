package core_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
)

// TestBatchingNoScript flushes the server's script cache between calls:
// pipelined EVALSHAs answered NOSCRIPT go again by EVAL, and no call fails.
func TestBatchingNoScript(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	s := core.NewRedisStore(c, core.WithBatching(64, 2, 0))
	defer s.Close()
	ctx := context.Background()
	limit := core.PerHour(1000)
	for round := range 3 {
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var failed atomic.Int64
		for range 50 {
			wg.Go(func() {
				key := uniqueKey(t, "noscript")
				if r, err := s.AllowN(ctx, key, limit, 1); err != nil || !r.Allowed {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		if n := failed.Load(); n > 0 {
			t.Fatalf("round %d: %d of 50 calls failed after SCRIPT FLUSH", round, n)
		}
	}
}

// TestBatchingExact sends 256 goroutines at one key through one batching
// store: pipelines keep every decision atomic, so exactly the limit passes.
func TestBatchingExact(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	s := core.NewRedisStore(c, core.WithBatching(0, 0, 0))
	defer s.Close()
	for _, alg := range algorithms {
		key := uniqueKey(t, "batch-"+alg.String())
		limit := core.PerHour(500).WithAlgorithm(alg)
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range 256 {
			wg.Go(func() {
				for range 4 {
					r, err := s.AllowN(context.Background(), key, limit, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if r.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got := admitted.Load(); got != 500 {
			t.Errorf("%v: admitted %d of 1024, want 500", alg, got)
		}
	}
}

// TestBatchingClose checks that Close stops the batcher's goroutines and
// that later calls fail with ErrClosed.
func TestBatchingClose(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := core.NewRedisStore(c, core.WithBatching(0, 0, 0))
	key := uniqueKey(t, "close")
	if _, err := s.Allow(context.Background(), key, core.PerHour(10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Allow(context.Background(), key, core.PerHour(10)); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("after Close: err = %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestBatchingContextEnds sends calls whose contexts end while they queue,
// while their pipeline is in flight, or before they start: each returns
// its answer or its context's error, the calls after them still get
// answers, and Close leaves no goroutine behind.
func TestBatchingContextEnds(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := core.NewRedisStore(c, core.WithBatching(8, 2, 0))
	limit := core.PerHour(1_000_000)
	var wg sync.WaitGroup
	for i := range 128 {
		wg.Go(func() {
			key := uniqueKey(t, "ctx")
			for j := range 20 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((i+j)%7)*50*time.Microsecond)
				_, err := s.Allow(ctx, key, limit)
				cancel()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					t.Errorf("err = %v, want nil or the context's error", err)
					return
				}
			}
			if _, err := s.Allow(context.Background(), key, limit); err != nil {
				t.Errorf("after the ended contexts: %v", err)
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
