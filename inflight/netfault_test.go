package inflight_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/netfault"
	"github.com/ratekit/ratekit/internal/redistest"
)

// The network-fault tests put toxiproxy (in this process) between
// go-redis and a real redis-server, and add latency to Redis's replies.

// recommended configures a client as WithTimeout advises.
func recommended(o *redis.Options) {
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DialTimeout = time.Second
	o.ReadTimeout = time.Second
	o.WriteTimeout = time.Second
}

// faultRun is a Limiter over a client whose connections go through a
// proxy to a real redis-server, and a client straight to that server.
type faultRun struct {
	proxy  *netfault.Proxy
	l      *inflight.Limiter
	direct *redis.Client

	mu   sync.Mutex
	errs []error // told to OnError
}

// startFaultRun starts a redis-server, a proxy to it and a Limiter with
// opts over a client through the proxy configured by clientOpts.
func startFaultRun(t *testing.T, clientOpts func(*redis.Options), opts ...inflight.Option) *faultRun {
	t.Helper()
	srv := redistest.StartServer(t)
	r := &faultRun{proxy: netfault.Start(t, srv.Addr()), direct: srv.Client(t)}
	o := &redis.Options{Addr: r.proxy.Addr()}
	if clientOpts != nil {
		clientOpts(o)
	}
	client := redis.NewClient(o)
	t.Cleanup(func() { client.Close() })
	opts = append(opts, inflight.OnError(func(err error) {
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
	}))
	l, err := inflight.New(client, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() }) // before the client's and the proxy's cleanups
	r.l = l
	return r
}

// errors returns what OnError was told.
func (r *faultRun) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// acquireAll takes one slot of each of keys under a cap of 1, a few at
// once, and fails the test unless Redis grants every one.
func acquireAll(t *testing.T, l *inflight.Limiter, keys []string) []*inflight.Lease {
	t.Helper()
	leases := make([]*inflight.Lease, len(keys))
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				le, res, err := l.Acquire(context.Background(), keys[i], 1)
				if err != nil || !res.Allowed || res.Degraded {
					t.Errorf("Acquire(%s): %+v, %v: want a slot granted by Redis", keys[i], res, err)
				}
				leases[i] = le
			}
		})
	}
	for i := range keys {
		work <- i
	}
	close(work)
	wg.Wait()
	return leases
}

// TestRenewalUnderLatency holds one slot of each of 200 keys under a cap
// of 1, with 4 ms added to every reply of Redis and a lease of 400 ms,
// for four lease times: renewal keeps every lease, so a second Limiter,
// straight to Redis, finds every key full. A hold during which this
// process or redis-server stalled for half a lease (a loaded machine)
// proves nothing either way, and is tried again, at most three times.
func TestRenewalUnderLatency(t *testing.T) {
	const (
		keys  = 200
		lease = 400 * time.Millisecond
	)
	r := startFaultRun(t, recommended, inflight.WithLease(lease), inflight.WithTimeout(time.Second))
	r.proxy.Inject(t, netfault.Latency(4*time.Millisecond, 0))
	other, err := inflight.New(r.direct)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for attempt := range 3 {
		names := make([]string, keys)
		for i := range names {
			names[i] = fmt.Sprintf("ratekit:busy%d:{%d}", attempt, i)
		}
		watch := watchStalls(r.direct)
		start := time.Now()
		leases := acquireAll(t, r.l, names)
		took := time.Since(start)
		time.Sleep(4 * lease) // the renewals, not the test, must keep up
		stalled := watch.stop()
		admitted, lost := 0, 0
		for i, name := range names {
			if leases[i].Lost() {
				lost++
			}
			le, res, err := other.Acquire(context.Background(), name, 1)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				admitted++
				_ = le.Release(context.Background())
			}
		}
		for _, le := range leases {
			_ = le.Release(context.Background())
		}
		t.Logf("%d keys acquired in %v, held four lease times of %v at 4 ms a reply (longest stall %v): %d leases lost, %d keys admitted a second request; errors: %v",
			keys, took.Round(time.Millisecond), lease, stalled.Round(time.Millisecond), lost, admitted, r.errors())
		switch {
		case lost == 0 && admitted == 0:
			return
		case stalled < lease/2:
			t.Fatalf("%d of %d leases lost and %d keys over their cap of 1: want none", lost, keys, admitted)
		}
	}
	t.Fatal("every hold stalled for half a lease or more: the machine is too loaded to tell")
}

// stallWatch records the longest stall of this process (a sleep of 2 ms
// that overslept) and of redis-server (a PING's round trip) while it runs.
type stallWatch struct {
	done    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	longest time.Duration
}

func watchStalls(rdb *redis.Client) *stallWatch {
	w := &stallWatch{done: make(chan struct{})}
	note := func(d time.Duration) {
		w.mu.Lock()
		w.longest = max(w.longest, d)
		w.mu.Unlock()
	}
	loop := func(step func() time.Duration) {
		w.wg.Go(func() {
			for {
				select {
				case <-w.done:
					return
				default:
				}
				note(step())
			}
		})
	}
	loop(func() time.Duration {
		from := time.Now()
		time.Sleep(2 * time.Millisecond)
		return time.Since(from) - 2*time.Millisecond
	})
	loop(func() time.Duration {
		from := time.Now()
		_ = rdb.Ping(context.Background()).Err()
		time.Sleep(2 * time.Millisecond)
		return time.Since(from) - 2*time.Millisecond
	})
	return w
}

// stop ends the watch and returns the longest stall.
func (w *stallWatch) stop() time.Duration {
	close(w.done)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.longest
}

// TestLateAcquireReleased sends acquisitions of one key under a cap of 2
// for 250 ms while every reply of Redis comes 60 to 100 ms late, past the
// 50 ms deadline: each goes to the failure policy, but took a slot in
// Redis all the same. With a client as WithTimeout advises (the call on
// the request's goroutine) and with go-redis defaults (on a goroutine of
// its own), those slots are given back once the replies are late, not
// when their lease runs out a minute later: the key is empty soon after
// the spike, and the next request is admitted.
func TestLateAcquireReleased(t *testing.T) {
	for _, kind := range []struct {
		name string
		opts func(*redis.Options)
	}{
		{"recommended-client", recommended},
		{"default-client", nil},
	} {
		t.Run(kind.name, func(t *testing.T) {
			r := startFaultRun(t, kind.opts, inflight.WithLease(time.Minute))
			const key = "ratekit:late:{k}"
			ctx := context.Background()
			le, _, err := r.l.Acquire(ctx, key, 2) // a connection, and the script cached
			if err != nil || le == nil {
				t.Fatalf("warm-up: %v, %v", le, err)
			}
			if err := le.Release(ctx); err != nil {
				t.Fatal(err)
			}
			late := netfault.Latency(80*time.Millisecond, 20*time.Millisecond)
			r.proxy.Inject(t, late)
			degraded := 0
			for start := time.Now(); time.Since(start) < 250*time.Millisecond; {
				le, res, err := r.l.Acquire(ctx, key, 2)
				if err != nil {
					t.Fatal(err)
				}
				if res.Degraded {
					degraded++
				}
				_ = le.Release(ctx) // a local slot, given back where it was taken
			}
			r.proxy.Lift(t, late)
			if degraded == 0 {
				t.Fatal("no acquisition missed its deadline: the test proves nothing")
			}
			// an abandoned call of the default client may still land after
			// the key looks empty, and is given back in its turn: what
			// matters is that a request is admitted by Redis soon, not when
			// the leases of the late slots run out a minute later
			var (
				held int64
				res  inflight.Result
			)
			for wait := time.Now(); ; time.Sleep(10 * time.Millisecond) {
				held = r.direct.ZCard(ctx, key).Val()
				le, res, err = r.l.Acquire(ctx, key, 2)
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed && !res.Degraded || time.Since(wait) > 5*time.Second {
					break
				}
				_ = le.Release(ctx)
			}
			t.Logf("%d acquisitions missed the deadline; slots held in Redis before the admission: %d", degraded, held)
			if !res.Allowed || res.Degraded {
				t.Fatalf("5s after the spike: %+v, %d slots held; want a slot from Redis, the late slots given back (lease 1m)", res, held)
			}
			_ = le.Release(ctx)
		})
	}
}
