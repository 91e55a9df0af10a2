package inflight

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/netfault"
	"github.com/ratekit/ratekit/internal/redistest"
)

var renewKeys = flag.Int("renewkeys", 10_000, "busy keys of BenchmarkRenewRound")

// BenchmarkRenewRound measures one renewal round of -renewkeys busy keys,
// one holder each, through a proxy that adds 1 ms or 4 ms to every reply
// of a real redis-server, and fails unless every lease was renewed. It
// reports the round's time per key, and keys/lease: how many busy keys
// one round renews in the default lease time (10 s), at the rate
// measured. Renewals keep up with about half as many (a round within half
// the lease leaves the other half for a slow moment): see WithLease.
//
//	go test ./inflight -run '^$' -bench RenewRound -renewkeys 100000
func BenchmarkRenewRound(b *testing.B) {
	srv := redistest.StartServer(b)
	direct := srv.Client(b)
	for _, latency := range []time.Duration{time.Millisecond, 4 * time.Millisecond} {
		b.Run(fmt.Sprintf("latency=%v/keys=%d", latency, *renewKeys), func(b *testing.B) {
			proxy := netfault.Start(b, srv.Addr())
			client := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
			defer client.Close()
			l, err := New(client, func(l *Limiter) error {
				l.newTicker = func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} } // rounds run here only
				return nil
			}, OnError(func(err error) { b.Error(err) }))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			leases := holdKeys(b, l, direct, *renewKeys)
			proxy.Inject(b, netfault.Latency(latency, 0))
			ctx := context.Background()
			l.renewAll(ctx) // the script reaches Redis's cache
			b.ResetTimer()
			for b.Loop() {
				l.renewAll(ctx)
			}
			perRound := b.Elapsed() / time.Duration(b.N)
			b.StopTimer()
			for _, le := range leases {
				if le.Lost() {
					b.Fatalf("lease of %s lost", le.key)
				}
			}
			if ttl := direct.PTTL(ctx, leases[len(leases)-1].key).Val(); ttl < DefaultLease-perRound-time.Second {
				b.Fatalf("the last key expires in %v: it was not renewed", ttl)
			}
			perKey := perRound / time.Duration(len(leases))
			b.ReportMetric(float64(perKey.Nanoseconds()), "ns/key")
			b.ReportMetric(float64(DefaultLease/perKey), "keys/lease")
		})
	}
}

// holdKeys makes l hold one slot of each of n keys, written straight to
// Redis with a lease that runs out in a minute, as if acquired.
func holdKeys(tb testing.TB, l *Limiter, direct *redis.Client, n int) []*Lease {
	tb.Helper()
	ctx := context.Background()
	expiry := float64(time.Now().Add(time.Minute).UnixMilli())
	leases := make([]*Lease, n)
	pipe := direct.Pipeline()
	for i := range leases {
		le := &Lease{l: l, key: "ratekit:bench:{" + strconv.Itoa(i) + "}", holder: "h" + strconv.Itoa(i)}
		pipe.ZAdd(ctx, le.key, redis.Z{Score: expiry, Member: le.holder})
		pipe.PExpire(ctx, le.key, time.Minute)
		if pipe.Len() >= 2000 {
			if _, err := pipe.Exec(ctx); err != nil {
				tb.Fatal(err)
			}
		}
		l.track(le)
		leases[i] = le
	}
	if _, err := pipe.Exec(ctx); err != nil {
		tb.Fatal(err)
	}
	return leases
}
