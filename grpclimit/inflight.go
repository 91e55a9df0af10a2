package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/tickctx"
)

// WithInFlightDeniedHandler replaces the default answer of the InFlight
// interceptors to a call beyond their cap (codes.ResourceExhausted with
// RetryInfo and QuotaFailure). The call fails with the error denied
// returns, which should be a status error; if it returns nil, with the
// default answer. It is theirs only: the rate-limiting interceptors reject
// it, as the InFlight ones reject [WithDeniedHandler].
func WithInFlightDeniedHandler(denied func(ctx context.Context, fullMethod string, res inflight.Result) error) Option {
	return adapter.WithHook("WithInFlightDeniedHandler", denied == nil, func(h *hooks) { h.inFlightDenied = denied })
}

// InFlightUnaryServerInterceptor returns an interceptor that lets at most
// rule.Limit unary calls of one identity run at once, across every replica
// that shares l's Redis. A call beyond the cap fails with
// codes.ResourceExhausted; one that gets a slot holds it until its handler
// returns, or panics. The call's context reaches Redis.
//
// [WithSkip], [WithErrorHandler] and [WithNoIdentity] apply as they do to
// [UnaryServerInterceptor]; a call that cannot be decided while the
// Limiter fails closed fails with codes.Unavailable and a RetryInfo.
// [WithHeaders] and [WithIETFDraft] change nothing: a concurrency limit
// sends no metadata. It returns an error for a nil Limiter, an invalid rule
// or option, and for [WithDeniedHandler] (use [WithInFlightDeniedHandler]).
func InFlightUnaryServerInterceptor(l *inflight.Limiter, rule inflight.Rule, opts ...Option) (grpc.UnaryServerInterceptor, error) {
	x, err := newInFlight("grpclimit.InFlightUnaryServerInterceptor", l, rule, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		lease, err := x.enter(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		defer lease.Release(ctx) // a failure goes to the Limiter's OnError
		return handler(ctx, req)
	}, nil
}

// InFlightStreamServerInterceptor is [InFlightUnaryServerInterceptor] for
// streams: a stream that gets a slot holds it for as long as it is open,
// until its handler returns, and one beyond the cap fails before the
// handler runs.
func InFlightStreamServerInterceptor(l *inflight.Limiter, rule inflight.Rule, opts ...Option) (grpc.StreamServerInterceptor, error) {
	x, err := newInFlight("grpclimit.InFlightStreamServerInterceptor", l, rule, opts)
	if err != nil {
		return nil, err
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		lease, err := x.enter(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		defer lease.Release(ss.Context()) // a failure goes to the Limiter's OnError
		return handler(srv, ss)
	}, nil
}

// MustInFlightUnaryServerInterceptor is [InFlightUnaryServerInterceptor]
// for a rule and options fixed at start-up: it panics if they are invalid.
func MustInFlightUnaryServerInterceptor(l *inflight.Limiter, rule inflight.Rule, opts ...Option) grpc.UnaryServerInterceptor {
	i, err := InFlightUnaryServerInterceptor(l, rule, opts...)
	if err != nil {
		panic(err)
	}
	return i
}

// MustInFlightStreamServerInterceptor is [InFlightStreamServerInterceptor]
// for a rule and options fixed at start-up: it panics if they are invalid.
func MustInFlightStreamServerInterceptor(l *inflight.Limiter, rule inflight.Rule, opts ...Option) grpc.StreamServerInterceptor {
	i, err := InFlightStreamServerInterceptor(l, rule, opts...)
	if err != nil {
		panic(err)
	}
	return i
}

// inFlight is what the unary and stream InFlight interceptors share.
type inFlight struct {
	g    *inflight.Guard
	h    hooks
	rule string
}

// newInFlight makes the interceptor of constructor fn, which its errors
// name.
func newInFlight(fn string, l *inflight.Limiter, rule inflight.Rule, opts []Option) (*inFlight, error) {
	g, h, err := inflight.BuildGuard(fn, l, rule, opts)
	if err == nil && h.denied != nil {
		err = fmt.Errorf("%s: %w: WithDeniedHandler is for the rate-limiting interceptors (use WithInFlightDeniedHandler)", fn, adapter.ErrOptionMismatch)
	}
	if err != nil {
		return nil, err
	}
	return &inFlight{g: g, h: h, rule: rule.Name}, nil
}

// enter decides a call. It returns the slot the call holds (nil when it
// holds none), or the error to fail the call with.
func (x *inFlight) enter(ctx context.Context, fullMethod string) (*inflight.Lease, error) {
	if x.h.skips(ctx, fullMethod) {
		return nil, nil
	}
	out := x.g.Enter(request{ctx: ctx, method: fullMethod})
	if out.Proceed() {
		return out.Lease, nil
	}
	var err error
	if out.Limited() {
		if x.h.inFlightDenied != nil {
			err = x.h.inFlightDenied(ctx, fullMethod, out.Result)
		}
		if err == nil {
			err = x.deniedError(out.Result)
		}
		return nil, err
	}
	def := inFlightFailedError(&out)
	if x.h.onError != nil {
		err = x.h.onError(ctx, fullMethod, status.Code(def), out.Err)
	}
	if err == nil {
		err = def
	}
	return nil, err
}

// deniedError returns the default answer to a call beyond the cap.
func (x *inFlight) deniedError(res inflight.Result) error {
	retry := ceilMilli(res.RetryAfter)
	st := status.New(codes.ResourceExhausted, "concurrency limit "+strconv.Quote(x.rule)+" reached: retry after "+retry.String())
	st = withDetails(st, &errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
	return withDetails(st, &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject:     x.rule,
		Description: "at most " + strconv.Itoa(res.Limit) + " in flight",
		QuotaId:     x.rule,
		QuotaValue:  int64(res.Limit),
	}}}).Err()
}

// inFlightFailedError returns the default answer when no decision could
// be made.
func inFlightFailedError(out *inflight.Outcome) error {
	switch {
	case errors.Is(out.Err, core.ErrUnavailable):
		retry := time.Duration(out.RetryAfter()) * time.Second
		st := status.New(codes.Unavailable, "the concurrency limiter cannot decide right now: retry after "+retry.String())
		return withDetails(st, &errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}).Err()
	case errors.Is(out.Err, core.ErrNoIdentity):
		return errInFlightNoIdentity
	case tickctx.Ended(out.Err):
		return status.FromContextError(out.Err).Err() // the call's own end: Canceled or DeadlineExceeded
	}
	return errInFlightFailed
}

// The answers that carry nothing of the call.
var (
	errInFlightNoIdentity = status.Error(codes.Unauthenticated, "the call carries no identity, which this method requires")
	errInFlightFailed     = status.Error(codes.Internal, "the concurrency limiter failed")
)
