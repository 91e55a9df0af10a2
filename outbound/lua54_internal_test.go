package outbound

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/luaproxy"
	"github.com/ratekit/ratekit/internal/redistest"
)

// TestScriptsOnLua54 reserves, cancels, pauses, reads pauses missed while
// unsubscribed (merged by pipebatch), lowers the rate on a refusal and
// beats the fleet's heartbeat through a server whose scripts run on Lua
// 5.4 with their keys checked against KEYS, as Dragonfly runs them (see
// package luaproxy): every script of scripts/ runs and breaks none of the
// rules.
func TestScriptsOnLua54(t *testing.T) {
	p := luaproxy.Start(t, redistest.StartServer(t).Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	limit := Limit{Rate: 1, Period: 2 * time.Second}
	b := mustNew(t, rdb, limit, WithMargin(0), WithHeartbeat(50*time.Millisecond),
		WithAIMD(AIMD{Decrease: 0.5, Increase: 1, Hold: time.Hour}))
	a := mustNew(t, rdb, limit, WithMargin(0), withoutSubscribe())
	redistest.AwaitSubscribers(t, b.channel, 1, 10*time.Second, rdb)
	missedPause(t, a, b, 3*time.Second, func() {
		if err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
	})
	r, err := b.Reserve(ctx, "cancelled")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Refused(ctx, "refused", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(ctx, "refused"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); b.FleetSize() < 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat")
		}
	}
	p.RequireRan(t, "scripts")
}
