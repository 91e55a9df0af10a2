package observe_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/internal/observe"
)

func TestErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), observe.ErrorKindTimeout},
		{context.Canceled, observe.ErrorKindCanceled},
		{fmt.Errorf("%w: short", core.ErrMalformedReply), observe.ErrorKindMalformed},
		{core.ErrClosed, observe.ErrorKindClosed},
		{redis.ErrClosed, observe.ErrorKindClosed},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, observe.ErrorKindConnection},
		{&net.DNSError{IsTimeout: true}, observe.ErrorKindTimeout},
		{fmt.Errorf("ratekit: redis: %w", redisError("NOSCRIPT No matching script")), observe.ErrorKindRedis},
		{errors.New("boom"), observe.ErrorKindOther},
	} {
		if got := observe.ErrorKind(tc.err); got != tc.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// redisError is an error Redis answered with.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func TestResultUsed(t *testing.T) {
	lim := core.PerMinute(10)
	for _, tc := range []struct {
		remaining int
		want      float64
	}{{10, 0}, {8, 0.2}, {2, 0.8}, {0, 1}, {-1, 1}, {20, 0}} {
		if got := observe.Used(core.Result{Limit: lim, Remaining: tc.remaining}); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("remaining %d: Used %v, want %v", tc.remaining, got, tc.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		e    core.DecisionEvent
		want string
	}{
		{core.DecisionEvent{Result: core.Result{Allowed: true}}, observe.VerdictAllowed},
		{core.DecisionEvent{}, observe.VerdictDenied},
		{core.DecisionEvent{Shadow: true}, observe.VerdictShadowDenied},
		{core.DecisionEvent{Result: core.Result{Allowed: true}, Shadow: true}, observe.VerdictAllowed},
	} {
		if got := observe.Verdict(tc.e); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.e, got, tc.want)
		}
	}
}
