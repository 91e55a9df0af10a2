package core

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
)

// honoursDeadlines reports whether every call of store returns by its
// context's deadline on its own: a [RedisStore] (batching or not, or under
// a [LeasingStore]) over a go-redis client configured with
// ContextTimeoutEnabled, which sets each connection's read and write
// deadlines from the context, and dials, waits for a pooled connection and
// backs off between retries within it. The Limiter calls such a store on
// the request's own goroutine; any other store runs on a goroutine of its
// own that the request abandons at the deadline.
func honoursDeadlines(store Store) bool {
	switch s := store.(type) {
	case *LeasingStore:
		return honoursDeadlines(s.inner)
	case *RedisStore:
		switch c := s.client.(type) {
		case *redis.Client:
			return c.Options().ContextTimeoutEnabled
		case *redis.ClusterClient:
			return c.Options().ContextTimeoutEnabled
		case *redis.Ring:
			return c.Options().ContextTimeoutEnabled
		}
	}
	return false
}

// callDirect makes one store call on the caller's goroutine into results,
// for a store that returns by ctx's deadline on its own. A panic of the
// store becomes an error, as on the goroutine path.
func (l *Limiter) callDirect(ctx context.Context, checks []Check, n int, results []Result) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ratekit: store panicked: %v", p)
		}
	}()
	if s, ok := l.store.(*RedisStore); ok {
		// the concrete call lets checks and results stay on the caller's
		// stack
		return s.allow(ctx, checks, n, results)
	}
	// any other store gets checks of its own, since an interface call
	// would move the caller's to the heap
	res, err := l.store.AllowAllN(ctx, slices.Clone(checks), n)
	if err == nil && len(res) != len(checks) {
		err = fmt.Errorf("%w: %d results for %d checks", ErrMalformedReply, len(res), len(checks))
	}
	copy(results, res)
	return err
}
