package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
	"github.com/ratekit/ratekit/redisstore"
)

// BenchmarkCharge sets a charge beside a decision of one key of each
// algorithm on a private redis-server: redis-µs/op is Redis's own time per
// operation (INFO commandstats), evalsha/op the script calls per operation.
// "decide" and "charge" make one call at a time (a round trip each);
// "charge-batched" lets 64 goroutines share a batching store, whose
// pipelines carry many charges per round trip, as they carry decisions.
// The limit is far above what the run spends, and the charges of 10 units
// stay within it, so that every call writes.
//
//	go test -run '^$' -bench BenchmarkCharge -benchtime 5000x ./redisstore
func BenchmarkCharge(b *testing.B) {
	srv := redistest.StartServer(b)
	client := srv.Client(b, func(o *redis.Options) { o.PoolSize = 128 })
	ctx := context.Background()
	plain := testkit.MustRedis(client, redisstore.WithoutBatching())
	batched := testkit.MustRedis(client, redisstore.WithBatching(redisstore.Batching{}))
	b.Cleanup(func() { batched.Close() })
	keys := testkit.BenchKeys(b, "charge:", 1000)
	for _, alg := range testkit.Algorithms {
		limit := core.PerHour(10_000).WithAlgorithm(alg)
		for _, c := range []struct {
			name  string
			store *redisstore.Store
			g     int
			op    func(s *redisstore.Store, key string) error
		}{
			{"decide", plain, 1, func(s *redisstore.Store, key string) error {
				_, err := s.AllowAllN(ctx, []core.Check{{Key: key, Limit: limit}}, 1)
				return err
			}},
			{"charge", plain, 1, func(s *redisstore.Store, key string) error {
				_, err := s.ChargeAllN(ctx, []core.Check{{Key: key, Limit: limit}}, 10)
				return err
			}},
			{"charge-batched", batched, 64, func(s *redisstore.Store, key string) error {
				_, err := s.ChargeAllN(ctx, []core.Check{{Key: key, Limit: limit}}, 10)
				return err
			}},
		} {
			b.Run(c.name+"/"+alg.String(), func(b *testing.B) {
				if err := client.FlushAll(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				if err := client.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				testkit.RunConcurrent(b, c.g, func(i int) (bool, error) {
					return true, c.op(c.store, keys[i%len(keys)])
				})
				calls, usec := testkit.EvalshaStats(b, ctx, client)
				b.ReportMetric(usec/float64(b.N), "redis-µs/op")
				b.ReportMetric(float64(calls)/float64(b.N), "evalsha/op")
			})
		}
	}
}
