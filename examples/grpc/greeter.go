package main

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The Greeter service, registered by hand: its messages are the well-known
// wrapper types, so it needs no generated code. In protobuf terms:
//
//	syntax = "proto3";
//	package ratekit.example;
//	import "google/protobuf/wrappers.proto";
//
//	service Greeter {
//	  // limited by the default rule
//	  rpc SayHello(google.protobuf.StringValue) returns (google.protobuf.StringValue);
//	  // limited by the default and the strict rule
//	  rpc SayHelloStrict(google.protobuf.StringValue) returns (google.protobuf.StringValue);
//	  // n (3 if 0, at most 10) greetings; the stream is limited once, by the default rule
//	  rpc Countdown(google.protobuf.UInt32Value) returns (stream google.protobuf.StringValue);
//	}
const (
	greeterService = "ratekit.example.Greeter"
	sayHelloMethod = "/" + greeterService + "/SayHello"
	strictMethod   = "/" + greeterService + "/SayHelloStrict"
	countdown      = "/" + greeterService + "/Countdown"
	greeterFile    = "ratekit/example/greeter.proto"
)

var greeterDesc = grpc.ServiceDesc{
	ServiceName: greeterService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "SayHello", Handler: sayHello(sayHelloMethod, "")},
		{MethodName: "SayHelloStrict", Handler: sayHello(strictMethod, ", strictly")},
	},
	Streams:  []grpc.StreamDesc{{StreamName: "Countdown", Handler: countdownHandler, ServerStreams: true}},
	Metadata: greeterFile,
}

// sayHello returns the handler of a unary method named fullMethod: it
// greets the name it is given, with suffix.
func sayHello(fullMethod, suffix string) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	greet := func(_ context.Context, req any) (any, error) {
		text := "hello from gRPC"
		if name := req.(*wrapperspb.StringValue).GetValue(); name != "" {
			text += ", " + name
		}
		return wrapperspb.String(text + suffix), nil
	}
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		if interceptor == nil {
			return greet(ctx, in)
		}
		return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}, greet)
	}
}

func countdownHandler(_ any, ss grpc.ServerStream) error {
	in := new(wrapperspb.UInt32Value)
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	n := min(in.GetValue(), 10)
	if n == 0 {
		n = 3
	}
	for i := n; i > 0; i-- {
		if err := ss.SendMsg(wrapperspb.String(strconv.Itoa(int(i)))); err != nil {
			return err
		}
	}
	return nil
}

func init() {
	if err := registerGreeterFile(); err != nil {
		panic(err) // cannot happen: the descriptor is fixed, and checked by the tests
	}
}

// registerGreeterFile registers the descriptor of the Greeter service, so
// that server reflection (and grpcurl through it) can describe it.
func registerGreeterFile() error {
	str := proto.String
	method := func(name, in, out string, stream bool) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{
			Name:            str(name),
			InputType:       str(".google.protobuf." + in),
			OutputType:      str(".google.protobuf." + out),
			ServerStreaming: proto.Bool(stream),
		}
	}
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name:       str(greeterFile),
		Package:    str("ratekit.example"),
		Dependency: []string{"google/protobuf/wrappers.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: str("Greeter"),
			Method: []*descriptorpb.MethodDescriptorProto{
				method("SayHello", "StringValue", "StringValue", false),
				method("SayHelloStrict", "StringValue", "StringValue", false),
				method("Countdown", "UInt32Value", "StringValue", true),
			},
		}},
		Syntax: str("proto3"),
	}, protoregistry.GlobalFiles)
	if err != nil {
		return err
	}
	return protoregistry.GlobalFiles.RegisterFile(fd)
}
