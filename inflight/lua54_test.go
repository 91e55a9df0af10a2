package inflight_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/luaproxy"
	"github.com/ratekit/ratekit/internal/redistest"
)

// TestScriptsOnLua54 acquires, renews and releases through a server whose
// scripts run on Lua 5.4 with their keys checked against KEYS, as
// Dragonfly runs them (see package luaproxy): every script of scripts/
// runs and breaks none of its rules.
func TestScriptsOnLua54(t *testing.T) {
	p := luaproxy.Start(t, redistest.StartServer(t).Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	l, err := inflight.New(c, inflight.WithLease(300*time.Millisecond), inflight.WithTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := t.Context()
	const key = "ratekit:uploads:{ip:203.0.113.7}"
	var leases []*inflight.Lease
	for i := 1; i <= 3; i++ {
		le, res, err := l.Acquire(ctx, key, 2)
		if err != nil {
			t.Fatal(err)
		}
		if res.Allowed != (i <= 2) || res.Degraded {
			t.Fatalf("acquisition %d: %+v", i, res)
		}
		if le != nil {
			leases = append(leases, le)
		}
	}
	// held past three leases: renewed every 100 ms meanwhile
	renew, err := os.ReadFile("scripts/renew.lua")
	if err != nil {
		t.Fatal(err)
	}
	renewed := func() bool {
		for src := range p.Ran() {
			if strings.Contains(src, string(renew)) {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !renewed(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no renewal ran")
		}
	}
	for _, le := range leases {
		if err := le.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, res, err := l.Acquire(ctx, key, 2); err != nil || !res.Allowed || res.InFlight != 1 {
		t.Fatalf("after the releases: %+v, %v", res, err)
	}
	p.RequireRan(t, "scripts")
}
