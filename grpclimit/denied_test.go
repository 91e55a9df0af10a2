package grpclimit_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// A call denied by a later identity's rule spends nothing under the
// earlier's, for the unary interceptor and the stream one, on a real
// redis-server and a Cluster (the suite's case, run on gRPC).
func TestDeniedSpendsNothing(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "unary", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			adaptertest.DeniedSpendsNothing(t, func(t *testing.T, l *core.Limiter, rules []core.Rule) adaptertest.App {
				return rpcApp(t, l, rules, stream)
			})
		})
	}
}

// rpcApp returns an app that makes each request a call of suiteMethod
// through the unary interceptor of l and rules, or the stream one, called
// directly as gRPC would, with the request's header fields as its
// metadata, and translates its answer (see adaptertest.InFlightHarness.RPC).
func rpcApp(t *testing.T, l *core.Limiter, rules []core.Rule, stream bool) adaptertest.App {
	t.Helper()
	call := unaryCall(t, l, rules)
	if stream {
		call = streamCall(t, l, rules)
	}
	return func(r *http.Request) adaptertest.Response {
		md := metadata.MD{}
		for k, vs := range r.Header {
			md.Append(strings.ToLower(k), vs...)
		}
		return translate(call(metadata.NewIncomingContext(r.Context(), md)))
	}
}

// unaryCall returns a function that makes one call of suiteMethod through
// the unary interceptor of l and rules.
func unaryCall(t *testing.T, l *core.Limiter, rules []core.Rule) func(context.Context) error {
	x, err := grpclimit.UnaryServerInterceptor(l, rules)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) error {
		_, err := x(ctx, nil, &grpc.UnaryServerInfo{FullMethod: suiteMethod}, func(context.Context, any) (any, error) { return nil, nil })
		return err
	}
}

// streamCall returns a function that makes one call of suiteMethod
// through the stream interceptor of l and rules.
func streamCall(t *testing.T, l *core.Limiter, rules []core.Rule) func(context.Context) error {
	x, err := grpclimit.StreamServerInterceptor(l, rules)
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context) error {
		return x(nil, fakeStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: suiteMethod}, func(any, grpc.ServerStream) error { return nil })
	}
}
