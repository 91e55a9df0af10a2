package grpclimit

import (
	"errors"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// The answers that carry nothing of the call.
var (
	errNoIdentity = status.Error(codes.Unauthenticated, "the call carries no identity to rate-limit")
	errFailed     = status.Error(codes.Internal, "the rate limiter failed")
)

// deniedError returns the default answer to a denied call:
// ResourceExhausted, with a RetryInfo holding the limiting rule's
// RetryAfter (rounded up to the millisecond; none when no wait helps), and
// a QuotaFailure with a violation for each rule that denied the call (not
// those that had room, which a denial leaves unspent).
func deniedError(d core.Decision) error {
	var lim core.RuleResult
	if d.Limiting >= 0 {
		lim = d.Results[d.Limiting]
	}
	var msg string
	if lim.Never() {
		msg = "the call costs more than rate limit " + strconv.Quote(lim.Rule) + " allows at once: it will never be allowed"
	} else {
		msg = "rate limit " + strconv.Quote(lim.Rule) + " exceeded: retry after " + ceilMilli(lim.RetryAfter).String()
	}
	quota := &errdetails.QuotaFailure{}
	for _, r := range d.Results {
		if r.Allowed || r.Shadow || r.RetryAfter == 0 { // 0: it had room, but another limit denied
			continue
		}
		quota.Violations = append(quota.Violations, &errdetails.QuotaFailure_Violation{
			Subject:     r.Rule,
			Description: r.Limit.String(),
			QuotaId:     r.Rule,
			QuotaValue:  int64(r.Limit.Capacity()),
		})
	}
	st := status.New(codes.ResourceExhausted, msg)
	if !lim.Never() {
		st = withDetails(st, &errdetails.RetryInfo{RetryDelay: durationpb.New(ceilMilli(lim.RetryAfter))})
	}
	return withDetails(st, quota).Err()
}

// failedError returns the default answer when no decision could be made.
func failedError(out *adapter.Outcome) error {
	switch {
	case errors.Is(out.Err, core.ErrUnavailable):
		// Retry-After is set whenever the Limiter suggests a wait
		s, err := strconv.Atoi(out.Headers.Get(adapter.HeaderRetryAfter))
		if err != nil {
			return status.Error(codes.Unavailable, "the rate limiter cannot decide right now")
		}
		retry := time.Duration(s) * time.Second
		st := status.New(codes.Unavailable, "the rate limiter cannot decide right now: retry after "+retry.String())
		return withDetails(st, &errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}).Err()
	case errors.Is(out.Err, core.ErrNoIdentity):
		return errNoIdentity
	case tickctx.Ended(out.Err):
		return status.FromContextError(out.Err).Err() // the call's own end: Canceled or DeadlineExceeded
	}
	return errFailed
}

// withDetails returns st with detail added.
func withDetails(st *status.Status, detail protoadapt.MessageV1) *status.Status {
	ds, err := st.WithDetails(detail)
	if err != nil { // cannot happen: the details are valid messages
		return st
	}
	return ds
}

// ceilMilli rounds d up to the millisecond.
func ceilMilli(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
