package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/storetest"
	"github.com/ratekit/ratekit/internal/luaproxy"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/redisstore"
)

// TestConformanceLua54 runs the suite with every script on Lua 5.4 and
// its keys checked against KEYS, as Dragonfly runs them (see package
// luaproxy): a script that reads a global one Lua lacks (unpack,
// table.maxn), passes a float where Lua 5.4 writes "3.0", formats a
// fraction with %d or touches a key it did not declare fails the test.
// Every file of scripts/ must have run, in some script, and the scripts
// written in Go run too.
func TestConformanceLua54(t *testing.T) {
	p := luaproxy.Start(t, redistest.StartServer(t).Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	t.Run("plain", func(t *testing.T) {
		storetest.Run(t, redisStores(c), expiring(c))
	})
	t.Run("batching", func(t *testing.T) {
		storetest.Run(t, batchedStores(c), expiring(c))
	})
	p.RequireRan(t, "scripts")
	// the scripts written in Go: overrides and resets
	ctx := t.Context()
	s, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	limit := core.Limit{Rate: 5, Period: time.Minute, Burst: 5, Algorithm: core.GCRA}
	if err := s.SetOverride(ctx, "{k}:c", "{k}:o", limit, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AllowAllN(ctx, []core.Check{{Key: "{k}:c", Override: "{k}:o", Limit: limit}}, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearOverride(ctx, "{k}:c", "{k}:o"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(ctx, "{k}:c"); err != nil {
		t.Fatal(err)
	}
	if n := len(p.Ran()); n < 3 {
		t.Fatalf("%d scripts ran", n)
	}
}
