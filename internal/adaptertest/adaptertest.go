// Package adaptertest proves the framework adapters (nethttp, ginlimit,
// echolimit, fiberlimit) against the behaviour they share. [Run] is the
// suite: each adapter's tests call it once with a [Harness] that builds its
// framework's app, and keep only what is their framework's own. The
// package also holds the fixtures those tests share: a clock stepped by
// hand, a limiter over a memory store that reads it, stores that fail or
// watch their context, and the rules the tests limit with.
package adaptertest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
)

// T0 is where every Clock starts: 30 seconds into a minute, so that a
// fixed window of one minute has 30 seconds left.
var T0 = time.Unix(1_700_000_010, 0)

// Clock is a clock that moves only when told to. It is safe for concurrent
// use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock at T0.
func NewClock() *Clock { return &Clock{now: T0} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// NewLimiter returns a Limiter over a fresh memory store that reads the
// returned Clock. Both are closed when the test ends.
func NewLimiter(tb testing.TB, opts ...core.Option) (*core.Limiter, *Clock) {
	tb.Helper()
	clock := NewClock()
	return NewLimiterOver(tb, NewMemoryStore(tb, clock), opts...), clock
}

// NewMemoryStore returns a memory store that reads clock, closed when the
// test ends.
func NewMemoryStore(tb testing.TB, clock *Clock) *memorystore.Store {
	tb.Helper()
	store, err := memorystore.New(memorystore.WithClock(clock.Now))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	return store
}

// NewLimiterOver returns a Limiter over store, closed when the test ends.
func NewLimiterOver(tb testing.TB, store core.Store, opts ...core.Option) *core.Limiter {
	tb.Helper()
	l, err := core.NewLimiter(store, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// ClientHeader names the request header whose value is the client's
// identity in these tests.
const ClientHeader = "X-Client"

// ClientKey returns the identity "header:X-Client:<value>", or an error
// wrapping core.ErrNoIdentity when the header is missing. Unlike an IP, it
// reads the same under every framework's test helpers.
func ClientKey() core.KeyFunc {
	k, err := keyfuncs.Header(ClientHeader)
	if err != nil {
		panic(err)
	}
	return k
}

// FixedRule returns a rule of rate per minute in fixed windows keyed by
// ClientKey: at T0, n requests leave rate-n and reset in 30s.
func FixedRule(name string, rate int) core.Rule {
	return core.Rule{
		Name:  name,
		Limit: core.Limit{Rate: rate, Period: time.Minute, Algorithm: core.FixedWindow},
		Key:   ClientKey(),
	}
}

// ErrStoreDown is the error of a FailingStore.
var ErrStoreDown = errors.New("adaptertest: store down")

// FailingStore is a store whose every call fails with ErrStoreDown. It
// states no traits, so a Limiter applies its failure policy to it.
type FailingStore struct{}

// AllowAllN implements core.Store.
func (FailingStore) AllowAllN(context.Context, []core.Check, int) ([]core.Result, error) {
	return nil, ErrStoreDown
}

// ContextKey is the context key whose value a ContextStore records.
type ContextKey struct{}

// ContextStore is a store that records the ContextKey value of the context
// of its last call, then defers to Store, whose traits it states as its
// own.
type ContextStore struct {
	core.Store
	mu   sync.Mutex
	seen any
}

// AllowAllN implements core.Store.
func (s *ContextStore) AllowAllN(ctx context.Context, checks []core.Check, n int) ([]core.Result, error) {
	s.mu.Lock()
	s.seen = ctx.Value(ContextKey{})
	s.mu.Unlock()
	return s.Store.AllowAllN(ctx, checks, n)
}

// Seen returns the ContextKey value of the last call's context.
func (s *ContextStore) Seen() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}

// Traits states those of Store, as a wrapping store should.
func (s *ContextStore) Traits() core.Traits {
	if r, ok := s.Store.(interface{ Traits() core.Traits }); ok {
		return r.Traits()
	}
	return core.Traits{}
}

// BenchClients is how many distinct clients the adapters' benchmarks
// cycle through.
const BenchClients = 1024

// BenchClient returns the i-th benchmark client's X-Client value.
func BenchClient(i int) string { return "client-" + strconv.Itoa(i%BenchClients) }

// BenchLimiter returns a Limiter over a fresh memory store on the real
// clock, and one rule, keyed by ClientKey, that no benchmark exhausts.
func BenchLimiter(tb testing.TB) (*core.Limiter, []core.Rule) {
	tb.Helper()
	store, err := memorystore.New()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	return NewLimiterOver(tb, store), []core.Rule{{Name: "default", Limit: core.PerHour(core.MaxRate), Key: ClientKey()}}
}

// ResponseWriter is a reusable http.ResponseWriter for benchmarks: Reset
// clears it without allocating.
type ResponseWriter struct {
	Code int
	h    http.Header
}

// NewResponseWriter returns an empty ResponseWriter.
func NewResponseWriter() *ResponseWriter { return &ResponseWriter{h: make(http.Header, 16)} }

// Header implements http.ResponseWriter.
func (w *ResponseWriter) Header() http.Header { return w.h }

// Write implements http.ResponseWriter.
func (w *ResponseWriter) Write(b []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return len(b), nil
}

// WriteHeader implements http.ResponseWriter.
func (w *ResponseWriter) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
}

// Reset forgets the last response.
func (w *ResponseWriter) Reset() {
	w.Code = 0
	clear(w.h)
}
