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
			awaitCalls(t, obs, fromRedis(t, l, "before the stop")+1) // and the heartbeat

			resume := pause(t, srv)
			defer resume()
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

			resume()
			fromRedis(t, l, "after the resume")
		})
	}
}

// fromRedis reserves turns of key k until one comes from Redis, for up to
// 10 s: under -race on a loaded machine, a first call on a new connection
// may miss a short deadline. It returns how many reservations it made.
func fromRedis(t *testing.T, l *outbound.Limiter, when string) int {
	t.Helper()
	var err error
	n := 0
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
		var r *outbound.Reservation
		n++
		if r, err = l.Reserve(context.Background(), "k"); err == nil && !r.Degraded() {
			return n
		}
	}
	t.Fatalf("%s: no turn from Redis within 10 s (last error %v)", when, err)
	return n
}

// awaitCalls waits until obs has heard of n Redis calls, for up to 10 s.
// Before stopping the server, a test awaits its reservations' calls and
// the fleet's first heartbeat, which New sends from a goroutine of its
// own: on a loaded machine that heartbeat, answered before the stop, may
// report its success after the stop, among the calls the test checks.
func awaitCalls(t *testing.T, obs *callObserver, n int) {
	t.Helper()
	for start := time.Now(); obs.calls() < n; time.Sleep(time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d Redis calls reported within 10 s, want %d", obs.calls(), n)
		}
	}
}

// reserveGuarded reserves a turn of key k, and fails the test if the
// reservation does not return within a minute: a guard against a hang,
// not a measurement.
func reserveGuarded(t *testing.T, l *outbound.Limiter, ctx context.Context) (*outbound.Reservation, error) {
	t.Helper()
	r, ok, err := reserveWithin(l, ctx, time.Minute)
	if !ok {
		t.Fatal("a reservation on the stopped server did not return: the deadline was not kept")
	}
	return r, err
}

// pause stops srv (SIGSTOP) until resume, which resumes it once however
// often it is called.
func pause(t *testing.T, srv *redistest.Server) (resume func()) {
	srv.Pause(t)
	var once sync.Once
	return func() { once.Do(func() { srv.Resume(t) }) }
}

// reserveWithin reserves a turn of key k, and reports whether it returned
// within d; a goroutine other than the test's may call it.
func reserveWithin(l *outbound.Limiter, ctx context.Context, d time.Duration) (*outbound.Reservation, bool, error) {
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
		return res.r, true, res.err
	case <-time.After(d):
		return nil, false, nil
	}
}

// TestDeadlineOnStoppedRedisCrowd: reservations made at once on a stopped
// redis-server, many more than the pipelines a Limiter keeps in flight,
// so that most wait in its queue or go together in a pipeline, through
// clients whose own timeouts are an hour (one with ContextTimeoutEnabled,
// one keeping deadlines through its sockets' as the Limiter marks its
// calls, and a Cluster's with ContextTimeoutEnabled, the key's node
// stopped): each still returns, with a turn of this process's share, its
// Redis call failing with the Limiter's timeout, or by its caller's own
// earlier deadline with its error; and once the server resumes, turns
// come from Redis again.
func TestDeadlineOnStoppedRedisCrowd(t *testing.T) {
	// a client of timeouts of an hour, whose calls only their deadlines
	// can end, and the server of a key's node
	type start func(t *testing.T) (redis.Scripter, func(key string) *redistest.Server)
	single := func(opt func(*redis.Options)) start {
		return func(t *testing.T) (redis.Scripter, func(string) *redistest.Server) {
			srv := redistest.StartServer(t)
			client := srv.Client(t, func(o *redis.Options) {
				o.ReadTimeout, o.WriteTimeout, o.MaxRetries = time.Hour, time.Hour, -1
				opt(o)
			})
			return client, func(string) *redistest.Server { return srv }
		}
	}
	for _, tc := range []struct {
		name  string
		start start
	}{
		{"keeps deadlines", single(func(o *redis.Options) { o.ContextTimeoutEnabled = true })},
		{"socket timeouts", single(func(o *redis.Options) {})},
		{"cluster", func(t *testing.T) (redis.Scripter, func(string) *redistest.Server) {
			c := redistest.StartCluster(t, 3)
			client := c.Client(t, func(o *redis.ClusterOptions) {
				o.ReadTimeout, o.WriteTimeout, o.MaxRetries = time.Hour, time.Hour, -1
				o.ContextTimeoutEnabled = true
			})
			return client, func(key string) *redistest.Server { return c.MasterOf(t, key) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, serverOf := tc.start(t)
			obs := &callObserver{}
			const crowd = 64
			l, err := outbound.New(client, "crowd", outbound.Limit{Rate: 1000, Period: time.Second, Burst: 1000},
				outbound.WithTimeout(100*time.Millisecond), outbound.WithHeartbeat(time.Hour),
				outbound.WithBreaker(10*crowd, time.Hour), outbound.WithFleetSize(1), outbound.WithObserver(obs))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			awaitCalls(t, obs, fromRedis(t, l, "before the stop")+1) // and the heartbeat
			key, err := l.Key("k")
			if err != nil {
				t.Fatal(err)
			}
			srv := serverOf(key)
			resume := pause(t, srv)
			defer resume()
			before := obs.calls()
			var wg sync.WaitGroup
			for i := range crowd {
				wg.Go(func() {
					r, ok, err := reserveWithin(l, context.Background(), time.Minute)
					switch {
					case !ok:
						t.Errorf("reservation %d on the stopped server did not return: the deadline was not kept", i)
					case err != nil || !r.Degraded():
						t.Errorf("reservation %d on the stopped server: %v, or a turn from Redis; want a turn of this process's share", i, err)
					}
				})
			}
			wg.Wait()
			errs := obs.since(before)
			// at least one call a reservation
			if len(errs) < crowd {
				t.Fatalf("%d Redis calls for %d reservations on the stopped server", len(errs), crowd)
			}
			for i, err := range errs {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Redis call %d on the stopped server: %v; want the Limiter's timeout", i, err)
				}
			}
			// callers of deadlines of their own, each shorter than the
			// Limiter's and each a little later than the one before:
			// as the first give up, their slots send the calls queued
			// behind them, whose pipelines end by the latest deadline
			// among their calls
			for i := range crowd {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(10+i)*time.Millisecond)
					defer cancel()
					switch _, ok, err := reserveWithin(l, ctx, time.Minute); {
					case !ok:
						t.Errorf("caller %d on the stopped server did not return: the deadline was not kept", i)
					case !errors.Is(err, context.DeadlineExceeded):
						t.Errorf("caller %d, its own deadline first on the stopped server: %v; want its context's error", i, err)
					}
				})
			}
			wg.Wait()
			resume()
			fromRedis(t, l, "after the resume")
		})
	}
}
