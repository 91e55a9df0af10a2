package core_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
)

// ringMovedWithin bounds the time from a Ring server's death to the ring
// hashing its keys to the other server: three failed heartbeats, 500 ms
// apart, with room for a busy machine.
const ringMovedWithin = 15 * time.Second

// TestRingServerDown kills one of the two servers of a *redis.Ring under
// traffic on keys of both: the other server's keys are never decided
// without Redis, no decision waits past the deadline, and the dead
// server's keys are decided by Redis again, on the other server, soon
// after the ring's heartbeat marks it down.
func TestRingServerDown(t *testing.T) {
	dead, alive := redistest.StartServer(t), redistest.StartServer(t)
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:                 map[string]string{"dead": dead.Addr(), "alive": alive.Addr()},
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
	})
	t.Cleanup(func() { _ = ring.Close() })
	servedBy := func(key string) string {
		c, err := ring.GetShardClientForKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return c.Options().Addr
	}
	f := newFailover(t, testkit.MustRedis(ring))
	f.identities(true, func(key string) bool { return servedBy(key) == dead.Addr() })
	movingKey, err := f.l.StorageKey("default", f.moving[0])
	if err != nil {
		t.Fatal(err)
	}

	f.warmUp()
	f.failed.Store(0)
	stalls := watchStalls()
	defer stalls.close()
	stop := make(chan struct{})
	wg := f.traffic(stop)
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	dead.Kill(t)
	for servedBy(movingKey) != alive.Addr() {
		if time.Since(killed) > ringMovedWithin {
			close(stop)
			wg.Wait()
			t.Fatalf("the ring still sends keys to the dead server %v after the kill", ringMovedWithin)
		}
		time.Sleep(5 * time.Millisecond)
	}
	moved := time.Now()
	for time.Since(moved) < failoverBack && f.lastGood.Load() < moved.UnixNano() {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // some traffic on the keys moved
	close(stop)
	wg.Wait()

	f.checkOutcomes(stalls, killed)
	back := time.Unix(0, f.lastGood.Load())
	for _, o := range f.outcomes {
		if o.moving && o.err == nil && !o.degraded && o.at.After(moved) && o.at.Add(o.took).Before(back) {
			back = o.at.Add(o.took)
		}
	}
	t.Logf("the ring moved the dead server's keys %v after the kill; first decision by Redis %v after that",
		moved.Sub(killed).Round(time.Millisecond), back.Sub(moved).Round(time.Millisecond))
	if back.Before(moved) {
		t.Fatalf("no decision on the dead server's keys came from Redis within %v of the ring moving them", failoverBack)
	}
	if n := f.failed.Load(); n > maxFailedCalls {
		t.Errorf("%d store calls failed, want at most %d: the breaker did not spare the dead server", n, maxFailedCalls)
	} else {
		t.Logf("%d store calls failed", n)
	}
}
