package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
)

// FuzzParseReply feeds arbitrary replies to the script reply parser: it must
// never panic, and whatever it accepts must be in range.
func FuzzParseReply(f *testing.F) {
	f.Add("1 4 0 12000", uint8(1))
	f.Add("0 0 6000000 60000000", uint8(1))
	f.Add("0 0 -1 5000 0 3 0 100", uint8(2))
	f.Add("1 2 0 3", uint8(2))
	f.Add("", uint8(1))
	f.Add("1  4 0 1", uint8(1))
	f.Add("-", uint8(1))
	f.Add("99999999999999999999 0 0 0", uint8(1))
	f.Fuzz(func(t *testing.T, reply string, n uint8) {
		checks := make([]core.Check, 1+int(n)%4)
		for i := range checks {
			checks[i] = core.Check{Key: "k", Limit: core.PerMinute(10 * (i + 1))}
		}
		results := make([]core.Result, len(checks))
		err := parseReply(reply, checks, results)
		if err != nil {
			if !errors.Is(err, core.ErrMalformedReply) {
				t.Fatalf("error %v does not wrap ErrMalformedReply", err)
			}
			return
		}
		for i, r := range results {
			if r.Remaining < 0 || r.Remaining > checks[i].Limit.Capacity() {
				t.Fatalf("result %d: Remaining %d out of range", i, r.Remaining)
			}
			if r.Allowed && r.RetryAfter != 0 || r.RetryAfter < -1 || r.ResetAfter < 0 {
				t.Fatalf("result %d: inconsistent %+v", i, r)
			}
		}
	})
}

// TestLimitString pins the readable form of limits.
func TestLimitString(t *testing.T) {
	cases := []struct {
		limit core.Limit
		want  string
	}{
		{core.PerSecond(10), "10 per 1s (gcra, burst 10)"},
		{core.PerMinute(100).WithBurst(20), "100 per 1m0s (gcra, burst 20)"},
		{core.PerHour(1000).WithAlgorithm(core.FixedWindow), "1000 per 1h0m0s (fixed)"},
		{core.Limit{Rate: 5, Period: 90 * time.Second, Algorithm: core.SlidingWindowLog}, "5 per 1m30s (sliding-log)"},
	}
	for _, c := range cases {
		if got := c.limit.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

// FuzzGCRAReply feeds arbitrary integers to the decoder of GCRA's one-key
// reply: it must never panic, and whatever it accepts must be in range and
// consistent with the cost.
func FuzzGCRAReply(f *testing.F) {
	f.Add(int64(12000), uint16(1), uint8(5))
	f.Add(int64(-1), uint16(1), uint8(5))
	f.Add(int64(-6000001), uint16(6), uint8(5))
	f.Add(int64(0), uint16(1), uint8(1))
	f.Add(int64(-1<<63), uint16(1), uint8(1))
	f.Add(int64(1<<63-1), uint16(300), uint8(0))
	f.Fuzz(func(t *testing.T, v int64, n uint16, burst uint8) {
		limit := core.PerMinute(10).WithBurst(1 + int(burst))
		cost := 1 + int(n)
		r, err := gcraResult(limit, cost, v)
		if err != nil {
			if !errors.Is(err, core.ErrMalformedReply) {
				t.Fatalf("error %v does not wrap ErrMalformedReply", err)
			}
			return
		}
		if r.Remaining < 0 || r.Remaining > limit.Capacity() || r.ResetAfter < 0 {
			t.Fatalf("%d: out of range %+v", v, r)
		}
		switch {
		case r.Allowed && r.RetryAfter != 0:
			t.Fatalf("%d: allowed with a wait %+v", v, r)
		case !r.Allowed && cost > limit.Burst && r.RetryAfter != -1:
			t.Fatalf("%d: a cost above the burst may pass later %+v", v, r)
		case !r.Allowed && cost <= limit.Burst && r.RetryAfter <= 0:
			t.Fatalf("%d: denied without a wait %+v", v, r)
		}
	})
}

// FuzzFixedReply feeds arbitrary integers to the decoder of the fixed
// window's one-key reply: it must never panic, and whatever it accepts
// must be in range, within the window and consistent with the cost.
func FuzzFixedReply(f *testing.F) {
	f.Add(int64(12000), uint16(1), uint8(5))
	f.Add(int64(-1), uint16(20), uint8(5))
	f.Add(int64(-360001), uint16(6), uint8(5))
	f.Add(int64(0), uint16(1), uint8(1))
	f.Add(int64(-1<<63), uint16(1), uint8(1))
	f.Add(int64(1<<63-1), uint16(300), uint8(0))
	f.Fuzz(func(t *testing.T, v int64, n uint16, rate uint8) {
		limit := core.Limit{Rate: 1 + int(rate), Period: time.Minute, Algorithm: core.FixedWindow}
		cost := 1 + int(n)
		r, err := fixedResult(limit, cost, v)
		if err != nil {
			if !errors.Is(err, core.ErrMalformedReply) {
				t.Fatalf("error %v does not wrap ErrMalformedReply", err)
			}
			return
		}
		if r.Remaining < 0 || r.Remaining > limit.Capacity() || r.ResetAfter < 0 || r.ResetAfter > limit.Period || r.RetryAfter > limit.Period {
			t.Fatalf("%d: out of range %+v", v, r)
		}
		switch {
		case r.Allowed && (r.RetryAfter != 0 || r.ResetAfter <= 0):
			t.Fatalf("%d: allowed with a wait, or without a window %+v", v, r)
		case !r.Allowed && cost > limit.Rate && r.RetryAfter != -1:
			t.Fatalf("%d: a cost above the rate may pass later %+v", v, r)
		case !r.Allowed && cost <= limit.Rate && (r.RetryAfter <= 0 || r.Remaining >= cost):
			t.Fatalf("%d: denied without a wait, or with room %+v", v, r)
		}
	})
}
