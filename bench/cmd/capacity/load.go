package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/redisstore"
)

// mode is how the store reaches Redis.
type mode int

const (
	unbatched   mode = iota // redisstore.WithoutBatching(): one command a call
	batched                 // the default: concurrent calls share pipelines
	leasing                 // a LeasingStore over the default RedisStore
	reservation             // the outbound Limiter's Reserve, without the wait
	server                  // ratekit-server's gRPC ShouldRateLimit, a process of its own
)

var modeNames = [...]string{"unbatched", "batched", "leasing", "outbound Reserve", "ratekit-server gRPC"}

func (m mode) String() string { return modeNames[m] }

// setup says how a mode's store is built, for the report.
func (m mode) setup() string {
	switch m {
	case unbatched:
		return "`redisstore.New(client, redisstore.WithoutBatching())`"
	case batched:
		return "`redisstore.New(client)` (batching by default)"
	case leasing:
		return "`leasestore.New(redisstore.New(client))` (defaults)"
	case reservation:
		return "`outbound.New(client, \"api\", outbound.PerMinute(n).WithBurst(n), outbound.WithPrefix(prefix), outbound.WithTimeout(time.Second))` " +
			"(heartbeat, margin and breaker at their defaults), called as `r, err := lim.Reserve(ctx, identity)`: one " +
			"reservation a decision, never slept to nor cancelled, allowed when `r.Delay() == 0`; a turn decided without Redis " +
			"(`r.Degraded()`) fails the run"
	default:
		return fmt.Sprintf("ratekit-server built from this tree (`go build -C cmd/ratekit-server`) and run as a process on loopback ports "+
			"against the program's redis-server, one domain with one descriptor of n per minute, `RATEKIT_TIMEOUT=1s`, "+
			"`RATEKIT_FAILURE_POLICY=closed` (a decision Redis did not make is a denial), its other settings at their defaults "+
			"(envoy's algorithm, `RATEKIT_BATCH=4`, `REDIS_POOL_SIZE=10`), called with go-control-plane's `ratelimit/v3` client over %d "+
			"gRPC connections, `ShouldRateLimit` with one descriptor a call; OK is allowed, OVER_LIMIT denied", serverConns)
	}
}

// keyCase is a key set: many keys, or one hot key.
type keyCase struct {
	name  string
	count int
}

// runCase is one measured combination.
type runCase struct {
	alg  core.Algorithm
	mode mode
	keys keyCase
}

func (c runCase) String() string { return fmt.Sprintf("%s %s %s", c.algName(), c.mode, c.keys.name) }

// algName names the case's algorithm: ratekit's name for it, or for
// ratekit-server's default, envoy's fixed window, the server's
// (RATEKIT_ALGORITHM=compatible).
func (c runCase) algName() string {
	if c.mode == server {
		return "compatible"
	}
	return c.alg.String()
}

// keyspace names the keys a case decides on: each algorithm's stores
// share theirs; the outbound Limiter and the server have their own.
func (c runCase) keyspace() string {
	switch c.mode {
	case reservation:
		return "outbound"
	case server:
		return "server"
	}
	return c.alg.String()
}

// cases returns every combination measured: each algorithm unbatched and
// batched, GCRA also leasing, then the outbound reservation (a GCRA
// schedule) and ratekit-server's gRPC path (envoy's fixed window), each on
// many keys and on one hot key.
func cases(manyKeys int) []runCase {
	var cs []runCase
	keys := []keyCase{{manyName(manyKeys), manyKeys}, {"hot", 1}}
	for _, alg := range []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		modes := []mode{unbatched, batched}
		if alg == core.GCRA {
			modes = append(modes, leasing)
		}
		for _, m := range modes {
			for _, k := range keys {
				cs = append(cs, runCase{alg, m, k})
			}
		}
	}
	for _, k := range keys {
		cs = append(cs, runCase{core.GCRA, reservation, k})
	}
	for _, k := range keys {
		cs = append(cs, runCase{core.FixedWindow, server, k})
	}
	return cs
}

func manyName(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// benchRate is the limit of every algorithm but the sliding log, per
// minute: far above what a run reaches, so every decision is allowed. It
// is the fastest GCRA limit ratekit accepts, one unit per microsecond.
const benchRate = 60_000_000

// limitFor returns the limit of alg's runs. The sliding log runs at its
// cap, core.MaxLogRate per second: on the hot key faster loads are denied
// past it, which the report shows.
func limitFor(alg core.Algorithm) core.Limit {
	if alg == core.SlidingWindowLog {
		return core.PerSecond(core.MaxLogRate).WithAlgorithm(alg)
	}
	return core.PerMinute(benchRate).WithAlgorithm(alg)
}

// keysFor returns the keys of a case: for a store, storage keys shaped as
// a Limiter builds them, each algorithm's of its own, since each keeps its
// own kind of value, and its modes share them; for the outbound Limiter
// the identities it builds its keys of (prefix + "api:{" + identity +
// "}"); for the server the descriptor's values, client addresses.
func keysFor(c runCase) []string {
	key := func(ip string) string { return "cap-" + c.alg.String() + ":api:{ip:" + ip + "}" }
	switch c.mode {
	case reservation:
		key = func(ip string) string { return "ip:" + ip }
	case server:
		key = func(ip string) string { return ip }
	}
	if c.keys.count == 1 {
		return []string{key("hot")}
	}
	keys := make([]string, c.keys.count)
	for i := range keys {
		keys[i] = key(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
	}
	return keys
}

// closingStore is a store the program closes after its run.
type closingStore interface {
	core.Store
	Close() error
}

// openStore builds the store of m over client, and returns the lease size
// it takes under limit (0 when it does not lease).
func openStore(client *redis.Client, m mode, limit core.Limit) (closingStore, int, error) {
	var opts []redisstore.Option
	if m == unbatched {
		opts = append(opts, redisstore.WithoutBatching())
	}
	rs, err := redisstore.New(client, opts...)
	if err != nil {
		return nil, 0, err
	}
	if m != leasing {
		return rs, 0, nil
	}
	ls, err := leasestore.New(rs)
	if err != nil {
		return nil, 0, err
	}
	return leased{ls, rs}, ls.Size(limit), nil
}

// leased is a LeasingStore whose Close also closes its RedisStore.
type leased struct {
	*leasestore.Store
	inner *redisstore.Store
}

func (l leased) Close() error {
	err := l.Store.Close()
	if ierr := l.inner.Close(); err == nil {
		err = ierr
	}
	return err
}

// loadResult counts the decisions of one load.
type loadResult struct {
	decisions, allowed, denied, errors int64
	firstErr                           error
	elapsed                            time.Duration
}

// decider makes one decision on key; each goroutine of a load has its own.
type decider func(key string) (allowed bool, err error)

// storeDeciders returns deciders that call store.AllowAllN with one check
// of limit, each reusing its own slice.
func storeDeciders(ctx context.Context, store core.Store, limit core.Limit) func() decider {
	return func() decider {
		checks := []core.Check{{Limit: limit}}
		return func(key string) (bool, error) {
			checks[0].Key = key
			res, err := store.AllowAllN(ctx, checks, 1)
			if err != nil {
				return false, err
			}
			return res[0].Allowed, nil
		}
	}
}

// load runs g goroutines, each with a decider of newDecider, on keys in
// turn, until n decisions have been made or maxDur has passed.
func load(newDecider func() decider, keys []string, g int, n int64, maxDur time.Duration) loadResult {
	var next, allowed, denied, errs atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	deciders := make([]decider, g)
	for i := range deciders {
		deciders[i] = newDecider()
	}
	start := time.Now()
	deadline := start.Add(maxDur)
	for _, decide := range deciders {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > n || time.Now().After(deadline) {
					return
				}
				ok, err := decide(keys[int(i%int64(len(keys)))])
				switch {
				case err != nil:
					errs.Add(1)
					once.Do(func() { firstErr = err })
				case ok:
					allowed.Add(1)
				default:
					denied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r := loadResult{allowed: allowed.Load(), denied: denied.Load(), errors: errs.Load(), firstErr: firstErr, elapsed: time.Since(start)}
	r.decisions = r.allowed + r.denied
	return r
}
