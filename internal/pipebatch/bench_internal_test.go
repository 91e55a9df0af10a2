package pipebatch

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/redistest"
)

// counterSrc counts hits as envoy's counting does (a counter of a window
// aligned to Redis's clock, INCRBY and PTTL, and TIME and PEXPIREAT when
// the window is new): the work of a call of ratekit-server's script.
const counterSrc = `local c = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local ends = (math.floor(now / tonumber(ARGV[2])) + 1) * tonumber(ARGV[2])
  redis.call('PEXPIREAT', KEYS[1], ends)
  ttl = ends - now
end
return {c, ttl}`

// redisCPU returns redis-server's CPU seconds so far (INFO cpu).
func redisCPU(b *testing.B, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var s float64
	for line := range strings.SplitSeq(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			s += f
		}
	}
	return s
}

// BenchmarkPipeline measures what a pipeline of 32 calls of counterSrc
// costs Redis, each call a command of its own (as over a Cluster) and the
// calls merged into one script run (as over one server), on 1000 keys and
// on one (each run on keys of its own, written before it is timed):
// redis-µs/call is redis-server's CPU (user + system) a call.
//
//	go test -run '^$' -bench BenchmarkPipeline -benchtime 100000x ./internal/pipebatch
func BenchmarkPipeline(b *testing.B) {
	client := redistest.StartServer(b).Client(b)
	sha := redis.NewScript(counterSrc).Hash()
	const per = 32
	ctx := context.Background()
	for _, keys := range []int{1000, 1} {
		for _, merge := range []bool{false, true} {
			b.Run(fmt.Sprintf("keys=%d/merged=%v", keys, merge), func(b *testing.B) {
				bt := New(client, 1)
				bt.merge = merge
				batch := make([]*call, per)
				run := func(from int) {
					for i := range batch {
						key := fmt.Sprint(b.Name(), (from+i)%keys) // new keys each run
						batch[i] = &call{ctx: ctx, src: counterSrc, args: []any{"evalsha", sha, 1, key, 1, 60000}}
					}
					bt.sendUnits(ctx, units(batch, merge))
					for _, c := range batch {
						if c.err != nil || len(c.reply) != 2 {
							b.Fatal(c.reply, c.err)
						}
					}
				}
				for i := 0; i < keys; i += per {
					run(i) // the scripts loaded, the keys written
				}
				before := redisCPU(b, client)
				b.ResetTimer()
				for i := 0; i < b.N; i += per {
					run(i)
				}
				b.StopTimer()
				b.ReportMetric((redisCPU(b, client)-before)*1e6/float64(b.N), "redis-µs/call")
			})
		}
	}
}
