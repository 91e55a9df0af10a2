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
	unbatched mode = iota // redisstore.WithoutBatching(): one command a call
	batched               // the default: concurrent calls share pipelines
	leasing               // a LeasingStore over the default RedisStore
)

var modeNames = [...]string{"unbatched", "batched", "leasing"}

func (m mode) String() string { return modeNames[m] }

// setup says how a mode's store is built, for the report.
func (m mode) setup() string {
	switch m {
	case unbatched:
		return "`redisstore.New(client, redisstore.WithoutBatching())`"
	case batched:
		return "`redisstore.New(client)` (batching by default)"
	default:
		return "`leasestore.New(redisstore.New(client))` (defaults)"
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

func (c runCase) String() string { return fmt.Sprintf("%s %s %s", c.alg, c.mode, c.keys.name) }

// cases returns every combination measured: each algorithm unbatched and
// batched, GCRA also leasing, each on many keys and on one hot key.
func cases(manyKeys int) []runCase {
	var cs []runCase
	for _, alg := range []core.Algorithm{core.GCRA, core.FixedWindow, core.SlidingWindowLog, core.SlidingWindowCounter} {
		modes := []mode{unbatched, batched}
		if alg == core.GCRA {
			modes = append(modes, leasing)
		}
		for _, m := range modes {
			for _, k := range []keyCase{{manyName(manyKeys), manyKeys}, {"hot", 1}} {
				cs = append(cs, runCase{alg, m, k})
			}
		}
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

// keysFor returns the storage keys of a case, shaped as a Limiter builds
// them; each algorithm has keys of its own, since each keeps its own kind
// of value, and its modes share them.
func keysFor(alg core.Algorithm, k keyCase) []string {
	if k.count == 1 {
		return []string{"cap-" + alg.String() + ":api:{ip:hot}"}
	}
	keys := make([]string, k.count)
	for i := range keys {
		keys[i] = fmt.Sprintf("cap-%s:api:{ip:10.%d.%d.%d}", alg, i>>16&255, i>>8&255, i&255)
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

// load runs g goroutines that call store.AllowAllN on keys in turn, until
// n decisions have been made or maxDur has passed.
func load(ctx context.Context, store core.Store, keys []string, limit core.Limit, g int, n int64, maxDur time.Duration) loadResult {
	var next, allowed, denied, errs atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(maxDur)
	for range g {
		wg.Go(func() {
			checks := []core.Check{{Limit: limit}}
			for {
				i := next.Add(1)
				if i > n || time.Now().After(deadline) {
					return
				}
				checks[0].Key = keys[int(i%int64(len(keys)))]
				res, err := store.AllowAllN(ctx, checks, 1)
				switch {
				case err != nil:
					errs.Add(1)
					once.Do(func() { firstErr = err })
				case res[0].Allowed:
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
