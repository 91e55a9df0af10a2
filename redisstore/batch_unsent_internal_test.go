package redisstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// TestQueuedCallAtItsDeadlineIsNotSent stops redis-server (SIGSTOP) while
// a call holds a batching store's only pipeline slot, with each kind of
// client: a call still queued when its context ends was never sent, and
// its error wraps core.ErrNotSent with the context's, so that a Limiter
// refunds nothing of it; once the server resumes, the key holds the units
// of the sent calls alone. A call that was sent and then cut at its
// deadline does not say so: it may have spent. Each runs with a caller's
// context and with a Limiter's pooled deadline, which the batch keeps:
// the queued call returns at its own deadline, while the call in flight
// still waits for the server.
func TestQueuedCallAtItsDeadlineIsNotSent(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, kind := range stoppedClientKinds {
		for _, dl := range deadlineKinds {
			t.Run(kind.name+"/"+dl.name, func(t *testing.T) { queuedCallAtItsDeadline(t, srv, kind.name+"/"+dl.name, kind.opts, dl.within) })
		}
	}
}

// deadlineKinds are the two ways a call's deadline comes to the store: a
// caller's context of its own, which a batched call selects on, and a
// Limiter's pooled one, which cannot be cancelled and whose deadline the
// batch keeps (batchCall.until).
var deadlineKinds = []struct {
	name   string
	within func(time.Duration) (context.Context, context.CancelFunc)
}{
	{"the caller's context", func(d time.Duration) (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), d)
	}},
	{"a pooled deadline", func(d time.Duration) (context.Context, context.CancelFunc) {
		var pool tickctx.Pool
		ctx, pc := pool.Within(context.Background(), d)
		return ctx, func() { pool.Put(pc) }
	}},
}

func queuedCallAtItsDeadline(t *testing.T, srv *redistest.Server, name string, opts []func(*redis.Options), within func(time.Duration) (context.Context, context.CancelFunc)) {
	s := mustNew(srv.Client(t, opts...), WithBatching(Batching{Parallel: 1}))
	defer s.Close()
	checks := []core.Check{{Key: "rk:unsent:{user:" + name + "}", Limit: core.PerHour(10)}}
	allow := func(ctx context.Context) ([]core.Result, error) { return s.AllowAllN(ctx, checks, 1) }
	if _, err := allow(context.Background()); err != nil {
		t.Fatal(err)
	}
	// the caller has its answer before the sender frees the slot:
	// a slot still taken would pass for the next call's below
	s.waitInflight(t, 0)

	resume := pause(t, srv)
	defer resume()
	// the call that takes the only slot, sent into the stopped server
	sent := inBackground(func(ctx context.Context) error { _, err := allow(ctx); return err })
	s.waitInflight(t, 1)
	ctx, cancel := within(50 * time.Millisecond)
	_, err := allow(ctx)
	cancel()
	if !errors.Is(err, core.ErrNotSent) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call queued behind a stopped server at its deadline: %v; want core.ErrNotSent and context.DeadlineExceeded", err)
	}
	select {
	case err := <-sent:
		// the call in flight keeps a minute's deadline
		t.Fatalf("the queued call returned only once the call in flight had (%v): not at its own deadline", err)
	default:
	}
	resume()
	if err := <-sent; err != nil {
		t.Fatalf("the call sent before the stop, once the server resumed: %v", err)
	}
	s.waitInflight(t, 0)

	// a call cut at its deadline once sent
	resume = pause(t, srv)
	defer resume()
	ctx, cancel = within(50 * time.Millisecond)
	_, err = allow(ctx)
	cancel()
	if err == nil || errors.Is(err, core.ErrNotSent) {
		t.Errorf("a call sent into a stopped server, at its deadline: %v; want an error that does not say it was not sent", err)
	}
	resume()
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
}

// TestRefundHoldsNoDecisionSlot stops redis-server (SIGSTOP) while a
// refund waits for its answer in a batching store of one pipeline slot,
// with each kind of client: a decision made meanwhile is still sent (at
// its deadline its error does not wrap core.ErrNotSent), because peeks and
// refunds have slots of their own. Once the server resumes, the key holds
// the units of every call that was sent, the decision's among them.
func TestRefundHoldsNoDecisionSlot(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, kind := range stoppedClientKinds {
		t.Run(kind.name, func(t *testing.T) {
			client := srv.Client(t, kind.opts...)
			s := mustNew(client, WithBatching(Batching{Parallel: 1}))
			defer s.Close()
			checks := []core.Check{{Key: "rk:slots:{user:" + kind.name + "}", Limit: core.PerHour(10)}}
			for range 2 {
				if _, err := s.AllowAllN(context.Background(), checks, 1); err != nil {
					t.Fatal(err)
				}
			}
			// two connections in the pool, each past its handshake, so that
			// neither the refund nor the decision meets a handshake that
			// the stopped server would hold before anything is sent
			var conns [2]*redis.Conn
			for i := range conns {
				conns[i] = client.Conn()
				if err := conns[i].Ping(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range conns {
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			}
			s.waitInflight(t, 0) // see TestQueuedCallAtItsDeadlineIsNotSent

			resume := pause(t, srv)
			defer resume()
			refunded := inBackground(func(ctx context.Context) error { _, err := s.RefundAllN(ctx, checks, 1); return err })
			s.waitInflight(t, 1)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			_, err := s.AllowAllN(ctx, checks, 1)
			cancel()
			if err == nil || errors.Is(err, core.ErrNotSent) {
				t.Errorf("a decision made while a refund waits on a stopped server, at its deadline: %v; want it sent, so an error that does not wrap core.ErrNotSent", err)
			}
			resume()
			if err := <-refunded; err != nil {
				t.Fatalf("the refund sent before the stop, once the server resumed: %v", err)
			}
			s.waitInflight(t, 0)

			res, err := s.AllowAllN(context.Background(), checks, 1)
			if err != nil {
				t.Fatal(err)
			}
			// 10 less two calls, the decision cut once sent and this one,
			// and one refunded
			if res[0].Remaining != 7 {
				t.Errorf("the key holds %d of 10 after four decisions sent and one refund, want 7", res[0].Remaining)
			}
		})
	}
}

// stoppedClientKinds are the clients the stopped-server tests run a
// store over: one that keeps deadlines on the socket, where callers send
// pipelines, and go-redis's defaults, where the store's senders do.
var stoppedClientKinds = []struct {
	name string
	opts []func(*redis.Options)
}{
	{"deadlines kept by the client", []func(*redis.Options){func(o *redis.Options) { o.ContextTimeoutEnabled = true }}},
	{"go-redis defaults", nil},
}

// pause stops srv (SIGSTOP) and returns a function that resumes it, once
// however often it is called: the test calls it when the server is to
// come back, and defers it too, so that a test that fails meanwhile leaves
// no server stopped.
func pause(t *testing.T, srv *redistest.Server) (resume func()) {
	srv.Pause(t)
	var once sync.Once
	return func() { once.Do(func() { srv.Resume(t) }) }
}

// inBackground runs call on a goroutine of its own, with a minute's
// deadline (a call sent into a stopped server waits for it to resume),
// and returns the channel its error comes on.
func inBackground(call func(context.Context) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- call(ctx)
	}()
	return done
}

// waitInflight waits up to 10 s for n pipelines of s, decisions' and
// quota calls' together, to be in flight.
func (s *Store) waitInflight(t *testing.T, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		inflight := 0
		for _, b := range []*batcher{s.batch, s.quotas} {
			b.mu.Lock()
			inflight += b.inflight
			b.mu.Unlock()
		}
		if inflight == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d pipelines in flight after 10 s, want %d", inflight, n)
		}
	}
}
