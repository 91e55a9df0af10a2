package caddyratekit

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/leasestore"
	"github.com/ratekit/ratekit/redisstore"
)

// What Provision builds is shared by configuration, reference counted:
// every handler, of one config or of the configs a reload replaces, that
// names the same Redis gets the same client and store (a backend), and
// every handler that also sets the same Limiter options gets the same
// Limiter. Caddy provisions a new config before it cleans up the old one,
// so across a reload that keeps them, the count never reaches zero: the
// connections stay open, and so do the Limiter's denied-key cache and its
// local fallback counts, which would otherwise start afresh during an
// outage. The last handler's Cleanup closes what nobody uses any more.
var (
	backends = caddy.NewUsagePool() // backendConfig key → *backend
	limiters = caddy.NewUsagePool() // limiterConfig key → *sharedLimiter
)

// backendConfig is what a client and its store are made from, with
// placeholders replaced.
type backendConfig struct {
	Redis      Redis `json:"redis"`
	NoBatching bool  `json:"no_batching"`
}

// backend is a Redis client and the store over it.
type backend struct {
	client redis.UniversalClient
	store  *redisstore.Store
}

// Destruct closes the store (its reset subscription and pipelines), then
// the client (its connections).
func (b *backend) Destruct() error {
	return errors.Join(b.store.Close(), b.client.Close())
}

func openBackend(c backendConfig) (*backend, error) {
	client, err := newClient(c.Redis)
	if err != nil {
		return nil, err
	}
	var opts []redisstore.Option
	if c.NoBatching {
		opts = append(opts, redisstore.WithoutBatching())
	}
	store, err := redisstore.New(client, opts...)
	if err != nil {
		return nil, errors.Join(err, client.Close())
	}
	return &backend{client: client, store: store}, nil
}

// newClient makes the go-redis client of r, which has passed validate and
// had its placeholders replaced. Contexts bound every call (the Limiter's
// deadline holds on the request's goroutine), and go-redis does not retry:
// within a deadline of milliseconds a retry has no time left, and the
// circuit breaker decides when to try again. A URL's own max_retries
// (other than 0, go-redis's default) and dialer_retries stand.
func newClient(r Redis) (redis.UniversalClient, error) {
	switch {
	case r.ClusterURL != "":
		o, err := redis.ParseClusterURL(r.ClusterURL)
		if err != nil {
			return nil, configErr("redis cluster_url: %v", err)
		}
		o.ContextTimeoutEnabled = true
		o.MaxRetries = noRetries(o.MaxRetries)
		o.DialerRetries = cmp.Or(o.DialerRetries, 1)
		return redis.NewClusterClient(o), nil
	case r.SentinelURL != "":
		o, err := redis.ParseFailoverURL(r.SentinelURL)
		if err != nil {
			return nil, configErr("redis sentinel_url: %v", err)
		}
		if o.MasterName == "" {
			o.MasterName = "mymaster"
		}
		o.ContextTimeoutEnabled = true
		o.MaxRetries = noRetries(o.MaxRetries)
		o.DialerRetries = cmp.Or(o.DialerRetries, 1)
		return redis.NewFailoverClient(o), nil
	default:
		o, err := redis.ParseURL(r.URL)
		if err != nil {
			return nil, configErr("redis url: %v", err)
		}
		o.ContextTimeoutEnabled = true
		o.MaxRetries = noRetries(o.MaxRetries)
		o.DialerRetries = cmp.Or(o.DialerRetries, 1)
		return redis.NewClient(o), nil
	}
}

// noRetries turns go-redis's default retry count (0, which means 3) into
// none (-1).
func noRetries(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// limiterConfig is what a shared Limiter is made from.
type limiterConfig struct {
	Backend     string        `json:"backend"` // the backendConfig's key
	Prefix      string        `json:"prefix"`
	Timeout     time.Duration `json:"timeout"`
	Fail        string        `json:"fail"`
	Replicas    int           `json:"replicas"`
	Breaker     Breaker       `json:"breaker"`
	DeniedCache *int          `json:"denied_cache"`
	Lease       *Lease        `json:"lease"`
}

// sharedLimiter is a Limiter, the lease store between it and the backend
// when it leases, and the backend it holds a reference to.
type sharedLimiter struct {
	limiter    *core.Limiter
	lease      *leasestore.Store // nil unless it leases
	backendKey string
	log        liveHandler
}

// Destruct closes the Limiter, waiting for its goroutines, and its lease
// store, then lets go of the backend, which closes once no Limiter uses
// it.
func (s *sharedLimiter) Destruct() error {
	err := s.limiter.Close()
	if s.lease != nil {
		err = errors.Join(err, s.lease.Close())
	}
	_, derr := backends.Delete(s.backendKey)
	return errors.Join(err, derr)
}

// poolKey returns the key that v is shared under: its JSON.
func poolKey(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // cannot happen: plain strings, numbers and bools
	}
	return string(b)
}

// limiterUse is one handler's use of a shared Limiter.
type limiterUse struct {
	*sharedLimiter
	key   string // in limiters
	logID int    // of the handler's logger, in log
}

// acquireLimiter returns a use of the Limiter of c and bc, making it (and
// the backend) if no handler uses one yet. log receives the Limiter's
// logs until a newer use or the release.
func acquireLimiter(bc backendConfig, c limiterConfig, log *slog.Logger) (limiterUse, error) {
	c.Backend = poolKey(bc)
	key := poolKey(c)
	v, _, err := limiters.LoadOrNew(key, func() (caddy.Destructor, error) {
		return newSharedLimiter(bc, c)
	})
	if err != nil {
		return limiterUse{}, err
	}
	s := v.(*sharedLimiter)
	return limiterUse{sharedLimiter: s, key: key, logID: s.log.add(log)}, nil
}

// release ends the use: the Limiter logs through the newest use left, and
// closes when none is left.
func (u limiterUse) release() error {
	u.log.remove(u.logID)
	_, err := limiters.Delete(u.key)
	return err
}

func newSharedLimiter(bc backendConfig, c limiterConfig) (*sharedLimiter, error) {
	v, _, err := backends.LoadOrNew(c.Backend, func() (caddy.Destructor, error) { return openBackend(bc) })
	if err != nil {
		return nil, err
	}
	b := v.(*backend)
	var store core.Store = b.store
	var lease *leasestore.Store
	if c.Lease != nil {
		var lopts []leasestore.Option
		if c.Lease.Size != 0 {
			lopts = append(lopts, leasestore.WithSize(c.Lease.Size))
		}
		if c.Lease.Hold != 0 {
			lopts = append(lopts, leasestore.WithHold(time.Duration(c.Lease.Hold)))
		}
		if lease, err = leasestore.New(b.store, lopts...); err != nil {
			return nil, releaseBackend(c.Backend, err)
		}
		store = lease
	}
	closeLease := func(err error) error {
		if lease != nil {
			err = errors.Join(err, lease.Close())
		}
		return releaseBackend(c.Backend, err)
	}
	live := newLiveHandler()
	opts := []core.Option{core.WithLogger(slog.New(live))}
	if c.Prefix != "" {
		opts = append(opts, core.WithPrefix(c.Prefix))
	}
	if c.Timeout != 0 {
		opts = append(opts, core.WithTimeout(c.Timeout))
	}
	if c.Fail != "" {
		p, err := core.ParseFailurePolicy(c.Fail)
		if err != nil {
			return nil, closeLease(err)
		}
		opts = append(opts, core.WithFailurePolicy(p))
	}
	if c.Replicas != 0 {
		opts = append(opts, core.WithReplicas(c.Replicas))
	}
	if c.Breaker != (Breaker{}) {
		opts = append(opts, core.WithBreaker(core.BreakerConfig{
			Failures: c.Breaker.Failures, Backoff: time.Duration(c.Breaker.Backoff), MaxBackoff: time.Duration(c.Breaker.MaxBackoff),
		}))
	}
	if c.DeniedCache != nil {
		opts = append(opts, core.WithDeniedCache(*c.DeniedCache))
	}
	l, err := core.NewLimiter(store, opts...)
	if err != nil {
		return nil, closeLease(err)
	}
	return &sharedLimiter{limiter: l, lease: lease, backendKey: c.Backend, log: live}, nil
}

// releaseBackend lets go of the backend of key after err, and returns err.
func releaseBackend(key string, err error) error {
	if _, derr := backends.Delete(key); derr != nil {
		return fmt.Errorf("%w (and closing Redis: %v)", err, derr)
	}
	return err
}
