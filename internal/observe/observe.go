// Package observe holds what ratekit's observers (packages promlimit and
// otellimit) share to turn a core.Limiter's events into metrics: the
// verdict of a decision, the share of a limit used, and the kind of a
// store error, each a label that stays bounded.
package observe

import (
	"context"
	"errors"
	"net"

	"github.com/redis/go-redis/v9"

	"github.com/ratekit/ratekit/core"
)

// Verdicts of a rule, as [Verdict] names them for metrics
// and logs.
const (
	// VerdictAllowed: the rule allowed the request.
	VerdictAllowed = "allowed"
	// VerdictDenied: the rule denied the request.
	VerdictDenied = "denied"
	// VerdictShadowDenied: the rule, in shadow mode, would have denied the
	// request, and let it through.
	VerdictShadowDenied = "shadow_denied"
)

// Verdict returns whether the rule allowed, denied or, in shadow mode,
// would have denied the request. Whether the store decided is told apart
// by Degraded.
func Verdict(e core.DecisionEvent) string {
	switch {
	case e.Allowed:
		return VerdictAllowed
	case e.Shadow:
		return VerdictShadowDenied
	}
	return VerdictDenied
}

// Used returns the fraction of the limit's capacity that is spent after
// the decision, from 0 (all units remain) to 1 (none remain): 1 -
// Remaining/Capacity. A decision that leaves 20 of 100 units has used
// 0.8.
func Used(r core.Result) float64 {
	c := r.Limit.Capacity()
	if c <= 0 {
		return 0
	}
	return 1 - float64(min(max(r.Remaining, 0), c))/float64(c)
}

// Kinds of store error, as [ErrorKind] names them.
const (
	ErrorKindTimeout    = "timeout"    // no answer within the deadline
	ErrorKindCanceled   = "canceled"   // the call's context was canceled
	ErrorKindConnection = "connection" // dialing, reading or writing failed
	ErrorKindRedis      = "redis"      // Redis answered with an error
	ErrorKindMalformed  = "malformed"  // a reply that could not be parsed
	ErrorKindClosed     = "closed"     // the store or client was closed
	ErrorKindOther      = "other"      // anything else
)

// ErrorKind sorts a store error into one of a few kinds, for metric labels
// that stay bounded: [ErrorKindTimeout], [ErrorKindCanceled],
// [ErrorKindConnection], [ErrorKindRedis], [ErrorKindMalformed],
// [ErrorKindClosed] or [ErrorKindOther]. It returns "" for nil.
func ErrorKind(err error) string {
	var (
		rerr redis.Error
		nerr net.Error
	)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, context.DeadlineExceeded):
		return ErrorKindTimeout
	case errors.Is(err, context.Canceled):
		return ErrorKindCanceled
	case errors.Is(err, core.ErrMalformedReply):
		return ErrorKindMalformed
	case errors.Is(err, core.ErrClosed), errors.Is(err, redis.ErrClosed), errors.Is(err, net.ErrClosed):
		return ErrorKindClosed
	case errors.As(err, &nerr):
		if nerr.Timeout() {
			return ErrorKindTimeout
		}
		return ErrorKindConnection
	case errors.As(err, &rerr):
		return ErrorKindRedis
	}
	return ErrorKindOther
}
