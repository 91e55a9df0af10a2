package otellimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/memorystore"
)

// failingStore is a core.Store and nothing more: it states no traits, so
// a Limiter puts its deadline, breaker and failure policy in front of it.
// It fails as told, and otherwise decides in a memorystore.Store.
type failingStore struct {
	mem *memorystore.Store

	mu   sync.Mutex
	err  error         // the error of every call, while set
	hang bool          // calls give no answer before their deadline
	gate chan struct{} // while set, calls wait for it to close
}

func newFailingStore(t *testing.T) *failingStore {
	return &failingStore{mem: adaptertest.NewMemoryStore(t, adaptertest.NewClock())}
}

// fail makes calls fail with err, or succeed for nil.
func (s *failingStore) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err, s.hang = err, false
}

// stall makes calls wait for their deadline.
func (s *failingStore) stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err, s.hang = nil, true
}

// hold makes calls wait until release.
func (s *failingStore) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
}

func (s *failingStore) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate)
	s.gate = nil
}

func (s *failingStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.mu.Lock()
	err, hang := s.err, s.hang
	s.mu.Unlock()
	switch {
	case hang:
		<-ctx.Done()
		return nil, ctx.Err()
	case err != nil:
		return nil, err
	}
	return s.mem.AllowAllN(ctx, checks, n)
}

// redisReply is an error Redis answered with, as go-redis reports one.
type redisReply string

func (e redisReply) Error() string { return string(e) }
func (redisReply) RedisError()     {}

// Failed store calls count by kind and time their failure; the failure
// policy decides, degraded. In a synctest bubble, time moves only while
// every goroutine waits: the calls that fail at once take no time, and
// the one that hangs exactly the deadline.
func TestStoreErrorsByKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFailingStore(t)
		o, reader := newObserver(t)
		// a breaker that never opens: every check calls the store
		l := adaptertest.NewLimiterOver(t, s, core.WithObserver(o), core.WithTimeout(20*time.Millisecond),
			core.WithBreaker(core.BreakerConfig{Failures: 1000}))
		api := rule("api", core.PerMinute(100), "user:1")
		for _, err := range []error{
			redisReply("LOADING Redis is loading the dataset in memory"),
			redisReply("BUSY Redis is busy running a script"),
			&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")},
			fmt.Errorf("reply: %w", core.ErrMalformedReply),
			core.ErrClosed,
			errors.New("out of luck"),
		} {
			s.fail(err)
			if got := checkN(t, l, 1, api); got != 1 {
				t.Fatalf("store error %v: denied, want a local decision that allows", err)
			}
		}
		s.stall()
		checkN(t, l, 1, api)
		s.fail(nil)
		checkN(t, l, 1, api)
		expect(t, reader, decisionPoints("api", [6]int{1, 0, 0, 7, 0, 0})+`
			ratekit.store.errors{kind=closed} 1
			ratekit.store.errors{kind=connection} 1
			ratekit.store.errors{kind=malformed} 1
			ratekit.store.errors{kind=other} 1
			ratekit.store.errors{kind=redis} 2
			ratekit.store.errors{kind=timeout} 1
			ratekit.store.duration{result=error} count=7 sum=0.02
			ratekit.store.duration{result=ok} count=1 sum=0
		`+breakerClosed, "ratekit.store.errors", "ratekit.store.duration", "ratekit.decisions", "ratekit.breaker.state")
	})
}

// The breaker's gauge follows it through every state: open at the first
// failure, sparing the store; half-open during each probe; open again
// when a probe fails, and closed when one succeeds.
func TestBreakerTransitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newFailingStore(t)
		o, reader := newObserver(t)
		// opens at the first failure; probes within a second; a deadline
		// that outlasts the test, so a held probe waits for release
		l := adaptertest.NewLimiterOver(t, s, core.WithObserver(o), core.WithFailurePolicy(core.FailClosed), core.WithTimeout(time.Hour),
			core.WithBreaker(core.BreakerConfig{Failures: 1, Backoff: time.Second, MaxBackoff: time.Second}))
		api := rule("api", core.PerMinute(100), "user:1")
		state := func(want string) {
			t.Helper()
			synctest.Wait()
			expect(t, reader, want, "ratekit.breaker.state")
		}
		s.fail(errors.New("down"))
		for range 3 {
			d, err := l.Check(context.Background(), request(), []core.Rule{api})
			if !errors.Is(err, core.ErrUnavailable) || d.Allowed {
				t.Fatalf("decision %+v, %v; want a fail-closed denial", d, err)
			}
		}
		state(breakerOpen)
		expect(t, reader, decisionPoints("api", [6]int{0, 0, 0, 0, 3, 0})+`
			ratekit.store.errors{kind=other} 1
			ratekit.store.duration{result=error} count=1 sum=0
		`, "ratekit.store.errors", "ratekit.store.duration", "ratekit.decisions")

		for _, recovers := range []bool{false, true} {
			s.hold()
			time.Sleep(time.Second) // the probe is due: it waits in the store
			state(breakerHalfOpen)
			if recovers {
				s.fail(nil)
			}
			s.release()
			if recovers {
				state(breakerClosed)
			} else {
				state(breakerOpen)
			}
		}
		expect(t, reader, `
			ratekit.store.errors{kind=other} 2
		`, "ratekit.store.errors")
		if p := histogram(t, reader, "ratekit.store.duration", attribute.String("result", "ok")); p.Count != 1 {
			t.Errorf("%d successful calls, want 1: the last probe", p.Count)
		}
		if got := checkN(t, l, 1, api); got != 1 {
			t.Errorf("denied once the breaker closed")
		}
	})
}

const (
	breakerClosed = `
		ratekit.breaker.state{state=closed} 1
		ratekit.breaker.state{state=half-open} 0
		ratekit.breaker.state{state=open} 0`
	breakerOpen = `
		ratekit.breaker.state{state=closed} 0
		ratekit.breaker.state{state=half-open} 0
		ratekit.breaker.state{state=open} 1`
	breakerHalfOpen = `
		ratekit.breaker.state{state=closed} 0
		ratekit.breaker.state{state=half-open} 1
		ratekit.breaker.state{state=open} 0`
)
