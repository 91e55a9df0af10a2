package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/bench/internal/serverproc"
	"github.com/ratekit/ratekit/outbound"
)

// The paths beside the inbound Limiters: the outbound reservation, a turn
// on a schedule the fleet shares in Redis, and ratekit-server, envoy's
// rate limit service as a process of its own.
const (
	outboundName = "ratekit outbound.Reserve"
	serverName   = "ratekit-server gRPC"
)

// opened holds what the contenders opened that outlives one call of
// open: the outbound Limiters' heartbeats and subscriptions, the
// ratekit-server processes. closeOpened closes them.
var opened struct {
	sync.Mutex
	closers []func() error
}

func onClose(f func() error) {
	opened.Lock()
	defer opened.Unlock()
	opened.closers = append(opened.closers, f)
}

// closeOpened closes, last first, everything opened so far.
func closeOpened() error {
	opened.Lock()
	fs := opened.closers
	opened.closers = nil
	opened.Unlock()
	var errs []error
	for i := len(fs) - 1; i >= 0; i-- {
		errs = append(errs, fs[i]())
	}
	return errors.Join(errs...)
}

// errDegraded is a turn the outbound Limiter handed out without Redis:
// the comparison counts it as an error, not as a decision.
var errDegraded = errors.New("outbound: turn decided without Redis (degraded)")

// outboundLimit is the outbound contender's Limit for a limit of n per
// minute: n at once, as every other contender allows, then n a minute.
// At the throughput runs' n (one unit a microsecond, the fastest Limit
// outbound accepts) no reservation has to wait.
func outboundLimit(n int) outbound.Limit { return outbound.PerMinute(n).WithBurst(n) }

// outboundContender is the outbound reservation: one Reserve a decision
// through the shared client, never sleeping to the turn. A turn whose
// time to act is now is allowed; one later (which a caller would sleep
// to) is denied, and a turn decided without Redis is an error.
func outboundContender() contender {
	return contender{
		name: outboundName, module: "github.com/ratekit/ratekit",
		algorithm: "gcra schedule (outbound), one reservation a call", kind: kindRatekit, refills: true,
		setup: "`outbound.New(client, \"api\", outbound.PerMinute(n).WithBurst(n), outbound.WithPrefix(prefix), outbound.WithTimeout(d))` (d as for Limiter.Check; heartbeat, margin and breaker at their defaults); " +
			"`r, err := lim.Reserve(ctx, identity)`, allowed when `r.Delay() == 0`, without sleeping to the turn or cancelling it; `r.Degraded()` counts as an error",
		open: func(_ context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
			lim, err := outbound.New(client, ruleName, outboundLimit(limit),
				outbound.WithPrefix(prefixOf(outboundName)), outbound.WithTimeout(limiterTimeout))
			if err != nil {
				return nil, err
			}
			onClose(lim.Close)
			ctx := context.Background()
			return func() decideFunc {
				return func(key string) (bool, error) {
					r, err := lim.Reserve(ctx, identityOf(key))
					switch {
					case err != nil:
						return false, err
					case r.Degraded():
						return false, errDegraded
					}
					return r.Delay() == 0, nil
				}
			}, nil
		},
	}
}

// serverConns is how many gRPC connections the comparison opens to a
// ratekit-server, its goroutines spread over them, as
// cmd/ratekit-server/envoytest/cmd/speed does.
const serverConns = 8

// serverBin is the ratekit-server binary: -ratekit-server, or built once
// from this tree (serverproc.Build).
var serverBin string

// serverPrefix is the server's CACHE_KEY_PREFIX.
var serverPrefix = prefixOf(serverName)

// serverKey is the server contender's key of identity: where the server
// keeps the count of the descriptor {remote_address: the identity's
// address}.
func serverKey(identity string) string {
	return serverproc.Key(serverPrefix, strings.TrimPrefix(identity, "ip:"))
}

// serverValue returns the descriptor value in a key serverKey built.
func serverValue(key string) string {
	return key[strings.LastIndexByte(key, '=')+1 : len(key)-1]
}

// serverContender is ratekit-server's gRPC path: envoy's
// ShouldRateLimit with one descriptor a call, to a server process started
// for the limit on the Redis of the client it is given (the proxy's, in
// the network pass), with RATEKIT_TIMEOUT the Limiter rows' deadline.
func serverContender() contender {
	return contender{
		name: serverName, module: "github.com/ratekit/ratekit",
		algorithm: "envoy's fixed window (RATEKIT_ALGORITHM=compatible, the default), through a server process", kind: kindRatekit, windowed: true,
		key: serverKey,
		setup: "`cmd/ratekit-server` built from this tree and started as a process on loopback ports, its `REDIS_URL` the client's Redis, one domain `" + serverproc.Domain + "` with one descriptor `" + serverproc.DescriptorKey + "` of `{unit: minute, requests_per_unit: n}`, " +
			"`RATEKIT_TIMEOUT` d as for Limiter.Check, `RATEKIT_FAILURE_POLICY=closed` (a decision Redis did not make is a denial), the other settings at their defaults (`RATEKIT_BATCH=4`, `REDIS_POOL_SIZE=10`); " +
			fmt.Sprintf("go-control-plane's `ratelimit/v3` client over %d gRPC connections, each goroutine on one of them, calling `ShouldRateLimit(ctx, req)` with one descriptor `{%s: address}`, the request reused by its goroutine; OK allowed, OVER_LIMIT denied", serverConns, serverproc.DescriptorKey),
		open: func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
			bin := serverBin
			if bin == "" {
				var err error
				if bin, err = serverproc.Build(ctx); err != nil {
					return nil, err
				}
			}
			p, err := serverproc.Start(serverproc.Options{
				Bin: bin, Redis: client.Options().Addr, PerMinute: limit,
				Prefix: serverPrefix, Timeout: limiterTimeout,
			})
			if err != nil {
				return nil, err
			}
			progress("%s: pid %d, gRPC on %s, Redis %s, %d per minute", serverName, p.Pid(), p.GRPC, client.Options().Addr, limit)
			onClose(p.Stop)
			cs, err := serverproc.Dial(p.GRPC, serverConns)
			if err != nil {
				return nil, err
			}
			onClose(cs.Close)
			var next int
			var mu sync.Mutex
			return func() decideFunc {
				mu.Lock()
				c := cs.Caller(next)
				next++
				mu.Unlock()
				return func(key string) (bool, error) {
					return c.ShouldRateLimit(ctx, serverValue(key))
				}
			}, nil
		},
	}
}
