package compat_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/compat"
	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/luaproxy"
)

// lua54, while set, collects the proxies newStore puts its stores behind.
var lua54 *[]*luaproxy.Proxy

// TestScriptsOnLua54 runs the store's tests of counting, quotas and
// resets, and its reading of values of other types, through servers whose scripts run on Lua 5.4 with their keys
// checked against KEYS, as Dragonfly runs them (see package luaproxy):
// compat.lua, by itself and merged by pipebatch, breaks none of the rules.
func TestScriptsOnLua54(t *testing.T) {
	var proxies []*luaproxy.Proxy
	lua54 = &proxies
	defer func() { lua54 = nil }()
	for name, test := range map[string]func(*testing.T){
		"ExactConcurrent":      TestExactConcurrent,
		"ForeignValues":        foreignValues,
		"Stop":                 TestStop,
		"Quota":                TestQuota,
		"ResetReachesWatchers": TestResetReachesWatchers,
	} {
		t.Run(name, test)
	}
	alone, merged := false, false
	for _, p := range proxies {
		for src := range p.Ran() {
			alone = alone || src == compat.Source
			merged = merged || src != compat.Source && strings.Contains(src, compat.Source)
		}
	}
	if !alone || !merged {
		t.Fatalf("compat.lua ran by itself: %v, merged: %v; want both", alone, merged)
	}
}

// foreignValues: values the script did not write, of other types or
// windows, count as absent (TestWindow checks them too, with a key's
// expiry to the millisecond, which the proxy's round trips blur).
func foreignValues(t *testing.T) {
	s, c, _ := newStore(t, 0)
	ctx := t.Context()
	for _, foreign := range []func(){
		func() { c.Set(ctx, "w", "5", 2*time.Hour) },
		func() { c.Del(ctx, "w"); c.HSet(ctx, "w", "a", 1) },
	} {
		foreign()
		r, err := s.AllowAllN(ctx, []core.Check{{Key: "w", Limit: perMinute(3)}}, 1)
		if err != nil || !r[0].Allowed || r[0].Remaining != 2 {
			t.Fatalf("over a foreign value: %+v %v", r, err)
		}
	}
}
