package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/ratekit/ratekit/core"
)

// TestFixedResult decodes the fixed window's one-integer replies, and
// rejects those no script sends.
func TestFixedResult(t *testing.T) {
	l := core.Limit{Rate: 5, Period: time.Second, Algorithm: core.FixedWindow}
	ms := time.Millisecond
	for _, c := range []struct {
		n    int
		v    int64
		want core.Result
	}{
		{1, 400, core.Result{Limit: l, Allowed: true, Remaining: 4, ResetAfter: 399*ms + time.Microsecond}},
		{2, 3*1000 + 1000, core.Result{Limit: l, Allowed: true, Remaining: 0, ResetAfter: 999*ms + time.Microsecond}},
		{3, -(4*1000 + 7), core.Result{Limit: l, Remaining: 1, RetryAfter: 6*ms + time.Microsecond, ResetAfter: 6*ms + time.Microsecond}},
		{6, -1, core.Result{Limit: l, RetryAfter: -1, Remaining: 5}},
		{6, -(5*1000 + 9), core.Result{Limit: l, RetryAfter: -1, ResetAfter: 8*ms + time.Microsecond}},
	} {
		got, err := fixedResult(l, c.n, c.v)
		if err != nil || got != c.want {
			t.Errorf("fixedResult(%d, %d) = %+v, %v; want %+v", c.n, c.v, got, err, c.want)
		}
	}
	for _, c := range []struct {
		n int
		v int64
	}{{1, 0}, {1, 5*1000 + 1}, {2, 4*1000 + 1}, {1, -(3*1000 + 1)}, {1, 6*1000 + 1}} {
		if _, err := fixedResult(l, c.n, c.v); !errors.Is(err, core.ErrMalformedReply) {
			t.Errorf("fixedResult(%d, %d): %v; want ErrMalformedReply", c.n, c.v, err)
		}
	}
	if singleIntReply(core.Limit{Rate: core.MaxRate, Period: core.MaxPeriod, Algorithm: core.FixedWindow}) ||
		!singleIntReply(core.Limit{Rate: core.MaxRate, Period: time.Hour, Algorithm: core.FixedWindow}) {
		t.Error("singleIntReply: wrong bound")
	}
}
