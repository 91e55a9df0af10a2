package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/storecheck"
)

// TestGCRAStoredValues writes each form a GCRA key may hold (this
// version's "<tat - interval>\0<interval>", under the limit's interval and
// under another; an earlier version's "<tat>:<interval>" likewise; a bare
// "<tat>"; a fixed window's count; text; another type) and decides it
// through each of the three GCRA scripts: the one-key script
// (gcra_single.lua), the batched one (gcra_many.lua, two calls of the key
// in one script call) and the generic decide (gcra.lua through decide.lua,
// the key with a second one). Every path must count what the value says
// was spent, rescaled to the limit's interval, on a real redis-server,
// whose Lua reads this version's values on its fast path, and on miniredis,
// whose Lua takes the slow one.
func TestGCRAStoredValues(t *testing.T) {
	t.Run("redis-server", func(t *testing.T) {
		c := redistest.StartServer(t).Client(t)
		testGCRAStoredValues(t, c, func() int64 { return redisNow(t, c) })
	})
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.RunT(t)
		at := time.Date(2026, 12, 1, 12, 0, 0, 123456000, time.UTC)
		m.SetTime(at)
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { c.Close() })
		testGCRAStoredValues(t, c, func() int64 { return at.UnixMicro() })
	})
}

// redisNow reads the server's clock in µs.
func redisNow(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.UnixMicro()
}

func testGCRAStoredValues(t *testing.T, c *redis.Client, now func() int64) {
	ctx := context.Background()
	limit := core.PerHour(10) // 360 s a unit
	iv := storecheck.Interval(limit)
	// each form holds 3 units spent at now() (a little less by the time the
	// call runs), or none
	type form struct {
		name  string
		value func(tat int64) string // the value, given the TAT of 3 units spent
		spent int                    // units it holds under limit
	}
	// a limit of 20 per hour wrote it: its 3 outstanding units stay 3 under
	// ours, the wait rescaled
	forms := []form{
		{"this version's", func(tat int64) string { return fmt.Sprintf("%d\x00%d", tat-iv, iv) }, 3},
		{"this version's, another interval", func(tat int64) string {
			other := iv / 2
			tat = tat - 3*iv + 3*other
			return fmt.Sprintf("%d\x00%d", tat-other, other)
		}, 3},
		{"an earlier version's", func(tat int64) string { return fmt.Sprintf("%d:%d", tat, iv) }, 3},
		{"an earlier version's, another interval", func(tat int64) string {
			other := iv / 2
			return fmt.Sprintf("%d:%d", tat-3*iv+3*other, other)
		}, 3},
		{"a bare TAT", func(tat int64) string { return strconv.FormatInt(tat, 10) }, 3},
		{"a fixed window's count", func(int64) string { return "4" }, 0},
		{"text", func(int64) string { return "12:34:56" }, 0},
		{"another type", nil, 0},
	}
	single := newScript(singleSource(limit), true)
	many := newScript(manySource(limit), false)
	generic := scriptFor([]core.Check{{Limit: limit}})
	args := []any{strconv.Itoa(int(limit.Algorithm)), strconv.Itoa(limit.Rate), strconv.FormatInt(limit.Period.Milliseconds(), 10), strconv.Itoa(limit.Burst)}
	for _, f := range forms {
		for _, path := range []string{"single", "many", "generic"} {
			key := fmt.Sprintf("fmt:%s:{%s}", path, f.name)
			if f.value == nil {
				if err := c.HSet(ctx, key, "a", 1).Err(); err != nil {
					t.Fatal(err)
				}
			} else if err := c.Set(ctx, key, f.value(now()+3*iv), time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			var remaining []int
			switch path {
			case "single":
				v, err := single.Run(ctx, c, []string{key}).Int64()
				if err != nil {
					t.Fatalf("%s, %s: %v", f.name, path, err)
				}
				r, err := gcraResult(limit, 1, v)
				if err != nil || !r.Allowed {
					t.Fatalf("%s, %s: %+v, %v; want allowed", f.name, path, r, err)
				}
				remaining = append(remaining, r.Remaining)
			case "many":
				vs, err := many.Run(ctx, c, []string{key, key}).Int64Slice()
				if err != nil || len(vs) != 2 {
					t.Fatalf("%s, %s: %v, %v", f.name, path, vs, err)
				}
				for _, v := range vs {
					r, err := gcraResult(limit, 1, v)
					if err != nil || !r.Allowed {
						t.Fatalf("%s, %s: %+v, %v; want allowed", f.name, path, r, err)
					}
					remaining = append(remaining, r.Remaining)
				}
			case "generic":
				second := key + ":second"
				reply, err := generic.Run(ctx, c, []string{key, second}, append(append([]any{1}, args...), args...)...).Text()
				if err != nil {
					t.Fatalf("%s, %s: %v", f.name, path, err)
				}
				results := make([]core.Result, 2)
				if err := parseReply(reply, []core.Check{{Key: key, Limit: limit}, {Key: second, Limit: limit}}, results); err != nil || !results[0].Allowed {
					t.Fatalf("%s, %s: %+v, %v; want allowed", f.name, path, results, err)
				}
				remaining = append(remaining, results[0].Remaining)
			}
			// what was spent, and each unit this path took
			for i, got := range remaining {
				if want := limit.Burst - f.spent - 1 - i; got != want {
					t.Errorf("%s, %s, call %d: %d remaining, want %d", f.name, path, i+1, got, want)
				}
			}
			// the key now holds this version's value under the limit's
			// interval, which the one-key script reads as what was spent
			v, err := c.Get(ctx, key).Result()
			if err != nil {
				t.Fatalf("%s, %s: GET: %v", f.name, path, err)
			}
			if _, ok := parseStored(v, iv); !ok {
				t.Errorf("%s, %s: stored %q; want <tat - interval>\\0%d", f.name, path, v, iv)
			}
			if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Duration(f.spent+len(remaining))*time.Duration(iv)*time.Microsecond+time.Second {
				t.Errorf("%s, %s: PTTL %v; want about until the bucket is full", f.name, path, ttl)
			}
		}
	}
}

// parseStored reads "<s>\0<interval>" as this version writes it, for
// interval, and returns the TAT.
func parseStored(v string, interval int64) (int64, bool) {
	want := "\x00" + strconv.FormatInt(interval, 10)
	if len(v) <= len(want) || v[len(v)-len(want):] != want {
		return 0, false
	}
	s, err := strconv.ParseInt(v[:len(v)-len(want)], 10, 64)
	if err != nil || s <= 0 {
		return 0, false
	}
	return s + interval, true
}
