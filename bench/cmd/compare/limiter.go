package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/nethttp"
	"github.com/ratekit/ratekit/redisstore"
)

// ruleName is the name of the one rule of the contenders that go through a
// Limiter; keyFor puts it in every ratekit key, as a Limiter does.
const ruleName = "api"

// Identities of the fixture: the hot key's, the self-check's and the
// exactness check's. They are client addresses (TEST-NET-1), as the
// middleware contender finds them in a request; the 100,000 keys' are
// ip:10.x.y.z.
const (
	hotIdentity   = "ip:192.0.2.1"
	checkIdentity = "ip:192.0.2.2"
	exactIdentity = "ip:192.0.2.3"
)

// identityOf returns the identity in a key that keyFor built for a ratekit
// contender: what lies between the braces of the hash tag.
func identityOf(key string) string {
	i := strings.IndexByte(key, '{')
	return key[i+1 : len(key)-1]
}

// limiterTimeout is the deadline of the Limiter contenders' store calls:
// the default in the direct pass, as the Limiter ships. networkPass sets
// networkLimiterTimeout for its own runs.
var limiterTimeout = core.DefaultTimeout

// networkLimiterTimeout is the network pass's deadline: longer than the
// default 50 ms, which an in-process proxy sharing a few CPUs with the
// clients and redis-server passes by its own queueing at hundreds of
// goroutines; each deadline hit also closes its connection
// (ContextTimeoutEnabled), and the new connections cost more stalls.
const networkLimiterTimeout = time.Second

// newLimiter returns a Limiter over store whose keys are those keyFor
// gives contender name. It fails closed, so that a Redis failure counts as
// an error instead of being answered by the local fallback.
func newLimiter(name string, store core.Store) (*core.Limiter, error) {
	return core.NewLimiter(store, core.WithPrefix(prefixOf(name)),
		core.WithFailurePolicy(core.FailClosed), core.WithTimeout(limiterTimeout))
}

// identityHeader is where identityRequest holds its identity.
const identityHeader = "X-Identity"

// identityRequest is the least core.Request a Limiter needs: its identity,
// in a header, for the rule's key function.
type identityRequest struct {
	ctx      context.Context
	identity string
}

func (r *identityRequest) Context() context.Context { return r.ctx }
func (r *identityRequest) Method() string           { return http.MethodGet }
func (r *identityRequest) Path() string             { return "/" }
func (r *identityRequest) Route() string            { return "" }
func (r *identityRequest) Header(name string) string {
	if name == identityHeader {
		return r.identity
	}
	return ""
}
func (r *identityRequest) HeaderValues(string) []string { return nil }
func (r *identityRequest) Query(string) string          { return "" }
func (r *identityRequest) RemoteAddr() string           { return "" }

// identityKey is the Limiter contender's key function.
func identityKey(r core.Request) (string, error) {
	if id := r.Header(identityHeader); id != "" {
		return id, nil
	}
	return "", core.ErrNoIdentity
}

// limiterContender is GCRA as every middleware decides it: Limiter.Check
// with one rule over the RedisStore as it ships, through the shared client
// (the quick start's), or, with defaultClient, through a client of its own
// with go-redis's default options but the pool's size: no
// ContextTimeoutEnabled, so that the store keeps the deadline through its
// clone of the client, and go-redis's retries.
func limiterContender(defaultClient bool) contender {
	name, client := limiterName, "the shared client"
	if defaultClient {
		name, client = limiterDefaultName, "a client of go-redis's defaults (`redis.NewClient(&redis.Options{Addr: addr, PoolSize: 256})`: no `ContextTimeoutEnabled`, 3 retries)"
	}
	return contender{
		name: name, module: "github.com/ratekit/ratekit",
		algorithm: "gcra, through a Limiter", kind: kindRatekit, refills: true,
		setup: "`core.NewLimiter(redisstore.New(client), core.WithPrefix(prefix), core.WithFailurePolicy(core.FailClosed), core.WithTimeout(d))` over " + client + " (d " + deadlineText() + "); " +
			"`limiter.CheckInto(ctx, req, []core.Rule{{Name: \"api\", Limit: core.PerMinute(n), Key: identity}}, results[:0])`, as the middlewares call it: the request a reused `core.Request` holding the identity, `results` a block of two `core.RuleResult` the goroutine reuses, as a middleware owns one per request",
		open: func(ctx context.Context, shared *redis.Client, limit int) (func() decideFunc, error) {
			client := shared
			if defaultClient {
				client = defaultClientOf(shared)
			}
			store, err := redisstore.New(client)
			if err != nil {
				return nil, err
			}
			lim, err := newLimiter(name, store)
			if err != nil {
				return nil, err
			}
			rules := []core.Rule{{Name: ruleName, Limit: core.PerMinute(limit), Key: identityKey}}
			if _, err := core.NewRuleSet(rules); err != nil {
				return nil, err
			}
			return func() decideFunc {
				req := &identityRequest{ctx: ctx}
				// the results' block a middleware owns per request
				var results [2]core.RuleResult
				return func(key string) (bool, error) {
					req.identity = identityOf(key)
					d, err := lim.CheckInto(ctx, req, rules, results[:0])
					if err != nil {
						return false, err
					}
					return d.Allowed, nil
				}
			}, nil
		},
	}
}

// chargeContender is a charge beside the Limiter's decision: what a
// token budget adds to each request once its answer is done, one unit a
// call through Limiter.Charge, as the Limiter contender is built. A key
// charged past its bound still takes one script call, which spends
// nothing.
func chargeContender() contender {
	return contender{
		name: chargeName, module: "github.com/ratekit/ratekit",
		algorithm: "gcra, a charge that always lands, through a Limiter", kind: kindRatekit, refills: true, charges: true,
		setup: "the Limiter as for Limiter.Check; `limiter.Charge(ctx, core.Rule{Name: \"api\", Limit: core.PerMinute(n), Key: identity}, identity, 1)`, " +
			"allowed when the key has room left after the charge",
		open: func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
			store, err := redisstore.New(client)
			if err != nil {
				return nil, err
			}
			lim, err := newLimiter(chargeName, store)
			if err != nil {
				return nil, err
			}
			rule := core.Rule{Name: ruleName, Limit: core.PerMinute(limit), Key: identityKey}
			return func() decideFunc {
				return func(key string) (bool, error) {
					r, err := lim.Charge(ctx, rule, identityOf(key), 1)
					if err != nil {
						return false, err
					}
					return r.Allowed, nil
				}
			}, nil
		},
	}
}

// deadlineText says what the Limiter rows' deadline is in each pass.
func deadlineText() string {
	if limiterTimeout == core.DefaultTimeout {
		return fmt.Sprintf("the default, %v, in the direct pass; %v in the network pass", limiterTimeout, networkLimiterTimeout)
	}
	return fmt.Sprintf("%v in the direct pass, set by -limiter-timeout, where the default is %v; %v in the network pass", limiterTimeout, core.DefaultTimeout, networkLimiterTimeout)
}

// defaultClients holds the default-options clients made for the Limiter
// contender, one per server address (the direct one, the proxy's), kept
// for the program's life.
var defaultClients sync.Map // addr → *redis.Client

// defaultClientOf returns a client of go-redis's default options for the
// address of shared, with shared's pool size.
func defaultClientOf(shared *redis.Client) *redis.Client {
	o := shared.Options()
	if c, ok := defaultClients.Load(o.Addr); ok {
		return c.(*redis.Client)
	}
	c := redis.NewClient(&redis.Options{Addr: o.Addr, PoolSize: o.PoolSize})
	if v, loaded := defaultClients.LoadOrStore(o.Addr, c); loaded {
		_ = c.Close()
		return v.(*redis.Client)
	}
	return c
}

// middlewareContender is a decision as an application serves it: the
// net/http middleware, keyed by the client's address, over a Limiter over
// hot-key leasing, in front of a handler that only answers 200. It is
// called in process: ServeHTTP on a request and a writer each goroutine
// reuses.
func middlewareContender() contender {
	return contender{
		name: middlewareName, module: "github.com/ratekit/ratekit",
		algorithm: "gcra, net/http middleware over hot-key leasing", kind: kindRatekit, refills: true, overshoot: exactLeaseSize - 1,
		setup: "`nethttp.New(limiter, []core.Rule{{Name: \"api\", Limit: core.PerMinute(n), Key: keyfuncs.IP()}})` around a handler that writes 200, " +
			"`limiter` as for Limiter.Check but over `leasestore.New(redisstore.New(client))`; " +
			"`ServeHTTP` in process, on a reused `*http.Request` whose `RemoteAddr` is the key's address, and a minimal `ResponseWriter`",
		open: func(ctx context.Context, client *redis.Client, limit int) (func() decideFunc, error) {
			h, err := newLimitedHandler(client, limit)
			if err != nil {
				return nil, err
			}
			return func() decideFunc {
				r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
				w := &statusWriter{header: make(http.Header)}
				return func(key string) (bool, error) {
					r.RemoteAddr = strings.TrimPrefix(identityOf(key), "ip:")
					clear(w.header) // a fresh response's header, without a new map
					w.status = 0
					h.ServeHTTP(w, r)
					switch w.status {
					case http.StatusOK:
						return true, nil
					case http.StatusTooManyRequests:
						return false, nil
					default:
						return false, fmt.Errorf("the middleware answered %d", w.status)
					}
				}
			}, nil
		},
	}
}

// newLimitedHandler returns the middleware contender's handler.
func newLimitedHandler(client *redis.Client, limit int) (http.Handler, error) {
	shared, err := redisstore.New(client)
	if err != nil {
		return nil, err
	}
	leasing, err := leasestore.New(shared)
	if err != nil {
		return nil, err
	}
	lim, err := newLimiter(middlewareName, leasing)
	if err != nil {
		return nil, err
	}
	ip, err := keyfuncs.IP()
	if err != nil {
		return nil, err
	}
	mw, err := nethttp.New(lim, []core.Rule{{Name: ruleName, Limit: core.PerMinute(limit), Key: ip}})
	if err != nil {
		return nil, err
	}
	return mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })), nil
}

// statusWriter is the least http.ResponseWriter: it keeps the header and
// the status, and drops the body.
type statusWriter struct {
	header http.Header
	status int
}

func (w *statusWriter) Header() http.Header { return w.header }
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(b), nil
}
func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}
