package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The test service, ratekit.test.Echo, is registered by hand (no generated
// code): its messages are wrapperspb.StringValue.
//
//	service Echo {
//	  rpc Say(StringValue) returns (StringValue);                // the text back
//	  rpc Login(StringValue) returns (StringValue);              // "welcome, " and the text
//	  rpc Count(StringValue) returns (stream StringValue);       // "1", "2", "3"
//	  rpc Chat(stream StringValue) returns (stream StringValue); // each text back
//	}
//
// Say, Login and Count send header metadata of their own ("handler": "sent") when
// the text is sendHeader, and set it ("handler": "set") when it is
// setHeader.
const (
	sayMethod   = "/ratekit.test.Echo/Say"
	loginMethod = "/ratekit.test.Echo/Login"
	countMethod = "/ratekit.test.Echo/Count"
	chatMethod  = "/ratekit.test.Echo/Chat"

	sendHeader = "send-header"
	setHeader  = "set-header"
	// wrongPassword makes Say and Login fail with codes.Unauthenticated.
	wrongPassword = "wrong-password"
)

var echoDesc = grpc.ServiceDesc{
	ServiceName: "ratekit.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Say", Handler: unaryHandler(sayMethod, "")},
		{MethodName: "Login", Handler: unaryHandler(loginMethod, "welcome, ")},
	},
	Streams: []grpc.StreamDesc{
		{StreamName: "Count", Handler: countHandler, ServerStreams: true},
		{StreamName: "Chat", Handler: chatHandler, ServerStreams: true, ClientStreams: true},
	},
}

// echo counts the calls that reached a handler.
type echo struct{ handled atomic.Int64 }

// unaryHandler returns the handler of a unary method named fullMethod,
// which answers with prefix and the text.
func unaryHandler(fullMethod, prefix string) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		answer := func(ctx context.Context, req any) (any, error) {
			srv.(*echo).handled.Add(1)
			text := req.(*wrapperspb.StringValue).GetValue()
			if text == wrongPassword {
				return nil, status.Error(codes.Unauthenticated, "wrong password")
			}
			if err := handlerHeader(text, func(md metadata.MD) error { return grpc.SendHeader(ctx, md) },
				func(md metadata.MD) error { return grpc.SetHeader(ctx, md) }); err != nil {
				return nil, err
			}
			return wrapperspb.String(prefix + text), nil
		}
		if interceptor == nil {
			return answer(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}, answer)
	}
}

func countHandler(srv any, ss grpc.ServerStream) error {
	srv.(*echo).handled.Add(1)
	in := new(wrapperspb.StringValue)
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	if err := handlerHeader(in.GetValue(), ss.SendHeader, ss.SetHeader); err != nil {
		return err
	}
	for i := 1; i <= 3; i++ {
		if err := ss.SendMsg(wrapperspb.String(strconv.Itoa(i))); err != nil {
			return err
		}
	}
	return nil
}

func chatHandler(srv any, ss grpc.ServerStream) error {
	srv.(*echo).handled.Add(1)
	for {
		in := new(wrapperspb.StringValue)
		err := ss.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := ss.SendMsg(in); err != nil {
			return err
		}
	}
}

// handlerHeader sends or sets the handler's own header metadata, as text
// asks.
func handlerHeader(text string, send, set func(metadata.MD) error) error {
	switch text {
	case sendHeader:
		return send(metadata.Pairs("handler", "sent"))
	case setHeader:
		return set(metadata.Pairs("handler", "set"))
	}
	return nil
}

// serve starts a gRPC server with opts and the Echo service on a loopback
// port, and returns a client connection to it and the service. Both stop
// when the test ends.
func serve(tb testing.TB, opts ...grpc.ServerOption) (*grpc.ClientConn, *echo) {
	tb.Helper()
	srv := grpc.NewServer(opts...)
	svc := new(echo)
	srv.RegisterService(&echoDesc, svc)
	return listen(tb, srv), svc
}

// listen serves srv on a loopback port ([start]) and returns a client
// connection to it. Both stop when the test ends.
func listen(tb testing.TB, srv *grpc.Server) *grpc.ClientConn {
	tb.Helper()
	conn := start(srv)
	tb.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return conn
}

// say calls Say with text and the metadata pairs md (key, value, ...), and
// returns the reply's text, its header metadata and its error.
func say(tb testing.TB, conn *grpc.ClientConn, text string, md ...string) (string, metadata.MD, error) {
	tb.Helper()
	ctx := metadata.AppendToOutgoingContext(tb.Context(), md...)
	var header metadata.MD
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, sayMethod, wrapperspb.String(text), out, grpc.Header(&header))
	return out.GetValue(), header, err
}

// count opens a Count stream with text and the metadata pairs md, and
// returns the texts received, the stream's header metadata and the error
// that ended it (nil for a stream that ended well).
func count(tb testing.TB, conn *grpc.ClientConn, text string, md ...string) ([]string, metadata.MD, error) {
	tb.Helper()
	ctx := metadata.AppendToOutgoingContext(tb.Context(), md...)
	s, err := conn.NewStream(ctx, &echoDesc.Streams[0], countMethod)
	if err != nil {
		return nil, nil, err
	}
	if err := s.SendMsg(wrapperspb.String(text)); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	if err := s.CloseSend(); err != nil {
		return nil, nil, err
	}
	var got []string
	for {
		in := new(wrapperspb.StringValue)
		if err = s.RecvMsg(in); err != nil {
			break
		}
		got = append(got, in.GetValue())
	}
	header, _ := s.Header()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return got, header, err
}
