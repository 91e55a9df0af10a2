package outbound

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

// TestMatchesXRate runs random sequences of reservations, cancellations and
// Allow calls on a Limiter over miniredis and on golang.org/x/time/rate's
// Limiter of the same rate and burst, at the same instants, and requires
// the same answer from both every time: each time to act, each Allow, and
// the tokens left after each step (which is what Cancel restores).
//
// x/time/rate counts in float64 seconds and whole nanoseconds, the scripts
// in whole microseconds. Where x/time/rate's arithmetic rounds, it can
// miss a Cancel's equality test by a nanosecond and keep a latest event
// that exact arithmetic rolls back. So the rates here are powers of two per
// second and every instant a multiple of 1/64 s: both sides then compute
// exactly, and must agree exactly.
func TestMatchesXRate(t *testing.T) {
	for _, tc := range []struct {
		rate, burst int
		period      time.Duration
	}{
		{8, 1, time.Second}, {8, 3, time.Second}, {16, 5, time.Second}, {4, 2, 2 * time.Second}, {1, 4, 500 * time.Millisecond},
	} {
		t.Run(Limit{Rate: tc.rate, Period: tc.period, Burst: tc.burst}.String(), func(t *testing.T) {
			for seed := range uint64(20) {
				matchXRate(t, seed, Limit{Rate: tc.rate, Period: tc.period, Burst: tc.burst})
			}
		})
	}
}

func matchXRate(t *testing.T, seed uint64, limit Limit) {
	mr, client := newMini(t)
	clock := newHandClock(mr)
	l, err := New(client, "x", limit, WithMargin(0), WithTimeout(10*time.Second), withoutSubscribe(), withClock(clock.local))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ref := rate.NewLimiter(rate.Limit(float64(limit.Rate)/limit.Period.Seconds()), limit.burst())
	const tick = time.Second / 64
	iv := limit.Period / time.Duration(limit.Rate)
	rng := rand.New(rand.NewPCG(seed, 7))
	type pair struct {
		mine *Reservation
		ref  *rate.Reservation
	}
	var held []pair
	ctx := context.Background()
	for step := range 60 {
		clock.advance(time.Duration(rng.IntN(int(2*iv/tick))) * tick)
		now := clock.redis()
		switch op := rng.IntN(10); {
		case op < 5: // reserve
			n := 1 + rng.IntN(limit.burst())
			r, err := l.ReserveN(ctx, "k", n)
			if err != nil {
				t.Fatal(err)
			}
			rr := ref.ReserveN(now, n)
			if got, want := r.TimeToAct().Sub(clock.local()), rr.DelayFrom(now); !near(got, want) {
				t.Fatalf("seed %d step %d: ReserveN(%d) waits %v, x/time/rate %v", seed, step, n, got, want)
			}
			held = append(held, pair{r, rr})

		case op < 8 && len(held) > 0: // cancel one held
			i := rng.IntN(len(held))
			if err := held[i].mine.Cancel(ctx); err != nil {
				t.Fatal(err)
			}
			held[i].ref.CancelAt(now)

			held = append(held[:i], held[i+1:]...)
		default:
			n := 1 + rng.IntN(limit.burst())
			got, err := l.AllowN(ctx, "k", n)
			if err != nil {
				t.Fatal(err)
			}
			if want := ref.AllowN(now, n); got != want {
				t.Fatalf("seed %d step %d: AllowN(%d) = %v, x/time/rate %v", seed, step, n, got, want)
			}
		}
		if got, want := tokens(t, mr.Get, l, now), ref.TokensAt(now); math.Abs(got-want) > 1e-6 {
			t.Fatalf("seed %d step %d: %.6f tokens left, x/time/rate %.6f", seed, step, got, want)
		}
	}
}

// near reports whether two waits agree to the microsecond the scripts count
// in.
func near(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }

// tokens reads the tokens left of key "k" at now from its state in Redis:
// burst less the schedule ahead, in intervals.
func tokens(t *testing.T, get func(string) (string, error), l *Limiter, now time.Time) float64 {
	t.Helper()
	key, _ := l.Key("k")
	v, err := get(key)
	if err != nil {
		return float64(l.limit.burst()) // no state: a full bucket
	}
	f := strings.Fields(v)
	tat, _ := strconv.ParseFloat(f[0], 64)
	iv, _ := strconv.ParseFloat(f[3], 64)
	ahead := max(tat-float64(now.UnixMicro()), 0)
	return float64(l.limit.burst()) - ahead/iv
}
