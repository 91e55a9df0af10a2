package outbound_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/outbound"
)

// rateObserver records the rates RateChanged reports.
type rateObserver struct {
	debugObserver
	mu    sync.Mutex
	rates []float64
}

func (o *rateObserver) RateChanged(_ string, r float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rates = append(o.rates, r)
}

func (o *rateObserver) last() float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.rates) == 0 {
		return 0
	}
	return o.rates[len(o.rates)-1]
}

// TestAIMDKeepsFractionalRate holds the key's stored state to the rate it
// was lowered to, fraction and all, on a real redis-server: 10/s lowered by
// 0.75 is 7.5/s, which the next reservation reads back and spaces turns
// by (1/7.5 s), where a rate written as a whole number would read 7/s.
// Redis stores the state packed as doubles, which hold the fraction (see
// state.lua); the text form, for a server without Lua's struct library,
// writes the rates with %.17g for this case.
func TestAIMDKeepsFractionalRate(t *testing.T) {
	srv := redistest.StartServer(t)
	client := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries = true, -1 })
	obs := &rateObserver{}
	l, err := outbound.New(client, "aimd", outbound.Limit{Rate: 10, Period: time.Second, Burst: 1},
		outbound.WithMargin(0), outbound.WithHeartbeat(time.Hour), outbound.WithObserver(obs),
		outbound.WithAIMD(outbound.AIMD{Decrease: 0.75, Increase: 1, Hold: time.Hour}),
		outbound.WithTimeout(time.Minute)) // not a test of the deadline: a loaded machine must not degrade it
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if _, err := l.Reserve(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := l.Refused(ctx, "k", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// the next reservations read the lowered rate back from the key
	for i := range 2 {
		r, err := l.Reserve(ctx, "k")
		if err != nil || r.Degraded() {
			t.Fatalf("reservation %d: degraded %v, %v", i, r.Degraded(), err)
		}
		if got := obs.last(); math.Abs(got-7.5) > 0.01 {
			t.Fatalf("reservation %d after the refusal: rate %.4f/s, want 7.5/s (rates seen %v)", i, got, obs.rates)
		}
	}
}

// TestStateForms holds the key's state to its two forms on a real
// redis-server: the scripts write it packed (a 0 byte and nine
// little-endian doubles, see state.lua) and read back what they wrote, and
// they still read the text form, nine decimals, as written before the packed
// one, even at the packed form's length. A schedule 10 s ahead (10/s, burst
// 1: turns 100 ms apart) puts the next turn 10 s out, where a state read as
// absent would hand it out at once. A packed state holding an infinity
// counts as absent.
func TestStateForms(t *testing.T) {
	srv := redistest.StartServer(t)
	client := srv.Client(t, func(o *redis.Options) { o.ContextTimeoutEnabled, o.MaxRetries = true, -1 })
	l, err := outbound.New(client, "forms", outbound.Limit{Rate: 10, Period: time.Second, Burst: 1},
		outbound.WithMargin(0), outbound.WithHeartbeat(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	const iv = 100_000 // µs between turns
	redisNow := func() int64 {
		now, err := client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now.UnixMicro()
	}
	// next reserves a turn of id and returns how far out it is
	next := func(id string) time.Duration {
		t.Helper()
		r, err := l.Reserve(ctx, id)
		if err != nil || r.Degraded() {
			t.Fatalf("%s: degraded %v, %v", id, r != nil && r.Degraded(), err)
		}
		return r.Delay()
	}
	// near reports whether d is want less the little time the test took
	near := func(d, want time.Duration) bool { return d <= want && d > want-2*time.Second }
	text := func(id string, pauseWidth int) string {
		key, err := l.Key(id)
		if err != nil {
			t.Fatal(err)
		}
		now := redisNow()
		tat := now + 10_000_000
		v := fmt.Sprintf("%d %d %d %d %0*d 0 0 0 0", tat, tat-iv, now, iv, pauseWidth, 0)
		if err := client.Set(ctx, key, v, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		return v
	}

	text("text", 1)
	if d := next("text"); !near(d, 10*time.Second) {
		t.Fatalf("after a text state 10s ahead: the next turn in %v, want about 10s", d)
	}
	key, _ := l.Key("text")
	v, err := client.Get(ctx, key).Result()
	if err != nil || len(v) != 73 || v[0] != 0 {
		t.Fatalf("the state written back: %q, %v; want 73 bytes, the first 0", v, err)
	}
	tat := math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[1:9])))
	if ahead := time.Duration(int64(tat)-redisNow()) * time.Microsecond; !near(ahead, 10*time.Second+iv*time.Microsecond) {
		t.Fatalf("the packed TAT is %v ahead, want about 10.1s", ahead)
	}
	if d := next("text"); !near(d, 10*time.Second+iv*time.Microsecond) {
		t.Fatalf("after the packed state: the next turn in %v, want about 10.1s", d)
	}

	if v := text("long", 7); len(v) != 73 {
		t.Fatalf("the text state is %d bytes, want the packed form's 73", len(v))
	}
	if d := next("long"); !near(d, 10*time.Second) {
		t.Fatalf("after a 73-byte text state 10s ahead: the next turn in %v, want about 10s", d)
	}

	key, _ = l.Key("inf")
	b := make([]byte, 73)
	for i, f := range []float64{math.Inf(1), 0, 0, iv, 0, 0, 0, 0, 0} {
		binary.LittleEndian.PutUint64(b[1+8*i:], math.Float64bits(f))
	}
	if err := client.Set(ctx, key, b, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if d := next("inf"); d != 0 {
		t.Fatalf("after a packed state holding an infinity: the next turn in %v, want at once", d)
	}
}
