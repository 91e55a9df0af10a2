package grpclimit_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/redisstore"
)

// fleet starts a real redis-server and n gRPC servers over it, each with a
// Redis client and a Limiter of its own, as separate processes would have,
// and returns a client connection to each.
func fleet(t *testing.T, n int, rules []core.Rule) []*grpc.ClientConn {
	t.Helper()
	redis := redistest.StartServer(t)
	conns := make([]*grpc.ClientConn, n)
	for i := range conns {
		store, err := redisstore.New(redis.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		// a deadline of a second: the race detector slows everything down
		l := adaptertest.NewLimiterOver(t, store, core.WithTimeout(time.Second))
		conns[i], _ = serve(t, interceptors(t, l, rules)...)
	}
	return conns
}

// Two servers share one limit through one Redis: calls to either spend the
// same quota, and what one denies the other denies too.
func TestFleetSharesOneLimit(t *testing.T) {
	apiKey, err := keyfuncs.APIKey()
	if err != nil {
		t.Fatal(err)
	}
	// GCRA, which has no window edge to cross: 5 at once, then one every 12 minutes
	rules := []core.Rule{{Name: "default", Limit: core.PerHour(5), Key: apiKey}}
	conns := fleet(t, 2, rules)

	for i, remaining := range []string{"4", "3", "2", "1", "0"} {
		_, md, err := say(t, conns[i%2], "hi", "x-api-key", "key-1")
		if err != nil {
			t.Fatalf("call %d on server %d: %v", i+1, i%2, err)
		}
		if got := md.Get("x-ratelimit-remaining"); len(got) != 1 || got[0] != remaining {
			t.Errorf("call %d on server %d: x-ratelimit-remaining %q, want %s", i+1, i%2, got, remaining)
		}
	}
	for i, conn := range conns {
		if _, _, err := say(t, conn, "hi", "x-api-key", "key-1"); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("server %d past the limit: %v, want ResourceExhausted", i, err)
		}
		if _, _, err := count(t, conn, "", "x-api-key", "key-1"); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("server %d past the limit, a stream: %v, want ResourceExhausted", i, err)
		}
	}
	if _, _, err := say(t, conns[1], "hi", "x-api-key", "key-2"); err != nil {
		t.Errorf("another key: %v, want its own quota", err)
	}
}

// Many concurrent calls, unary and streams, on two servers: exactly the
// limit gets through.
func TestFleetConcurrent(t *testing.T) {
	const limit = 20
	rules := []core.Rule{{Name: "default", Limit: core.PerHour(limit), Key: keyfuncs.Static("all")}}
	conns := fleet(t, 2, rules)

	var allowed, denied atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 5 {
				var err error
				if (g+i)%2 == 0 {
					_, _, err = say(t, conns[g%2], "hi")
				} else {
					_, _, err = count(t, conns[g%2], "")
				}
				switch status.Code(err) {
				case codes.OK:
					allowed.Add(1)
				case codes.ResourceExhausted:
					denied.Add(1)
				default:
					t.Errorf("call: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != limit || denied.Load() != 16*5-limit {
		t.Errorf("%d allowed and %d denied, want %d and %d", allowed.Load(), denied.Load(), limit, 16*5-limit)
	}
}
