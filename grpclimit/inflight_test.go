package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
)

// The methods that the concurrency suite's GET / and GET /healthz call.
const (
	suiteMethod  = "/ratekit.test.Suite/Call"
	healthMethod = "/ratekit.test.Suite/Healthz"
)

// inFlightHarness returns the concurrency suite's harness for the unary
// interceptor, or for the stream one. It calls the interceptor directly,
// as gRPC would, with the request's X-Client header as metadata, and
// translates its answer (see adaptertest.InFlightHarness.RPC).
func inFlightHarness(stream bool) adaptertest.InFlightHarness {
	name := "grpclimit.InFlightUnaryServerInterceptor"
	if stream {
		name = "grpclimit.InFlightStreamServerInterceptor"
	}
	return adaptertest.InFlightHarness{Name: name, RPC: true, New: func(_ testing.TB, l *inflight.Limiter, rule inflight.Rule, s adaptertest.InFlightSetup) (adaptertest.App, error) {
		call, err := suiteCall(l, rule, s, stream)
		if err != nil {
			return nil, err
		}
		return func(r *http.Request) adaptertest.Response {
			method := map[string]string{"/": suiteMethod, "/healthz": healthMethod}[r.URL.Path]
			ctx := metadata.NewIncomingContext(r.Context(), metadata.Pairs(adaptertest.ClientHeader, r.Header.Get(adaptertest.ClientHeader)))
			handler := func(ctx context.Context) {
				if s.Handler != nil {
					s.Handler(metadata.ValueFromIncomingContext(ctx, adaptertest.ClientHeader)[0])
				}
			}
			return translate(call(ctx, method, handler))
		}, nil
	}}
}

// suiteCall returns a function that makes one call through the
// interceptor that s describes, with handler as the method's handler.
func suiteCall(l *inflight.Limiter, rule inflight.Rule, s adaptertest.InFlightSetup, stream bool) (func(ctx context.Context, method string, handler func(context.Context)) error, error) {
	opts := inFlightOptions(s)
	if stream {
		x, err := adaptertest.MakeInFlight(s, grpclimit.InFlightStreamServerInterceptor, grpclimit.MustInFlightStreamServerInterceptor, l, rule, opts)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, method string, handler func(context.Context)) error {
			return x(nil, fakeStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: method}, func(_ any, ss grpc.ServerStream) error {
				handler(ss.Context())
				return nil
			})
		}, nil
	}
	x, err := adaptertest.MakeInFlight(s, grpclimit.InFlightUnaryServerInterceptor, grpclimit.MustInFlightUnaryServerInterceptor, l, rule, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, method string, handler func(context.Context)) error {
		_, err := x(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, func(ctx context.Context, _ any) (any, error) {
			handler(ctx)
			return nil, nil
		})
		return err
	}, nil
}

// fakeStream is the grpc.ServerStream of a call made without a server.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context { return s.ctx }

func inFlightOptions(s adaptertest.InFlightSetup) []grpclimit.Option {
	opts := []grpclimit.Option{grpclimit.WithNoIdentity(s.NoIdentity)}
	if s.Skip != "" {
		opts = append(opts, grpclimit.WithSkip(func(_ context.Context, fullMethod string) bool { return fullMethod == healthMethod }))
	}
	if s.Denied != nil {
		opts = append(opts, grpclimit.WithInFlightDeniedHandler(func(_ context.Context, _ string, res inflight.Result) error {
			return answer(s.Denied(res, ""))
		}))
	}
	if s.Error != nil {
		opts = append(opts, grpclimit.WithErrorHandler(func(_ context.Context, _ string, _ codes.Code, err error) error {
			return answer(s.Error(err, ""))
		}))
	}
	return opts
}

// answer carries a custom handler's answer in an Aborted status, which
// translate reads back.
func answer(a adaptertest.Answer) error {
	return status.Error(codes.Aborted, fmt.Sprintf("%d %s", a.Status, a.Body))
}

// translate returns the HTTP view of a call's error.
func translate(err error) adaptertest.Response {
	st := status.Convert(err)
	r := adaptertest.Response{Header: make(http.Header)}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			r.Header.Set("Retry-After", strconv.FormatInt(int64(ri.GetRetryDelay().AsDuration().Seconds()), 10))
		}
	}
	switch st.Code() {
	case codes.OK:
		r.Status, r.Body = http.StatusOK, "ok"
	case codes.ResourceExhausted:
		r.Status = http.StatusTooManyRequests
	case codes.Unavailable:
		r.Status = http.StatusServiceUnavailable
	case codes.Unauthenticated:
		r.Status = http.StatusUnauthorized
	case codes.Aborted:
		code, body, _ := strings.Cut(st.Message(), " ")
		r.Status, _ = strconv.Atoi(code)
		r.Body = body
	default:
		r.Status = http.StatusInternalServerError
	}
	return r
}

func TestInFlightUnarySuite(t *testing.T) { adaptertest.RunInFlight(t, inFlightHarness(false)) }

func TestInFlightStreamSuite(t *testing.T) { adaptertest.RunInFlight(t, inFlightHarness(true)) }

// Each interceptor rejects the other's denied handler, and nil options.
func TestInFlightOptions(t *testing.T) {
	bad := map[string]grpclimit.Option{
		adaptertest.NilOption:       nil,
		"WithSkip":                  grpclimit.WithSkip(nil),
		"WithInFlightDeniedHandler": grpclimit.WithInFlightDeniedHandler(nil),
		"WithDeniedHandler": grpclimit.WithDeniedHandler(func(context.Context, string, core.Decision) error {
			return nil
		}),
	}
	adaptertest.InFlightRejectsOptions(t, "grpclimit.InFlightUnaryServerInterceptor", grpclimit.InFlightUnaryServerInterceptor, grpclimit.MustInFlightUnaryServerInterceptor, bad)
	adaptertest.InFlightRejectsOptions(t, "grpclimit.InFlightStreamServerInterceptor", grpclimit.InFlightStreamServerInterceptor, grpclimit.MustInFlightStreamServerInterceptor, bad)
	l, _ := adaptertest.NewLimiter(t)
	rules := []core.Rule{adaptertest.FixedRule("r", 1)}
	mismatch := grpclimit.WithInFlightDeniedHandler(func(context.Context, string, inflight.Result) error { return nil })
	if _, err := grpclimit.UnaryServerInterceptor(l, rules, mismatch); err == nil {
		t.Error("UnaryServerInterceptor took WithInFlightDeniedHandler")
	}
}

// On a real server: a call beyond the cap fails with ResourceExhausted,
// RetryInfo and QuotaFailure; the health service is never limited; a
// stream holds its slot while it is open, and gives it back when it ends.
func TestInFlightServer(t *testing.T) {
	l, _ := adaptertest.NewInFlightLimiter(t)
	rule := inflight.Rule{Name: "calls", Limit: 1, Key: keyfuncs.Static("all")}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.MustInFlightUnaryServerInterceptor(l, rule)),
		grpc.ChainStreamInterceptor(grpclimit.MustInFlightStreamServerInterceptor(l, rule)),
	)
	srv.RegisterService(&echoDesc, new(echo))
	registerHealth(srv)
	conn := listen(t, srv)

	// a Chat stream is open until the client closes its side
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	chat, err := conn.NewStream(ctx, &echoDesc.Streams[1], chatMethod)
	if err != nil {
		t.Fatal(err)
	}
	if err := chat.SendMsg(wrapperspb.String("hi")); err != nil {
		t.Fatal(err)
	}
	if err := chat.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		t.Fatalf("open stream: %v", err)
	}
	_, _, err = say(t, conn, "hi")
	st := checkStatus(t, "call beside the open stream", err, codes.ResourceExhausted, `concurrency limit "calls" reached: retry after 1s`)
	checkDetails(t, "denied call", st, retryInfo(inflight.DefaultRetryAfter), &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject: "calls", Description: "at most 1 in flight", QuotaId: "calls", QuotaValue: 1,
	}}})
	if _, err := checkHealth(t, conn); err != nil {
		t.Errorf("health check beside the open stream: %v", err)
	}
	if err := watchHealth(t, conn); err != nil {
		t.Errorf("health watch beside the open stream: %v", err)
	}
	if err := chat.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := chat.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
		t.Fatalf("stream end: %v", err)
	}
	if got, _, err := say(t, conn, "hi"); err != nil || got != "hi" {
		t.Errorf("call once the stream ended: %q, %v", got, err)
	}
}

// A call whose context ends before its slot is decided fails with its
// context's code, not Internal: the concurrency limiter did not fail.
func TestInFlightCallEnded(t *testing.T) {
	l, _ := adaptertest.NewInFlightLimiter(t)
	rule := inflight.Rule{Name: "calls", Limit: 1, Key: keyfuncs.Static("all")}
	limit := grpclimit.MustInFlightUnaryServerInterceptor(l, rule)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ran := false
	_, err := limit(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/echo.Echo/Say"}, func(context.Context, any) (any, error) {
		ran = true
		return nil, nil
	})
	if got := status.Code(err); got != codes.Canceled || ran {
		t.Errorf("a call whose context ended: %v, handler ran %v; want Canceled, and no handler", err, ran)
	}
}
