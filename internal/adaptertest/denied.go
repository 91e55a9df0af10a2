package adaptertest

import (
	"context"
	"net/http"
	"net/textproto"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/redisstore"
)

// ipHeader names the request header whose value is the client's address
// in testDeniedSpendsNothing, apart from its user in ClientHeader.
const ipHeader = "X-Test-IP"

// testDeniedSpendsNothing runs [DeniedSpendsNothing] on the middleware
// that h builds.
func testDeniedSpendsNothing(t *testing.T, h Harness) {
	DeniedSpendsNothing(t, func(t *testing.T, l *core.Limiter, rules []core.Rule) App {
		return build(t, h, l, rules, Setup{})
	})
}

// DeniedSpendsNothing serves five requests of one user behind one
// address, under a per-address rule of 100/min and a per-user rule of
// 1/min, through a redis-server of its own, standalone and a Cluster whose
// two keys live in different slots: the first is allowed, the four others
// denied by the per-user rule, and the per-address rule still has 99
// left. The Limiter decides the address before the user, so it spent for
// each denied request and gave back. newApp returns the app of a
// middleware of l and rules, with its defaults; each request's client is
// in [ClientHeader] and its address in the header X-Test-IP, which an app
// of another protocol than HTTP passes on as its own (gRPC's metadata).
func DeniedSpendsNothing(t *testing.T, newApp func(t *testing.T, l *core.Limiter, rules []core.Rule) App) {
	redistest.Require(t)
	ipKey, err := keyfuncs.Header(ipHeader)
	if err != nil {
		t.Fatal(err)
	}
	perIP := core.Rule{Name: "per-ip", Limit: core.PerMinute(100), Key: ipKey}
	perUser := core.Rule{Name: "per-user", Limit: core.PerMinute(1), Key: ClientKey()}
	const ip, user = "192.0.2.10", "alice"
	// identities as keyfuncs.Header makes them
	ipID := "header:" + textproto.CanonicalMIMEHeaderKey(ipHeader) + ":" + ip
	userID := "header:" + textproto.CanonicalMIMEHeaderKey(ClientHeader) + ":" + user
	servers := []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { return redistest.StartServer(t).Client(t) }},
		{"cluster", func(t *testing.T) redis.UniversalClient {
			cc := redistest.StartCluster(t, 3).Client(t)
			// the two identities' keys in different slots: two store calls
			ipSlot, err1 := cc.ClusterKeySlot(context.Background(), "ratekit:per-ip:{"+ipID+"}").Result()
			userSlot, err2 := cc.ClusterKeySlot(context.Background(), "ratekit:per-user:{"+userID+"}").Result()
			if err1 != nil || err2 != nil || ipSlot == userSlot {
				t.Fatalf("slots %d and %d (%v, %v): want two different slots", ipSlot, userSlot, err1, err2)
			}
			return cc
		}},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			store, err := redisstore.New(srv.client(t))
			if err != nil {
				t.Fatal(err)
			}
			// a deadline a loaded machine never misses: no request goes to
			// the local fallback
			l := NewLimiterOver(t, store, core.WithTimeout(10*time.Second))
			app := newApp(t, l, []core.Rule{perIP, perUser})
			for i := range 5 {
				r := NewRequest(http.MethodGet, "/", user)
				r.Header.Set(ipHeader, ip)
				want := http.StatusTooManyRequests
				if i == 0 {
					want = http.StatusOK
				}
				if got := app(r).Status; got != want {
					t.Fatalf("request %d: status %d, want %d", i+1, got, want)
				}
			}
			res, err := l.Peek(context.Background(), perIP, ipID)
			if err != nil {
				t.Fatal(err)
			}
			if res.Remaining != 99 {
				t.Errorf("per-ip remaining after 1 allowed and 4 denied requests: %d, want 99", res.Remaining)
			}
		})
	}
}
