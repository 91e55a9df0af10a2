package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/redisstore"
)

// Backend is the Redis behind an app's Limiter, and what Close releases.
type Backend struct {
	// Client is the go-redis client: a *redis.Client (of a server, or of
	// the master the Sentinels name) or a *redis.ClusterClient.
	Client redis.UniversalClient
	// Store decides over Client.
	Store *redisstore.Store
	// Embedded is the embedded miniredis, nil when the app uses a Redis
	// server, Cluster or Sentinel.
	Embedded *miniredis.Miniredis
	// Kind names the store for the start-up log: "embedded miniredis",
	// "Redis", "Redis Cluster" or "Redis Sentinel".
	Kind string
	// Attrs describe it, with any password redacted.
	Attrs []slog.Attr

	closeOnce sync.Once
	closeErr  error
}

// OpenBackend connects to the configured Redis: the server of RedisURL, the
// Cluster of RedisCluster, the master that the Sentinels of RedisSentinel
// name, or else a miniredis started on a free loopback port. It does not
// wait for a server to answer: [Backend.Ping] does.
func OpenBackend(c Config) (*Backend, error) {
	b := &Backend{}
	switch {
	case len(c.RedisCluster) > 0:
		b.Client = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 c.RedisCluster,
			ContextTimeoutEnabled: true, // honour the Limiter's deadline
			MaxRetries:            -1,   // the circuit breaker decides when to try again,
			DialerRetries:         1,    // not the client
		})
		b.Kind = "Redis Cluster"
		b.Attrs = []slog.Attr{slog.String("seeds", strings.Join(c.RedisCluster, ","))}
	case len(c.RedisSentinel) > 0:
		b.Client = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            c.SentinelMaster,
			SentinelAddrs:         c.RedisSentinel,
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialerRetries:         1,
		})
		b.Kind = "Redis Sentinel"
		b.Attrs = []slog.Attr{
			slog.String("sentinels", strings.Join(c.RedisSentinel, ",")),
			slog.String("master", c.SentinelMaster),
		}
	case c.RedisURL != "":
		opts, err := c.redisOptions()
		if err != nil {
			return nil, err
		}
		opts.ContextTimeoutEnabled = true
		if opts.MaxRetries == 0 { // not set in the URL
			opts.MaxRetries = -1
		}
		opts.DialerRetries = 1
		b.Client = redis.NewClient(opts)
		u := c.RedisURL
		if !strings.Contains(u, "://") {
			u = "redis://" + u
		}
		b.Kind = "Redis"
		b.Attrs = []slog.Attr{slog.String("url", redactURL(u))}
	default:
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("start the embedded miniredis: %w", err)
		}
		b.Embedded = mr
		b.Client = redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		b.Kind = "embedded miniredis"
		b.Attrs = []slog.Attr{
			slog.String("addr", mr.Addr()),
			slog.String("share", "-redis redis://"+mr.Addr()+" makes other apps share these limits"),
		}
	}
	var opts []redisstore.Option
	if c.NoBatch {
		opts = append(opts, redisstore.WithoutBatching()) // batching is the default
	}
	store, err := redisstore.New(b.Client, opts...)
	if err != nil {
		b.Client.Close()
		if b.Embedded != nil {
			b.Embedded.Close()
		}
		return nil, err
	}
	b.Store = store
	return b, nil
}

// Ping reports whether Redis answers within timeout.
func (b *Backend) Ping(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if cc, ok := b.Client.(*redis.ClusterClient); ok {
		// every master must answer, or some keys have nowhere to go
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		})
	}
	return b.Client.Ping(ctx).Err()
}

// Close closes the store, the client and any embedded miniredis. Later
// calls do nothing and return the first call's error.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.closeErr = errors.Join(b.Store.Close(), b.Client.Close())
		if b.Embedded != nil {
			b.Embedded.Close()
		}
	})
	return b.closeErr
}
