package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/go-chi/httprate"
	httprateredis "github.com/go-chi/httprate-redis"
	"github.com/go-redis/redis_rate/v10"
	goredislock "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/mennanov/limiters"
	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/goredisstore.v9"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/memorystore"
	"github.com/ratekit/ratekit/redisstore"
)

// decideFunc makes one decision for key. Each goroutine of a run has its own.
type decideFunc func(key string) (allowed bool, err error)

type kind int

const (
	kindRatekit kind = iota
	kindOther
	kindBaseline
)

// contender is one limiter (or baseline) in the comparison.
type contender struct {
	name      string // row label
	module    string // module path, for the version column
	also      string // another module it needs, whose version is shown too
	algorithm string
	kind      kind
	// windowed: counts in windows aligned to the clock, so the exactness
	// check must not straddle a minute boundary.
	windowed bool
	// refills: a token bucket or GCRA, which admits limit/minute more units
	// as time passes during the exactness check.
	refills bool
	// overshoot is how many units above the limit each process may admit
	// per window by design (ratekit's hot-key leasing: lease size − 1); the
	// exactness check's bound adds it once per process.
	overshoot int
	// charges: each call is a charge that always lands (Limiter.Charge),
	// allowed while the key has room left after it: under a limit of n,
	// n − 1 calls in a row are allowed. The exactness check, which counts
	// admissions, does not apply.
	charges bool
	// setup says how the contender is built and called, for the report.
	setup string
	// key, when set, returns the storage key of an identity, for a
	// contender that builds its keys otherwise than a Limiter (keyFor).
	key func(identity string) string
	// open sets the contender up on client with a limit of limit per minute
	// and returns a constructor of per-goroutine decision functions.
	open func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error)
}

var algConst = map[core.Algorithm]string{
	core.GCRA: "GCRA", core.FixedWindow: "FixedWindow",
	core.SlidingWindowLog: "SlidingWindowLog", core.SlidingWindowCounter: "SlidingWindowCounter",
}

// ratekitContender is one of ratekit's algorithms through a RedisStore:
// as it ships (batching on, the default for a *redis.Client) unless
// unbatched, which takes one command a call and so shows the script's own
// cost.
func ratekitContender(alg core.Algorithm, windowed, refills, unbatched bool) contender {
	name, algorithm := "ratekit "+alg.String(), alg.String()
	newStore := "`redisstore.New(client)` (batching on: up to 128 calls a pipeline, 8 pipelines in flight)"
	var opts []redisstore.Option
	if unbatched {
		name, algorithm = name+" unbatched", algorithm+", unbatched"
		newStore = "`redisstore.New(client, redisstore.WithoutBatching())`"
		opts = append(opts, redisstore.WithoutBatching()) // one command a call: the script's own cost
	}
	return contender{
		name: name, module: "github.com/ratekit/ratekit",
		algorithm: algorithm, kind: kindRatekit, windowed: windowed, refills: refills,
		setup: newStore + "; `store.AllowAllN(ctx, []core.Check{{Key: key, Limit: core.PerMinute(n).WithAlgorithm(core." + algConst[alg] + ")}}, 1)`",
		open: func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
			store, err := redisstore.New(client, opts...)
			if err != nil {
				return nil, err
			}
			if alg == core.SlidingWindowLog {
				limit = min(limit, core.MaxLogRate) // its cap: a member per unit
			}
			return storeDecider(ctx, store, core.PerMinute(limit).WithAlgorithm(alg))
		},
	}
}

// storeDecider returns the decide functions of store under l, one per
// goroutine, each reusing its own one-check slice.
func storeDecider(ctx context.Context, store core.Store, l core.Limit) (func() decideFunc, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return func() decideFunc {
		checks := []core.Check{{Limit: l}}
		return func(key string) (bool, error) {
			checks[0].Key = key
			r, err := store.AllowAllN(ctx, checks, 1)
			if err != nil {
				return false, err
			}
			return r[0].Allowed, nil
		}
	}, nil
}

// exactLeaseSize is the leasing contender's lease size under the exactness
// check's limit, on which its bound depends: LeasingStore's default, 1/64
// of the limit's capacity.
var exactLeaseSize = func() int {
	mem, err := memorystore.New()
	if err != nil {
		panic(err)
	}
	defer mem.Close()
	s, err := leasestore.New(mem)
	if err != nil {
		panic(err)
	}
	defer s.Close()
	return s.Size(core.PerMinute(exactLimit))
}()

// ratekitStoreContender is ratekit's GCRA through a store other than the
// plain RedisStore: name and algorithm label the row, setup tells how the
// store is built, and store builds it on client.
func ratekitStoreContender(name, algorithm, setup string, overshoot int, store func(client *redis.Client) (core.Store, error)) contender {
	return contender{
		name: name, module: "github.com/ratekit/ratekit",
		algorithm: algorithm, kind: kindRatekit, refills: true, overshoot: overshoot,
		setup: setup + "; `store.AllowAllN(ctx, []core.Check{{Key: key, Limit: core.PerMinute(n)}}, 1)`",
		open: func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
			st, err := store(client)
			if err != nil {
				return nil, err
			}
			return storeDecider(ctx, st, core.PerMinute(limit))
		},
	}
}

// bareScript is the baseline: the least a Redis-backed counter can do in one
// script call.
var bareScript = redis.NewScript("local c = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return c")

// clockScript is the second baseline: the least a script can do that, as
// ratekit's scripts must, reads Redis's clock and a key's state and writes
// the state back with an expiry, deciding nothing.
var clockScript = redis.NewScript("local t = redis.call('TIME') redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], t[1], 'PX', ARGV[1]) return 1")

// contenders returns every limiter and baseline of the comparison, in table
// order. All of them share one go-redis client.
func contenders() []contender {
	return []contender{
		ratekitContender(core.GCRA, false, true, false),
		ratekitContender(core.FixedWindow, true, false, false),
		ratekitContender(core.SlidingWindowLog, false, false, false),
		ratekitContender(core.SlidingWindowCounter, true, false, false),
		ratekitContender(core.GCRA, false, true, true),
		ratekitContender(core.FixedWindow, true, false, true),
		ratekitStoreContender(leasingName, "gcra, hot-key leasing",
			"`leasestore.New(redisstore.New(client))` (defaults: leases of 1/64 of the limit's capacity, at most 65,536 units, held 100ms)", exactLeaseSize-1,
			func(client *redis.Client) (core.Store, error) {
				shared, err := redisstore.New(client)
				if err != nil {
					return nil, err
				}
				return leasestore.New(shared)
			}),
		limiterContender(false),
		limiterContender(true),
		chargeContender(),
		middlewareContender(),
		outboundContender(),
		serverContender(),
		{
			name: redisRateName, module: "github.com/go-redis/redis_rate/v10",
			setup:     "`redis_rate.NewLimiter(client).Allow(ctx, key, redis_rate.PerMinute(n))`",
			algorithm: "gcra", kind: kindOther, refills: true,
			open: func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
				lim := redis_rate.NewLimiter(client)
				l := redis_rate.PerMinute(limit)
				return func() decideFunc {
					return func(key string) (bool, error) {
						r, err := lim.Allow(ctx, key, l)
						if err != nil {
							return false, err
						}
						return r.Allowed > 0, nil
					}
				}, nil
			},
		},
		{
			name: "throttled", module: "github.com/throttled/throttled/v2",
			setup:     "`throttled.NewGCRARateLimiterCtx(goredisstore.NewCtx(client, prefix), RateQuota{PerMin(n), MaxBurst: n-1})`; `RateLimitCtx(ctx, key, 1)`",
			algorithm: "gcra", kind: kindOther, refills: true,
			open: func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
				st, err := goredisstore.NewCtx(client, "cmp-throttled:")
				if err != nil {
					return nil, err
				}
				// a burst of limit-1 on top of the one request GCRA always
				// allows: limit at once, then limit per minute
				rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerMin(limit), MaxBurst: limit - 1})
				if err != nil {
					return nil, err
				}
				return func() decideFunc {
					return func(key string) (bool, error) {
						limited, _, err := rl.RateLimitCtx(ctx, key, 1)
						if err != nil {
							return false, err
						}
						return !limited, nil
					}
				}, nil
			},
		},
		{
			name: ululeName, module: "github.com/ulule/limiter/v3",
			setup:     "`limiter.New(redis.NewStoreWithOptions(client, ...), Rate{Period: time.Minute, Limit: n}).Get(ctx, key)`",
			algorithm: "fixed window (from first hit)", kind: kindOther,
			open: func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
				st, err := ulredis.NewStoreWithOptions(client, limiter.StoreOptions{Prefix: "cmp-ulule"})
				if err != nil {
					return nil, err
				}
				lim := limiter.New(st, limiter.Rate{Period: time.Minute, Limit: int64(limit)})
				return func() decideFunc {
					return func(key string) (bool, error) {
						c, err := lim.Get(ctx, key)
						if err != nil {
							return false, err
						}
						return !c.Reached, nil
					}
				}, nil
			},
		},
		{
			name: "httprate-redis", module: "github.com/go-chi/httprate-redis", also: "github.com/go-chi/httprate",
			setup:     "`httprate.NewRateLimiter(n, time.Minute, httprateredis.WithRedisLimitCounter(&Config{Client: client, FallbackDisabled: true}))`; `OnLimit(w, r, key)`",
			algorithm: "sliding window counter", kind: kindOther, windowed: true,
			open: func(_ context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
				rl := httprate.NewRateLimiter(limit, time.Minute,
					httprateredis.WithRedisLimitCounter(&httprateredis.Config{
						Client: client, PrefixKey: "cmp-httprate",
						// errors must reach us, not a local in-memory counter
						FallbackDisabled: true,
					}),
					httprate.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
						w.(*responseRecorder).err = err
					}))
				return func() decideFunc {
					// OnLimit is httprate's decision call; it takes the request
					// and writes rate-limit headers to the response.
					w := &responseRecorder{header: make(http.Header)}
					r := httptest.NewRequest(http.MethodGet, "/", nil)
					return func(key string) (bool, error) {
						w.err = nil
						limited := rl.OnLimit(w, r, key)
						if w.err != nil {
							return false, w.err
						}
						return !limited, nil
					}
				}, nil
			},
		},
		{
			name: "mennanov token bucket", module: "github.com/mennanov/limiters",
			setup:     "a `Registry` of `NewTokenBucket(n, time.Minute/n, NewLockRedis(redsync pool, ...), NewTokenBucketRedis(client, key, time.Minute, false), ...)` per key; `Limit(ctx)`",
			algorithm: "token bucket + redsync lock", kind: kindOther, refills: true,
			open: func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
				// one bucket per key, kept in a Registry, as in the library's
				// own per-IP example
				registry := limiters.NewRegistry()
				clock := limiters.NewSystemClock()
				logger := limiters.NewStdLogger()
				pool := goredislock.NewPool(client)
				refill := time.Minute / time.Duration(limit)
				return func() decideFunc {
					return func(key string) (bool, error) {
						b := registry.GetOrCreate(key, func() any {
							return limiters.NewTokenBucket(int64(limit), refill,
								limiters.NewLockRedis(pool, "lock:"+key),
								limiters.NewTokenBucketRedis(client, key, time.Minute, false),
								clock, logger)
						}, time.Minute, clock.Now()).(*limiters.TokenBucket)
						return mennanovResult(b.Limit(ctx))
					}
				}, nil
			},
		},
		{
			name: mennanovWindowName, module: "github.com/mennanov/limiters",
			setup:     "a `Registry` of `NewSlidingWindow(n, time.Minute, NewSlidingWindowRedis(client, key), clock, 1e-9)` per key; `Limit(ctx)`",
			algorithm: "sliding window counter", kind: kindOther, windowed: true,
			open: func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
				registry := limiters.NewRegistry()
				clock := limiters.NewSystemClock()
				return func() decideFunc {
					return func(key string) (bool, error) {
						w := registry.GetOrCreate(key, func() any {
							return limiters.NewSlidingWindow(int64(limit), time.Minute,
								limiters.NewSlidingWindowRedis(client, key), clock, 1e-9)
						}, time.Minute, clock.Now()).(*limiters.SlidingWindow)
						return mennanovResult(w.Limit(ctx))
					}
				}, nil
			},
		},
		{
			name: bareName, module: "github.com/redis/go-redis/v9",
			setup:     "`bareScript.Run(ctx, client, []string{key}, 60000)`, go-redis EVALSHA of `local c = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], ARGV[1]) return c`",
			algorithm: "one-line script, no decision", kind: kindBaseline,
			open: func(ctx context.Context, client *redis.Client, _ int) (func() decideFunc, error) {
				return func() decideFunc {
					return func(key string) (bool, error) {
						return true, bareScript.Run(ctx, client, []string{key}, 60_000).Err()
					}
				}, nil
			},
		},
		{
			name: clockName, module: "github.com/redis/go-redis/v9",
			setup:     "`clockScript.Run(ctx, client, []string{key}, 60000)`, go-redis EVALSHA of `local t = redis.call('TIME') redis.call('GET', KEYS[1]) redis.call('SET', KEYS[1], t[1], 'PX', ARGV[1]) return 1`",
			algorithm: "read clock and state, write state, no decision", kind: kindBaseline,
			open: func(ctx context.Context, client *redis.Client, _ int) (func() decideFunc, error) {
				return func() decideFunc {
					return func(key string) (bool, error) {
						return true, clockScript.Run(ctx, client, []string{key}, 60_000).Err()
					}
				}, nil
			},
		},
		{
			name: pingName, module: "github.com/redis/go-redis/v9",
			setup:     "`client.Ping(ctx)`",
			algorithm: "round trip only", kind: kindBaseline,
			open: func(ctx context.Context, client *redis.Client, _ int) (func() decideFunc, error) {
				return func() decideFunc {
					return func(string) (bool, error) { return true, client.Ping(ctx).Err() }
				}, nil
			},
		},
	}
}

// Names of the contenders that the report and the network pass pick out.
const (
	bareName    = "bare INCR+PEXPIRE"
	clockName   = "bare TIME+GET+SET"
	pingName    = "PING"
	gcraName    = "ratekit gcra"
	fixedName   = "ratekit fixed"
	leasingName = "ratekit gcra leasing"
	limiterName = "ratekit Limiter.Check"
	chargeName  = "ratekit Limiter.Charge"
	// limiterDefaultName is the Limiter path over a client of go-redis's
	// defaults (no ContextTimeoutEnabled, retries on)
	limiterDefaultName = "ratekit Limiter.Check, default client"
	middlewareName     = "ratekit net/http+leasing"
	slidingCounterName = "ratekit sliding-counter"
	mennanovWindowName = "mennanov sliding window"
	redisRateName      = "redis_rate"
	ululeName          = "ulule/limiter"
)

func mennanovResult(_ time.Duration, err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, limiters.ErrLimitExhausted):
		return false, nil
	default:
		return false, err
	}
}

// responseRecorder is the least http.ResponseWriter httprate's OnLimit
// needs; it also carries the error its error handler reports.
type responseRecorder struct {
	header http.Header
	err    error
}

func (w *responseRecorder) Header() http.Header         { return w.header }
func (w *responseRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (w *responseRecorder) WriteHeader(int)             {}

// find returns the contender named name.
func find(name string) (contender, error) {
	for _, c := range contenders() {
		if c.name == name {
			return c, nil
		}
	}
	return contender{}, fmt.Errorf("no contender named %q", name)
}
