package core

import (
	"errors"
	"testing"
	"time"
)

// TestFixedResult decodes the fixed window's one-integer replies, and
// rejects those no script sends.
func TestFixedResult(t *testing.T) {
	l := Limit{Rate: 5, Period: time.Second, Algorithm: FixedWindow}
	ms := time.Millisecond
	for _, c := range []struct {
		n    int
		v    int64
		want Result
	}{
		{1, 400, Result{Limit: l, Allowed: true, Remaining: 4, ResetAfter: 399*ms + time.Microsecond}},
		{2, 3*1000 + 1000, Result{Limit: l, Allowed: true, Remaining: 0, ResetAfter: 999*ms + time.Microsecond}},
		{3, -(4*1000 + 7), Result{Limit: l, Remaining: 1, RetryAfter: 6*ms + time.Microsecond, ResetAfter: 6*ms + time.Microsecond}},
		{6, -1, Result{Limit: l, RetryAfter: -1, Remaining: 5}},
		{6, -(5*1000 + 9), Result{Limit: l, RetryAfter: -1, ResetAfter: 8*ms + time.Microsecond}},
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
		if _, err := fixedResult(l, c.n, c.v); !errors.Is(err, ErrMalformedReply) {
			t.Errorf("fixedResult(%d, %d): %v; want ErrMalformedReply", c.n, c.v, err)
		}
	}
	if singleIntReply(Limit{Rate: MaxRate, Period: MaxPeriod, Algorithm: FixedWindow}) ||
		!singleIntReply(Limit{Rate: MaxRate, Period: time.Hour, Algorithm: FixedWindow}) {
		t.Error("singleIntReply: wrong bound")
	}
}
