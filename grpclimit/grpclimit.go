// Package grpclimit rate-limits gRPC servers (google.golang.org/grpc) with a
// [core.Limiter]: [UnaryServerInterceptor] and [StreamServerInterceptor]
// check each call against the same rules, key functions and Redis as the
// HTTP adapters, so a gRPC server and HTTP servers that name their rules
// alike share one limit.
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpclimit.MustUnaryServerInterceptor(limiter, rules)),
//		grpc.ChainStreamInterceptor(grpclimit.MustStreamServerInterceptor(limiter, rules)),
//	)
//
// # What key functions see
//
// A call is the [core.Request] that rules read:
//
//   - RemoteAddr is the peer's address (peer.FromContext), so keyfuncs.IP
//     limits the client's IP address. Forwarding metadata (x-forwarded-for,
//     as a proxy such as Envoy adds it) is read only when the peer is one of
//     keyfuncs.TrustedProxies, exactly as for HTTP.
//   - Header and HeaderValues read the call's incoming metadata; names are
//     case-insensitive, as metadata keys are lower case, so keyfuncs.APIKey
//     reads x-api-key and keyfuncs.JWT reads authorization.
//   - Path and Route are the full method name, "/pkg.Service/Method", so
//     keyfuncs.Route limits each method apart and a rule's Skip can pick
//     methods ([ExceptMethods]).
//   - Method is "POST", the HTTP/2 method of every gRPC call; Query is
//     always "".
//   - Context is the call's context, and reaches the store with its
//     deadline.
//
// # What a client sees
//
// The rate-limit fields go out as response header metadata, in lower case:
// ratelimit-policy and ratelimit (the IETF fields), x-ratelimit-limit,
// x-ratelimit-remaining and x-ratelimit-reset, chosen with [WithHeaders],
// with the values described at [adapter.NewHeaders]; a denied call adds
// retry-after, in whole seconds. They are sent once, with the call's
// header: before the handler's own header (grpc.SendHeader) or first
// message, or with the answer; to see those, the outermost interceptor of
// this package gives the handler a grpc.ServerTransportStream (and a stream
// handler a grpc.ServerStream) of its own, which forward to the call's. A
// client reads
// them with the grpc.Header call option or a stream's Header method, on
// success and failure alike.
//
// A call that a rule denies fails with codes.ResourceExhausted and two
// details: errdetails.RetryInfo, whose delay is how long the call must wait,
// rounded up to the millisecond (absent when its cost exceeds a limit's
// capacity, since no wait helps),
// and errdetails.QuotaFailure, with one violation per denying rule, whose
// subject is the rule's name. When the store is unavailable and the Limiter
// fails closed, a call fails with codes.Unavailable and a RetryInfo; under
// [adapter.NoIdentity401], a call without an identity fails with
// codes.Unauthenticated; a call whose context ends before a decision fails
// with its context's code (codes.Canceled or codes.DeadlineExceeded); any
// other error (a misconfigured rule) fails it with codes.Internal, whose
// message says nothing of the cause.
// [WithDeniedHandler] and [WithErrorHandler] replace these answers.
//
// # Streams
//
// A stream is decided once, when it opens, before its first message: it
// spends one unit (or its rule's Cost), whatever it carries afterwards, and
// a denied stream fails before the handler runs. Key and cost functions see
// the stream's metadata, never its messages.
//
// # Health checks, and per-method limits
//
// The standard health service, grpc.health.v1.Health, is never limited, so
// that load balancers and orchestrators keep seeing a server that is busy
// as alive; [WithSkip] exempts other calls, such as server reflection.
//
// gRPC interceptors apply to every method of a server, so give one
// interceptor all the rules, and limit a method more by a rule of its own
// that skips the others:
//
//	{Name: "login", Limit: core.PerMinute(5), Key: clientIP, Skip: grpclimit.ExceptMethods("/auth.Auth/Login")}
//
// The rules of one interceptor are decided together, all or nothing: a call
// that one denies spends nothing from the others. Interceptors of this
// package also stack (in grpc.ChainUnaryInterceptor, or applied to some
// methods by a selector): each decides on its own, and the response
// describes the rules of all of them, merged as [adapter.Headers.Set]
// merges them.
//
// # Concurrency limits
//
// [InFlightUnaryServerInterceptor] and [InFlightStreamServerInterceptor]
// cap how many calls run at once instead (package inflight): a call beyond
// the cap fails with codes.ResourceExhausted, a RetryInfo of
// [inflight.DefaultRetryAfter] and a QuotaFailure naming the rule; a call
// that gets a slot holds it until its handler returns, or panics, and a
// stream holds it for as long as it is open. The health service is never
// limited there either.
package grpclimit

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/inflight"
)

// HealthService is the full name of the standard gRPC health service,
// grpc.health.v1.Health, whose methods are never limited.
const HealthService = "grpc.health.v1.Health"

// healthPrefix begins the full method name of each of its methods.
const healthPrefix = "/" + HealthService + "/"

// Option configures an interceptor. Options are sealed: only this package
// makes them.
type Option = adapter.Option[hooks]

// hooks are what this package's own options set, in gRPC's terms.
type hooks struct {
	skip           func(ctx context.Context, fullMethod string) bool
	denied         func(ctx context.Context, fullMethod string, d core.Decision) error
	inFlightDenied func(ctx context.Context, fullMethod string, res inflight.Result) error
	onError        func(ctx context.Context, fullMethod string, code codes.Code, err error) error
}

// WithSkip makes the interceptor pass calls for which skip reports true
// straight to the handler, unlimited and without rate-limit metadata:
// server reflection, say. fullMethod is "/pkg.Service/Method". The health
// service is skipped whatever skip says. To exempt calls from one rule
// only, set that rule's Skip.
func WithSkip(skip func(ctx context.Context, fullMethod string) bool) Option {
	return adapter.WithHook("WithSkip", skip == nil, func(h *hooks) { h.skip = skip })
}

// WithDeniedHandler replaces the default answer to a call that a rule
// denies (codes.ResourceExhausted with RetryInfo and QuotaFailure). The
// call fails with the error denied returns, which should be a status error
// (status.Error, or status.New(...).WithDetails(...).Err()); if it returns
// nil, the call fails with the default answer. The rate-limit metadata is
// sent either way.
func WithDeniedHandler(denied func(ctx context.Context, fullMethod string, d core.Decision) error) Option {
	return adapter.WithHook("WithDeniedHandler", denied == nil, func(h *hooks) { h.denied = denied })
}

// WithErrorHandler replaces the default answer when no decision could be
// made, with code the code the default answer would have: err wraps
// [core.ErrUnavailable] when the store is unavailable and the Limiter fails
// closed (codes.Unavailable), [core.ErrNoIdentity] when a rule found no
// identity under [adapter.NoIdentity401] (codes.Unauthenticated), the
// call's context's error when it ended before a decision (codes.Canceled or
// codes.DeadlineExceeded), and is a misconfiguration otherwise
// (codes.Internal). The call fails with the error onError returns, or with
// the default answer if it returns nil. err's text is for logs: do not send
// it to clients.
func WithErrorHandler(onError func(ctx context.Context, fullMethod string, code codes.Code, err error) error) Option {
	return adapter.WithHook("WithErrorHandler", onError == nil, func(h *hooks) { h.onError = onError })
}

// WithRuleSet makes the interceptor read its rules from set at each call,
// so that [core.RuleSet.Replace] changes them at once; the interceptor's
// rules must then be nil. See [adapter.WithRuleSet].
func WithRuleSet(set *core.RuleSet) Option { return adapter.WithRuleSet[hooks](set) }

// WithCountOnly makes the named rule count only the calls whose status
// code count picks, such as the codes.Unauthenticated of a failed login:
// the unit is reserved before the handler runs and given back when the
// call's code does not count (a stream's code is the one its handler
// returns). A handler that panics past the interceptor gives nothing
// back. See [adapter.WithCountOnly].
func WithCountOnly(rule string, count func(code codes.Code) bool) Option {
	if count == nil {
		return adapter.WithCountOnly[hooks](rule, nil)
	}
	return adapter.WithCountOnly[hooks](rule, func(status int) bool { return count(codes.Code(status)) })
}

// WithCharged makes the named rules charge what each call cost once it is
// done, as its handler reports it with [AddCost]: a call is admitted while
// its key is not in debt, and the units reported are charged whatever is
// left, in the background once the handler returns (or panics): for a
// stream, once its handler returns, so that a stream cut short (the client
// gone, its context canceled) is charged what the handler reported until
// then. The next calls wait out the debt. See [adapter.Config.Charged].
func WithCharged(rules ...string) Option { return adapter.WithCharged[hooks](rules...) }

// AddCost counts n more units of the call whose context is ctx (the
// handler's, or its stream's Context()), for the rules of [WithCharged]:
// call it as the answer is produced (each streamed message, say), so that
// a call cut short is charged what was sent. Without such rules it does
// nothing.
func AddCost(ctx context.Context, n int) { adapter.MeterOf(ctx).Add(n) }

// meteredStream is a stream whose context carries the meter of its
// answer's cost.
type meteredStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *meteredStream) Context() context.Context { return s.ctx }

// WithHeaders selects the rate-limit metadata: see [adapter.WithHeaders].
func WithHeaders(style adapter.HeaderStyle) Option { return adapter.WithHeaders[hooks](style) }

// WithIETFDraft selects the syntax of the IETF fields: see [adapter.WithIETFDraft].
func WithIETFDraft(draft adapter.IETFDraft) Option { return adapter.WithIETFDraft[hooks](draft) }

// WithNoIdentity says what to do when a rule finds no identity: skip the
// rule (the default) or fail the call with codes.Unauthenticated
// ([adapter.NoIdentity401]). See [adapter.WithNoIdentity].
func WithNoIdentity(policy adapter.NoIdentityPolicy) Option {
	return adapter.WithNoIdentity[hooks](policy)
}

// ExceptMethods returns a [core.Rule] Skip function that skips every call
// but those to the given methods, named in full ("/pkg.Service/Method"), so
// that the rule limits those methods alone.
func ExceptMethods(fullMethods ...string) func(core.Request) bool {
	only := make(map[string]bool, len(fullMethods))
	for _, m := range fullMethods {
		only[m] = true
	}
	return func(r core.Request) bool { return !only[r.Route()] }
}

// UnaryServerInterceptor returns an interceptor that checks each unary call
// against rules with l, sends the rate-limit metadata, and either calls the
// handler or fails the call with codes.ResourceExhausted. The call's
// context reaches the store. It returns an error for invalid rules or
// options.
func UnaryServerInterceptor(l *core.Limiter, rules []core.Rule, opts ...Option) (grpc.UnaryServerInterceptor, error) {
	x, err := newInterceptor("grpclimit.UnaryServerInterceptor", l, rules, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if x.skip(ctx, info.FullMethod) {
			return handler(ctx, req)
		}
		ctx, p, owner := begin(ctx)
		if owner {
			defer p.flush()
		}
		out, err := x.check(ctx, info.FullMethod, p)
		if err == nil {
			if x.m.Charging() {
				// charged once the handler returns, or panics
				meter := new(adapter.Meter)
				ctx = adapter.WithMeter(ctx, meter)
				defer x.m.Charge(ctx, out, meter)
			}
			var resp any
			resp, err = handler(ctx, req)
			x.done(ctx, &out, err)
			return resp, err
		}
		x.done(ctx, &out, err)
		return nil, err
	}, nil
}

// StreamServerInterceptor returns an interceptor that checks each stream
// against rules with l once, when it opens, sends the rate-limit metadata,
// and either calls the handler or fails the stream with
// codes.ResourceExhausted. The stream's context reaches the store. It
// returns an error for invalid rules or options.
func StreamServerInterceptor(l *core.Limiter, rules []core.Rule, opts ...Option) (grpc.StreamServerInterceptor, error) {
	x, err := newInterceptor("grpclimit.StreamServerInterceptor", l, rules, opts)
	if err != nil {
		return nil, err
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if x.skip(ss.Context(), info.FullMethod) {
			return handler(srv, ss)
		}
		ctx, p, owner := begin(ss.Context())
		if owner {
			defer p.flush()
			ss = &serverStream{ServerStream: ss, ctx: ctx, p: p}
		}
		out, err := x.check(ctx, info.FullMethod, p)
		if err == nil {
			if x.m.Charging() {
				// charged once the handler returns (the stream is done), or panics
				meter := new(adapter.Meter)
				ctx = adapter.WithMeter(ctx, meter)
				ss = &meteredStream{ServerStream: ss, ctx: ctx}
				defer x.m.Charge(ctx, out, meter)
			}
			err = handler(srv, ss)
		}
		x.done(ctx, &out, err)
		return err
	}, nil
}

// MustUnaryServerInterceptor is [UnaryServerInterceptor] for rules and
// options fixed at start-up: it panics if they are invalid.
func MustUnaryServerInterceptor(l *core.Limiter, rules []core.Rule, opts ...Option) grpc.UnaryServerInterceptor {
	i, err := UnaryServerInterceptor(l, rules, opts...)
	if err != nil {
		panic(err)
	}
	return i
}

// MustStreamServerInterceptor is [StreamServerInterceptor] for rules and
// options fixed at start-up: it panics if they are invalid.
func MustStreamServerInterceptor(l *core.Limiter, rules []core.Rule, opts ...Option) grpc.StreamServerInterceptor {
	i, err := StreamServerInterceptor(l, rules, opts...)
	if err != nil {
		panic(err)
	}
	return i
}

// interceptor is what the unary and stream interceptors share.
type interceptor struct {
	m *adapter.Middleware
	h hooks
}

// newInterceptor makes the interceptor of constructor fn, which its
// errors name.
func newInterceptor(fn string, l *core.Limiter, rules []core.Rule, opts []Option) (*interceptor, error) {
	m, h, err := adapter.Build(fn, l, rules, opts)
	if err == nil && h.inFlightDenied != nil {
		err = fmt.Errorf("%s: %w: WithInFlightDeniedHandler is for the InFlight interceptors", fn, adapter.ErrOptionMismatch)
	}
	if err != nil {
		return nil, err
	}
	return &interceptor{m: m, h: h}, nil
}

// skip reports whether a call goes to its handler unlimited.
func (x *interceptor) skip(ctx context.Context, fullMethod string) bool {
	return x.h.skips(ctx, fullMethod)
}

// skips reports whether a call goes to its handler unlimited: the health
// service's, and those that the WithSkip function skips.
func (h *hooks) skips(ctx context.Context, fullMethod string) bool {
	return strings.HasPrefix(fullMethod, healthPrefix) || (h.skip != nil && h.skip(ctx, fullMethod))
}

// done reports the code of a call's error to the middleware, for the rules
// that count only some calls.
func (x *interceptor) done(ctx context.Context, out *adapter.Outcome, err error) {
	if x.m.Counting() {
		_ = x.m.Done(ctx, out, int(status.Code(err))) // the Limiter reports the error
	}
}

// check decides a call, adds its rate-limit fields to p, and returns the
// outcome, with nil if the call may proceed, else the error to fail it
// with.
func (x *interceptor) check(ctx context.Context, fullMethod string, p *pending) (adapter.Outcome, error) {
	out := x.m.Handle(request{ctx: ctx, method: fullMethod})
	out.Headers.Set(p)
	if out.Proceed() {
		return out, nil
	}
	var err error
	switch {
	case out.Limited():
		if x.h.denied != nil {
			err = x.h.denied(ctx, fullMethod, out.Decision)
		}
		if err == nil {
			err = deniedError(out.Decision)
		}
	default:
		def := failedError(&out)
		if x.h.onError != nil {
			err = x.h.onError(ctx, fullMethod, status.Code(def), out.Err)
		}
		if err == nil {
			err = def
		}
	}
	return out, err
}
