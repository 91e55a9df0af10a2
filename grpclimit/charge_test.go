package grpclimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
)

// perMessage is the cost each answer's message reports.
const perMessage = 50

// costing serves the Echo service behind grpclimit's interceptors with
// rule charged, and, inside them, interceptors that play the handler's
// part: each message a call sends reports perMessage units with AddCost, a
// unary call once it returns, a stream as each message goes out; a unary
// call whose text is "panic" reports 7 and panics, and a stream panics
// when it receives "panic"; an outer interceptor turns a panic into
// codes.Internal, as a recovery interceptor does.
func costing(t *testing.T, l *core.Limiter, rule core.Rule) *grpc.ClientConn {
	t.Helper()
	unary := grpclimit.MustUnaryServerInterceptor(l, []core.Rule{rule}, grpclimit.WithCharged(rule.Name))
	stream := grpclimit.MustStreamServerInterceptor(l, []core.Rule{rule}, grpclimit.WithCharged(rule.Name))
	recovering := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = status.Error(codes.Internal, "panic")
			}
		}()
		return handler(ctx, req)
	}
	reporting := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if text, _ := req.(interface{ GetValue() string }); text != nil && text.GetValue() == "panic" {
			grpclimit.AddCost(ctx, 7)
			panic("after the answer")
		}
		grpclimit.AddCost(ctx, perMessage)
		return resp, err
	}
	streaming := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &reportingStream{ss})
	}
	recoveringStream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = status.Error(codes.Internal, "panic")
			}
		}()
		return handler(srv, ss)
	}
	conn, _ := serve(t, grpc.ChainUnaryInterceptor(recovering, unary, reporting), grpc.ChainStreamInterceptor(recoveringStream, stream, streaming))
	return conn
}

// reportingStream reports perMessage units for each message sent, and
// panics when it receives "panic".
type reportingStream struct{ grpc.ServerStream }

func (s *reportingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if text, _ := m.(interface{ GetValue() string }); err == nil && text != nil && text.GetValue() == "panic" {
		panic("after the stream started")
	}
	return err
}

func (s *reportingStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if err == nil {
		grpclimit.AddCost(s.Context(), perMessage)
	}
	return err
}

// A unary call is charged what it reported once it returns, and a stream
// what it reported for each message once its handler returns: past a
// budget, the next call fails with ResourceExhausted, its metadata showing
// the debt (nothing remaining, a retry-after until it is repaid).
func TestCharged(t *testing.T) {
	l, clock := adaptertest.NewLimiter(t)
	rule := core.Rule{Name: "tokens", Limit: core.PerMinute(100), Key: adaptertest.ClientKey()}
	conn := costing(t, l, rule)

	for i, left := range []int{50, 0} { // 50 units each, on a budget of 100
		if _, _, err := say(t, conn, "hi", adaptertest.ClientHeader, "a"); err != nil {
			t.Fatalf("unary call %d, while not in debt: %v", i+1, err)
		}
		adaptertest.RemainingBecomes(t, l, rule, "a", left, left == 0)
	}
	checkDebt(t, conn, "a")

	got, _, err := count(t, conn, "hi", adaptertest.ClientHeader, "b")
	if err != nil || len(got) != 3 {
		t.Fatalf("Count: %v %v, want three messages", got, err)
	}
	p := adaptertest.RemainingBecomes(t, l, rule, "b", 0, true)
	if want := 51 * 600 * time.Millisecond; p.RetryAfter != want { // 150 on 100: 50 in debt and one to fit
		t.Errorf("a stream of 150: RetryAfter %v, want %v", p.RetryAfter, want)
	}
	checkDebt(t, conn, "b")
	clock.Advance(31 * time.Second)
	if _, _, err := count(t, conn, "hi", adaptertest.ClientHeader, "b"); err != nil {
		t.Errorf("once the debt is repaid: %v", err)
	}
}

// checkDebt checks that client's next call is denied with the metadata of
// a debt.
func checkDebt(t *testing.T, conn *grpc.ClientConn, client string) {
	t.Helper()
	_, md, err := say(t, conn, "hi", adaptertest.ClientHeader, client)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("%s in debt: %v, want ResourceExhausted", client, err)
	}
	if got := md.Get("x-ratelimit-remaining"); len(got) != 1 || got[0] != "0" {
		t.Errorf("%s in debt: x-ratelimit-remaining %q, want 0", client, got)
	}
	if got := md.Get("retry-after"); len(got) != 1 || got[0] == "0" {
		t.Errorf("%s in debt: retry-after %q, want the wait until the debt is repaid", client, got)
	}
}

// A unary handler that panics after it answered is charged what it
// reported before the panic.
func TestChargedPanic(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := core.Rule{Name: "tokens", Limit: core.PerMinute(100), Key: adaptertest.ClientKey()}
	conn := costing(t, l, rule)
	if _, _, err := say(t, conn, "panic", adaptertest.ClientHeader, "a"); status.Code(err) != codes.Internal {
		t.Fatalf("a call that panics: %v, want Internal", err)
	}
	adaptertest.RemainingBecomes(t, l, rule, "a", 93, false)
}

// A stream whose client hangs up after its first answer is charged that
// answer, once its handler returns on the hang-up; one whose handler
// panics after its first answer is charged that answer too.
func TestChargedStreamCut(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := core.Rule{Name: "tokens", Limit: core.PerMinute(100), Key: adaptertest.ClientKey()}
	conn := costing(t, l, rule)
	for _, tc := range []struct {
		client, then string // then: "" hangs up, else the second message
		code         codes.Code
	}{{"a", "", codes.Canceled}, {"b", "panic", codes.Internal}} {
		ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(t.Context(), adaptertest.ClientHeader, tc.client))
		chat, err := conn.NewStream(ctx, &echoDesc.Streams[1], chatMethod)
		if err != nil {
			t.Fatal(err)
		}
		if err := chat.SendMsg(wrapperspb.String("hi")); err != nil {
			t.Fatal(err)
		}
		if err := chat.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatalf("%s: the first answer: %v", tc.client, err)
		}
		if tc.then == "" {
			cancel() // the client goes
		} else if err := chat.SendMsg(wrapperspb.String(tc.then)); err != nil {
			t.Fatal(err)
		}
		if err := chat.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != tc.code {
			t.Fatalf("%s: the stream ended with %v, want %v", tc.client, err, tc.code)
		}
		cancel()
		adaptertest.RemainingBecomes(t, l, rule, tc.client, 100-perMessage, false)
	}
}
