package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
)

// TestQueuedCallAtItsDeadlineIsNotSent stops redis-server (SIGSTOP) while
// a call holds a batching store's only pipeline slot, with each kind of
// client: a call still queued when its context ends was never sent, and
// its error wraps core.ErrNotSent with the context's, so that a Limiter
// refunds nothing of it; once the server resumes, the key holds the units
// of the sent calls alone. A call that was sent and then cut at its
// deadline does not say so: it may have spent.
func TestQueuedCallAtItsDeadlineIsNotSent(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, kind := range []struct {
		name string
		opts []func(*redis.Options)
	}{
		{"deadlines kept by the client", []func(*redis.Options){func(o *redis.Options) { o.ContextTimeoutEnabled = true }}},
		{"go-redis defaults", nil},
	} {
		t.Run(kind.name, func(t *testing.T) {
			s := mustNew(srv.Client(t, kind.opts...), WithBatching(Batching{Parallel: 1}))
			defer s.Close()
			checks := []core.Check{{Key: "rk:unsent:{user:" + kind.name + "}", Limit: core.PerHour(10)}}
			allow := func(ctx context.Context) ([]core.Result, error) { return s.AllowAllN(ctx, checks, 1) }
			if _, err := allow(context.Background()); err != nil {
				t.Fatal(err)
			}

			srv.Pause(t)
			paused := true
			defer func() {
				if paused {
					srv.Resume(t)
				}
			}()
			// the call that takes the only slot, sent into the stopped server
			sent := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, err := allow(ctx)
				sent <- err
			}()
			s.waitInflight(t, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, err := allow(ctx)
			cancel()
			if !errors.Is(err, core.ErrNotSent) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a call queued behind a stopped server at its deadline: %v; want core.ErrNotSent and context.DeadlineExceeded", err)
			}
			srv.Resume(t)
			paused = false
			if err := <-sent; err != nil {
				t.Fatalf("the call sent before the stop, once the server resumed: %v", err)
			}
			s.waitInflight(t, 0)

			// a call cut at its deadline once sent
			srv.Pause(t)
			paused = true
			ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, err = allow(ctx)
			cancel()
			if err == nil || errors.Is(err, core.ErrNotSent) {
				t.Errorf("a call sent into a stopped server, at its deadline: %v; want an error that does not say it was not sent", err)
			}
			srv.Resume(t)
			paused = false
			s.waitInflight(t, 0)

			res, err := allow(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// 10 less the first call, the one held in the slot, the one
			// cut once sent, and this one
			if res[0].Remaining != 6 {
				t.Errorf("the key holds %d of 10 after four sent calls and one queued, want 6: the queued call spent nothing", res[0].Remaining)
			}
		})
	}
}

// waitInflight waits up to 10 s for n pipelines of s to be in flight.
func (s *Store) waitInflight(t *testing.T, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.batch.mu.Lock()
		inflight := s.batch.inflight
		s.batch.mu.Unlock()
		if inflight == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d pipelines in flight after 10 s, want %d", inflight, n)
		}
	}
}
