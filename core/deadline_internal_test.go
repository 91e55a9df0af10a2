package core

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type boundKey struct{}

// A pooled deadline ends at its deadline, carries its parent's values, and
// comes back from the pool unexpired whether or not it expired before.
func TestBoundCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pool sync.Pool
		const timeout = 50 * time.Millisecond
		parent := context.WithValue(context.Background(), boundKey{}, "v")
		for round := range 3 {
			at := time.Now().Add(timeout)
			c := boundTo(&pool, parent, at, timeout)
			if got, ok := c.Deadline(); !ok || !got.Equal(at) {
				t.Fatalf("round %d: deadline %v %v, want %v", round, got, ok, at)
			}
			if got := c.Value(boundKey{}); got != "v" {
				t.Fatalf("round %d: value %v, want the parent's", round, got)
			}
			if err := c.Err(); err != nil {
				t.Fatalf("round %d: fresh from the pool, Err %v", round, err)
			}
			if round == 1 { // this one expires, the others are released in time
				time.Sleep(timeout)
				synctest.Wait()
				select {
				case <-c.Done():
				default:
					t.Fatalf("round %d: not done at the deadline", round)
				}
				if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("round %d: Err %v at the deadline", round, err)
				}
			}
			c.release(&pool)
		}
	})
}
