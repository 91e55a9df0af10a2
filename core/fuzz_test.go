package core

import (
	"errors"
	"strings"
	"testing"
	"time"
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
		checks := make([]Check, 1+int(n)%4)
		for i := range checks {
			checks[i] = Check{Key: "k", Limit: PerMinute(10 * (i + 1))}
		}
		results := make([]Result, len(checks))
		err := parseReply(reply, checks, results)
		if err != nil {
			if !errors.Is(err, ErrMalformedReply) {
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

// FuzzKey checks the key builder: no panic, the hash tag is exactly the
// (possibly hashed) identity, and two identities never share a key.
func FuzzKey(f *testing.F) {
	f.Add("ip:192.0.2.1", "user:42")
	f.Add("{evil}", "evil")
	f.Add("a}b{c", "a")
	f.Add("#0123", "#0123x")
	f.Add(strings.Repeat("x", 200), strings.Repeat("x", 128))
	f.Add("user:\x00", "user:")
	f.Add("", "ip:::1")
	f.Fuzz(func(t *testing.T, id1, id2 string) {
		k1, err1 := key("rk:", "rule", id1)
		k2, err2 := key("rk:", "rule", id2)
		for _, c := range []struct {
			id, key string
			err     error
		}{{id1, k1, err1}, {id2, k2, err2}} {
			if c.id == "" {
				if !errors.Is(c.err, ErrInvalidIdentity) {
					t.Fatalf("empty identity: err = %v", c.err)
				}
				continue
			}
			if c.err != nil {
				t.Fatalf("Key(%q): %v", c.id, c.err)
			}
			tag := hashTag(c.key)
			if !strings.HasPrefix(c.key, "rk:rule:{") || c.key != "rk:rule:{"+tag+"}" {
				t.Fatalf("Key(%q) = %q: hash tag %q is not the whole identity", c.id, c.key, tag)
			}
			if tag != c.id && !(tag[0] == '#' && len(tag) == 65) {
				t.Fatalf("Key(%q) = %q: identity neither kept nor hashed", c.id, c.key)
			}
			if len(c.key) > len("rk:rule:{}")+MaxIdentityLen+1 {
				t.Fatalf("Key(%q) is %d bytes long", c.id, len(c.key))
			}
		}
		if err1 == nil && err2 == nil && id1 != id2 && k1 == k2 {
			t.Fatalf("identities %q and %q share key %q", id1, id2, k1)
		}
	})
}

// TestLimitString pins the readable form of limits.
func TestLimitString(t *testing.T) {
	cases := []struct {
		limit Limit
		want  string
	}{
		{PerSecond(10), "10 per 1s (gcra, burst 10)"},
		{PerMinute(100).WithBurst(20), "100 per 1m0s (gcra, burst 20)"},
		{PerHour(1000).WithAlgorithm(FixedWindow), "1000 per 1h0m0s (fixed)"},
		{Limit{Rate: 5, Period: 90 * time.Second, Algorithm: SlidingWindowLog}, "5 per 1m30s (sliding-log)"},
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
		limit := PerMinute(10).WithBurst(1 + int(burst))
		cost := 1 + int(n)
		r, err := gcraResult(limit, cost, v)
		if err != nil {
			if !errors.Is(err, ErrMalformedReply) {
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
