package core_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/internal/testkit"
)

// The charge exactness test runs this test binary again as child
// processes; these variables carry a child's assignment.
const (
	envChargeChild = "RATEKIT_CHARGE_CHILD"
	envChargeAddr  = "RATEKIT_CHARGE_ADDR"
	envChargeID    = "RATEKIT_CHARGE_ID"
	envChargeAlg   = "RATEKIT_CHARGE_ALG"
)

const (
	chargeProcs      = 4
	chargeGoroutines = 8
	chargeCalls      = 25 // per goroutine: 4 × 8 × 25 = 800 checks, charging 1 to 150 each, or 5,000 to 25,000 one time in ten and
	// at half the goroutines' first
	chargeLimit = 2000
)

// chargeRule is the rule the children charge under: 2,000 units a year,
// so that nothing refills while they run and what Redis holds is what was
// spent.
func chargeRule(alg core.Algorithm, id string) core.Rule {
	l := core.Limit{Rate: chargeLimit, Period: core.MaxPeriod, Burst: chargeLimit, Algorithm: alg}
	return rule("charged", l, id)
}

// TestChargeAcrossProcesses has 4 processes of 8 goroutines each admit
// requests on one key while it is not in debt and charge each a random
// cost of 1 to 150, or 5,000 to 25,000 one time in ten and at half the goroutines' first
// (the key runs out,
// goes into debt, and charges pass its bound), for every algorithm on a real redis-server. What Redis
// holds at the end equals, to the unit, what the charges say they spent.
// Then a key of 100 a second is charged 300: a request is admitted only
// once the wait the charge reported has passed on Redis's clock.
func TestChargeAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Redis servers and child processes")
	}
	srv := redistest.StartServer(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	for _, alg := range testkit.Algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			id := fmt.Sprintf("apikey:charge-%d", time.Now().UnixNano())
			outs := make([]bytes.Buffer, chargeProcs)
			cmds := make([]*exec.Cmd, chargeProcs)
			for i := range cmds {
				cmd := exec.Command(os.Args[0], "-test.run=^TestChargeChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), envChargeChild+"=1", envChargeAddr+"="+srv.Addr(),
					envChargeID+"="+id, envChargeAlg+"="+alg.String())
				cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds[i] = cmd
			}
			charged, admitted, clamped := 0, 0, 0
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
				}
				var c, a, k int
				if _, err := fmt.Sscanf(lastLine(outs[i].String(), "charged="), "charged=%d admitted=%d clamped=%d", &c, &a, &k); err != nil {
					t.Fatalf("child %d printed no totals (%v):\n%s", i, err, outs[i].String())
				}
				charged, admitted, clamped = charged+c, admitted+a, clamped+k
			}
			// one more charge, far past every algorithm's bound, lands
			// whatever the balance and must be clamped: the children's
			// clamps depend on how their calls interleave
			l := newLimiter(t, testkit.MustRedis(rdb), core.WithTimeout(30*time.Second), core.WithFailurePolicy(core.FailClosed))
			huge := 50 * chargeLimit
			last, err := l.Charge(ctx, chargeRule(alg, id), id, huge)
			if err != nil {
				t.Fatal(err)
			}
			if last.Charged >= huge {
				t.Fatalf("a charge of %d was not clamped: %+v", huge, last)
			}
			charged += last.Charged
			if last.Charged < huge {
				clamped++
			}
			key, err := l.StorageKey("charged", id)
			if err != nil {
				t.Fatal(err)
			}
			held := heldUnits(t, rdb, key, alg)
			if held != charged {
				t.Fatalf("Redis holds %d units, the charges say %d (%d admitted, %d clamped)", held, charged, admitted, clamped)
			}
			bound := chargeLimit + core.MaxDebtPeriods*chargeLimit
			if alg == core.SlidingWindowLog {
				bound = 2 * chargeLimit
			}
			if held > bound {
				t.Fatalf("Redis holds %d units, past the debt bound of %d", held, bound)
			}
			if admitted == 0 {
				t.Fatalf("fixture: no request admitted")
			}
			t.Logf("%s: %d requests admitted, %d units charged, Redis holds %d; %d charges clamped at the bound", alg, admitted, charged, held, clamped)

			// a debt repaid on Redis's clock
			r := rule("repaid", core.PerSecond(100).WithAlgorithm(alg), id)
			before := redisNow(t, rdb)
			res, err := l.Charge(ctx, r, id, 300)
			if err != nil || res.Allowed || res.RetryAfter <= 0 {
				t.Fatalf("charge of 300 of 100: %+v %v, want a debt", res, err)
			}
			deadline := time.Now().Add(time.Minute)
			for {
				d, err := check(t, l, r)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("still denied a minute after a debt of %v: %+v", res.RetryAfter, d)
				}
				time.Sleep(10 * time.Millisecond)
			}
			after := redisNow(t, rdb)
			if waited := after.Sub(before); waited < res.RetryAfter {
				t.Fatalf("admitted %v after the charge by Redis's clock, before its RetryAfter of %v", waited, res.RetryAfter)
			}
		})
	}
}

// lastLine returns the last line of out that starts with prefix.
func lastLine(out, prefix string) string {
	var last string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			last = line
		}
	}
	return last
}

// redisNow reads the time of Redis's clock.
func redisNow(t *testing.T, rdb *redis.Client) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// heldUnits reads how many units key holds under alg, none having refilled:
// a GCRA TAT's intervals ahead of Redis's clock (rounded up: the clock
// moved on by less than an interval since the first), a fixed window's
// count, a sliding log's members, a sliding counter's counts.
func heldUnits(t *testing.T, rdb *redis.Client, key string, alg core.Algorithm) int {
	t.Helper()
	ctx := context.Background()
	switch alg {
	case core.GCRA:
		v, err := rdb.Get(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		s, iv, ok := strings.Cut(v, "\x00")
		if !ok {
			t.Fatalf("GCRA value %q", v)
		}
		tatLess, _ := strconv.ParseInt(s, 10, 64)
		interval, _ := strconv.ParseInt(iv, 10, 64)
		now := redisNow(t, rdb).UnixMicro()
		return int(math.Ceil(float64(tatLess+interval-now) / float64(interval)))
	case core.FixedWindow:
		n, err := rdb.Get(ctx, key).Int()
		if err != nil {
			t.Fatal(err)
		}
		return n
	case core.SlidingWindowLog:
		n, err := rdb.ZCard(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return int(n)
	default:
		v, err := rdb.HMGet(ctx, key, "sc", "sp").Result()
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, x := range v {
			if s, ok := x.(string); ok {
				n, _ := strconv.Atoi(s)
				sum += n
			}
		}
		return sum
	}
}

// TestChargeChild is the child side of TestChargeAcrossProcesses; it does
// nothing unless started by it.
func TestChargeChild(t *testing.T) {
	if os.Getenv(envChargeChild) != "1" {
		t.Skip("child process of TestChargeAcrossProcesses")
	}
	alg, err := core.ParseAlgorithm(os.Getenv(envChargeAlg))
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(&redis.Options{Addr: os.Getenv(envChargeAddr), PoolSize: chargeGoroutines})
	defer client.Close()
	store := testkit.MustRedis(client)
	defer store.Close()
	// a failed call fails the child, never the fallback: what Redis holds
	// must be all that was charged
	l := newLimiter(t, store, core.WithTimeout(30*time.Second), core.WithFailurePolicy(core.FailClosed), core.WithDeniedCache(0))
	id := os.Getenv(envChargeID)
	r := chargeRule(alg, id)
	var charged, admitted, clamped atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, chargeGoroutines)
	for g := range chargeGoroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(g)))
			for i := range chargeCalls {
				d, err := check(t, l, r)
				if err != nil {
					errs <- err
					return
				}
				if !d.Allowed {
					continue
				}
				admitted.Add(1)
				n := 1 + rng.IntN(150)
				if rng.IntN(10) == 0 || i == 0 && g%2 == 0 {
					n = 5000 + rng.IntN(20000) // far past the budget, and the bound
				}
				res, err := l.ChargeDecision(context.Background(), d, n)
				if err != nil {
					errs <- err
					return
				}
				charged.Add(int64(res[0].Charged))
				if res[0].Charged < n {
					clamped.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fmt.Printf("charged=%d admitted=%d clamped=%d\n", charged.Load(), admitted.Load(), clamped.Load())
}
