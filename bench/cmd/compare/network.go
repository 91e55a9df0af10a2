package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ratekit/ratekit/bench/internal/netdelay"
)

// networkNames are the contenders of the network pass, in table order: each
// of ratekit's algorithms as it ships, the unbatched GCRA, the Limiter,
// middleware, outbound and ratekit-server paths, the peers the bars compare with, and the baselines.
var networkNames = []string{
	gcraName, fixedName, "ratekit sliding-log", "ratekit sliding-counter", "ratekit gcra unbatched",
	limiterName, limiterDefaultName, middlewareName, outboundName, serverName, redisRateName, ululeName, mennanovWindowName, bareName, clockName, pingName,
}

// defaultNetworkRounds is the network pass's rounds at most, unless
// -latency-rounds says otherwise.
const defaultNetworkRounds = 3

// networkResults is the network pass: the same cases through a proxy that
// adds latency each way between the client and redis-server.
type networkResults struct {
	latency time.Duration // added each way
	rounds  int
	bench   *benchResults
}

// networkContenders returns the contenders of cs that the network pass
// measures, in the order of networkNames; with filtered (-only), those of
// them that cs has.
func networkContenders(cs []contender, filtered bool) ([]contender, error) {
	var out []contender
	for _, name := range networkNames {
		i := slices.IndexFunc(cs, func(c contender) bool { return c.name == name })
		switch {
		case i < 0 && filtered:
			continue
		case i < 0:
			return nil, fmt.Errorf("network pass: no contender named %q", name)
		}
		out = append(out, cs[i])
	}
	return out, nil
}

// networkPass measures the network pass's contenders through a toxiproxy
// proxy to the server at addr that adds o.latency each way, in at most
// o.latencyRounds rounds; m meters the server as in the direct pass.
func networkPass(ctx context.Context, addr string, cs []contender, o options, m *meter) (*networkResults, error) {
	ncs, err := networkContenders(cs, len(o.only) > 0)
	if err != nil {
		return nil, err
	}
	proxy, err := netdelay.Start(addr, o.latency)
	if err != nil {
		return nil, err
	}
	defer proxy.Stop()
	progress("network pass: %v each way through a proxy on %s", o.latency, proxy.Addr())
	client := newClient(proxy.Addr(), 256)
	defer client.Close()
	defer func(d time.Duration) { limiterTimeout = d }(limiterTimeout)
	limiterTimeout = networkLimiterTimeout
	no := o
	no.rounds = max(1, min(o.rounds, o.latencyRounds))
	res, err := measure(ctx, client, ncs, no, m)
	if err != nil {
		return nil, fmt.Errorf("network pass: %w", err)
	}
	return &networkResults{latency: o.latency, rounds: no.rounds, bench: res}, nil
}

// pingP50 returns the median latency of PING at one goroutine on the hot
// key in res, or 0 when res has no such run.
func pingP50(res *benchResults) time.Duration {
	ci := res.index(pingName)
	for k, bc := range res.cases {
		if ci >= 0 && bc.g == 1 && bc.keys.count == 1 {
			return res.cells[k][ci].summary().p50
		}
	}
	return 0
}
