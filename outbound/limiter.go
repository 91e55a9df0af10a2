package outbound

import (
	"crypto/rand"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"

	"github.com/ratekit/ratekit/internal/pipebatch"
	"github.com/ratekit/ratekit/internal/redisopt"
	"github.com/ratekit/ratekit/internal/storekey"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// ErrWouldExceedDeadline is returned, wrapped, by a wait whose turn would
// come after its context's deadline: nothing was reserved, so the turn
// stays for others.
var ErrWouldExceedDeadline = errors.New("ratekit: outbound: wait would exceed the context's deadline")

// ErrExceedsBurst is returned, wrapped, for n above the Limit's burst: no
// wait could ever grant it.
var ErrExceedsBurst = errors.New("ratekit: outbound: n exceeds the burst")

// ErrClosed is returned by a Limiter after [Limiter.Close].
var ErrClosed = errors.New("ratekit: outbound: limiter closed")

// ErrNoPermission is wrapped, with Redis's own error, by the error of a
// [Limiter.Pause] whose Redis user may not publish on the Limiter's pause
// channel (the pause applied in Redis, the other processes were not told),
// and by the error [OnError] hears when Redis refuses the subscription to
// it. The channel is the prefix, the name and ":pauses"; an ACL user needs
// it, or a pattern such as &ratekit:outbound:*. The error's text names it.
var ErrNoPermission = errors.New("ratekit: outbound: the Redis user lacks a permission")

// Limiter keeps every process that shares its Redis under one [Limit] for
// each key (an upstream, an account of it), handing callers their turns as
// golang.org/x/time/rate's Limiter does within one process: [Limiter.Wait]
// sleeps until the caller's turn, [Limiter.Reserve] tells when it is,
// [Limiter.Allow] takes a turn only if it is now. It is safe for
// concurrent use.
//
// # How it works
//
// Each key's schedule is GCRA's theoretical arrival time in Redis, on
// Redis's clock. One script call per turn pushes it forward by the
// interval between units and hands the caller its own time to act, so a
// waiter sleeps once, to its turn: no polling, and no crowd waking at once.
// The wait comes back as a duration from Redis's now, so the processes'
// own clocks never enter a decision, and a Redis clock that steps back is
// held where it was.
//
// # Pauses
//
// [Limiter.Pause] (which the [Transport] calls when the upstream answers
// 429 or 503 with Retry-After, or says its quota is spent) stops a key for
// the whole fleet: turns that fell in the pause are void, and their
// holders, told through Redis pub/sub, take new turns after it.
//
// # When Redis fails
//
// Every Redis call has a deadline ([WithTimeout]), and a circuit breaker
// ([WithBreaker]) stops calling a Redis that keeps failing. Meanwhile each
// process takes turns from a limiter of its own at its share of the rate,
// Rate divided by the fleet's size (told with [WithFleetSize], or learned
// from the heartbeats), never the whole rate, and only after the last turn
// it knew the fleet had handed out. Back on Redis, its first call keeps
// the fleet's new turns after its own last local one, and for a while
// every process takes turns at its share of the rate, until all of them
// are back.
//
// Two goroutines run per Limiter: the heartbeat and the pause
// subscription. [Limiter.Close] stops them.
type Limiter struct {
	client redis.Scripter
	keeps  bool // the client gives up at its context's deadline by itself
	// divert, when not nil, keeps the deadlines of calls made with
	// contexts it marked, over a *redis.Client without
	// ContextTimeoutEnabled (see call)
	divert *redisopt.Divert
	// deadlines are the pooled deadlines of calls to a client that keeps
	// them (see call)
	deadlines tickctx.Pool
	// batch lets concurrent reservations share pipelined round trips
	// (and over one server, script runs); nil over a client that cannot
	// pipeline, whose reservations go alone
	batch   *pipebatch.Batcher
	name    string
	limit   Limit
	cfg     config
	argv    []any // ARGV[1..8] of every script (see scripts/state.lua)
	channel string
	member  string

	breaker     *gobreaker.TwoStepCircuitBreaker[struct{}]
	lastLocal   atomic.Int64  // unix ns of the latest turn decided without Redis
	learned     atomic.Int64  // the fleet's size as the heartbeats count it
	sleeping    atomic.Int64  // callers asleep waiting for their turn
	lastIV      atomic.Int64  // the latest interval Redis replied, for RateChanged
	localPerSec float64       // the whole rate, units per second, margin included
	lateLimit   time.Duration // a turn woken up to later than this is taken again

	now func() time.Time // the local clock; a test hook

	mu     sync.Mutex
	keys   map[string]*keyState // by storage key
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

// pipelines is the most reservation pipelines in flight at once, as many
// as a redisstore.Store's by default: a lone reservation goes out at once,
// alone; the ones that come while all of them are out queue, and go
// together in the next.
const pipelines = 8

// New returns a Limiter of limit over client, for the limiter named name:
// its keys are prefix + name + ":{" + key + "}", so Limiters of different
// names (one per upstream) never share a schedule, and processes that give
// the same name and key share one. client is a *redis.Client,
// *redis.ClusterClient, *redis.Ring, a Sentinel failover client or anything
// else that runs scripts; the Limiter never closes it. Pauses reach other
// processes at once through a client that can subscribe (those four can),
// and otherwise at their next turn. Through those four, reservations made
// at the same time share pipelined round trips (over a Cluster or a Ring,
// one to each node their keys live on); through one server's client, one
// script run too, each reserved in turn as alone.
//
// New starts the heartbeat and the subscription, which [Limiter.Close]
// stops. It returns an error for a nil client, a bad name, an invalid
// limit and a bad option.
func New(client redis.Scripter, name string, limit Limit, opts ...Option) (*Limiter, error) {
	if client == nil {
		return nil, errors.New("ratekit: outbound: New: nil client")
	}
	if err := storekey.ValidateName("limiter name", name, false); err != nil {
		return nil, err
	}
	if err := limit.Validate(); err != nil {
		return nil, err
	}
	cfg := config{
		prefix: DefaultPrefix, timeout: DefaultTimeout, margin: DefaultMargin,
		heartbeat: DefaultHeartbeat, failures: DefaultBreakerFailures, openFor: DefaultBreakerOpen,
	}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("ratekit: outbound: New: nil option")
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	divert, keeps := redisopt.KeepDeadlines(client)
	l := &Limiter{
		client: client, keeps: keeps, divert: divert, name: name, limit: limit, cfg: cfg,
		channel: cfg.prefix + name + ":pauses", member: rand.Text(),
		now: time.Now, keys: make(map[string]*keyState), stop: make(chan struct{}),
	}
	if c, ok := client.(pipebatch.Client); ok {
		l.batch = pipebatch.New(c, pipelines)
	}
	if cfg.now != nil {
		l.now = cfg.now
	}
	l.argv = l.configArgs()
	l.localPerSec = float64(limit.Rate) / (limit.Period.Seconds() * (1 + cfg.margin))
	l.lateLimit = time.Duration(float64(limit.Period) * cfg.margin)
	l.breaker = l.newBreaker()
	l.start()
	return l, nil
}

// configArgs returns ARGV[1..8] of the scripts for the Limiter's limit.
func (l *Limiter) configArgs() []any {
	period := l.limit.Period.Microseconds()
	span := int64(float64(period) * (1 + l.cfg.margin))
	inc, minr, hold, dec := "0", "0", "0", "0"
	if a := l.cfg.aimd; a != nil {
		r := a.resolved(l.limit)
		inc, minr = ftoa(r.Increase), ftoa(r.Min)
		hold, dec = strconv.FormatInt(r.Hold.Microseconds(), 10), ftoa(r.Decrease)
	}
	return []any{
		strconv.Itoa(l.limit.Rate), strconv.FormatInt(span, 10), strconv.Itoa(l.limit.burst()),
		strconv.FormatInt(period, 10), inc, minr, hold, dec,
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// Name returns the Limiter's name.
func (l *Limiter) Name() string { return l.name }

// Limit returns the Limiter's limit.
func (l *Limiter) Limit() Limit { return l.limit }

// Key returns the Redis key of the schedule of key: prefix + name + ":{" +
// key + "}". A key that contains '{', '}' or a control byte, that starts
// with '#', or that is longer than 128 bytes is replaced by "#" and its
// hex SHA-256, so no key can steer its Cluster slot or collide with
// another. It returns an error wrapping core.ErrInvalidIdentity for an
// empty key.
func (l *Limiter) Key(key string) (string, error) {
	return storekey.Key(l.cfg.prefix, l.name, key)
}

// Close stops the heartbeat and the subscription and waits for them,
// leaving the fleet (so the others' learned size drops at once) and for
// Redis calls abandoned at their deadline. Waits in progress go on; new
// calls return [ErrClosed]. Close is idempotent and returns nil.
func (l *Limiter) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	l.wg.Wait()
	return nil
}

func (l *Limiter) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}
