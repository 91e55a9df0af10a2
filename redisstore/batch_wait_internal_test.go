package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
)

// TestBatchingWithWaitGivesSlotsBack runs 32 goroutines through a batching
// store that holds each pipeline open for MaxWait: callers that wake to
// find their calls sent by others give their slot back, so afterwards no
// slot is taken, every call was answered, and Close returns with no
// goroutine left behind. Some callers give up early (their context ends
// during the wait), which must not leak a slot either.
//
// It runs over a *redis.Client, where callers send pipelines, and over a
// Ring without ContextTimeoutEnabled, where the store's senders do.
func TestBatchingWithWaitGivesSlotsBack(t *testing.T) {
	srv := redistest.StartServer(t)
	t.Run("callers lead", func(t *testing.T) {
		slotsComeBack(t, srv.Client(t), false)
	})
	t.Run("senders", func(t *testing.T) {
		ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr()}})
		t.Cleanup(func() { ring.Close() })
		slotsComeBack(t, ring, true)
	})
}

// slotsComeBack is TestBatchingWithWaitGivesSlotsBack over client, whose
// store's pipelines go out from senders if senders is set.
func slotsComeBack(t *testing.T, client interface {
	redis.Scripter
	Ping(context.Context) *redis.StatusCmd
}, senders bool) {
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	// the server's process and the client's pool are the test's own
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := mustNew(client, WithBatching(Batching{MaxBatch: 16, Parallel: 4, MaxWait: time.Millisecond}))
	if s.batch.senders != senders {
		t.Fatalf("pipelines sent by senders %v, want %v", s.batch.senders, senders)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			for i := range 50 {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				short := (g+i)%10 == 0
				if short {
					// gives up during the wait, or soon after: its call may
					// fail, from the context or from a socket deadline set
					// from it
					ctx, cancel = context.WithTimeout(ctx, 200*time.Microsecond)
				}
				_, err := s.AllowAllN(ctx, []core.Check{{Key: fmt.Sprintf("rk:w:{user:%d}", g), Limit: core.PerMinute(10_000)}}, 1)
				if err != nil && !short {
					errs <- err
				}
				cancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a call failed: %v", err)
	}
	// a caller that gave up has returned, but the pipeline its call went
	// in may still be in flight, held by a sender or by the goroutine that
	// took over its lead: the slots come back once those pipelines do,
	// and a leaked slot never does
	var inflight, pending, sending int
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.batch.mu.Lock()
		inflight, pending, sending = s.batch.inflight, len(s.batch.pending), s.batch.sending
		s.batch.mu.Unlock()
		if inflight == 0 && pending == 0 && sending == 0 || time.Now().After(end) {
			break
		}
	}
	if inflight != 0 || pending != 0 || sending != 0 {
		t.Fatalf("%d slots taken, %d calls queued and %d counted in pipelines 10s after all callers returned, want none", inflight, pending, sending)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}

// TestBatchingWaitHonoursContext: a caller whose context ends while its
// pipeline is held open for MaxWait returns by its deadline, not after the
// wait.
func TestBatchingWaitHonoursContext(t *testing.T) {
	srv := redistest.StartServer(t)
	s := mustNew(srv.Client(t), WithBatching(Batching{MaxWait: time.Hour}))
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.AllowAllN(ctx, []core.Check{{Key: "rk:w:{user:1}", Limit: core.PerMinute(10)}}, 1)
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a caller waited out MaxWait past its context")
	}
}
