package examples_test

// Snippets of README.md (the gRPC quick start) and docs/grpc.md, checked
// like those of snippets_test.go. The functions that serve until killed are
// compiled, not run.

import (
	"context"
	"log"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
)

// A gRPC server, with the quick start's limiter and rules.
func Example_grpc() {
	mem, err := memorystore.New() // the quick start uses Redis
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := core.NewLimiter(mem)
	if err != nil {
		log.Fatal(err)
	}
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(100), Key: clientIP}}

	// snippet:grpc
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.MustUnaryServerInterceptor(limiter, rules)),
		grpc.ChainStreamInterceptor(grpclimit.MustStreamServerInterceptor(limiter, rules)),
	)
	healthpb.RegisterHealthServer(srv, health.NewServer()) // never limited
	// ... and your own services
	lis, err := net.Listen("tcp", ":50051")
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(srv.Serve(lis))
	// snippet:end
}

// A rule of its own for one method, beside the rule of every method.
func Example_grpcMethods() {
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	// snippet:grpcmethods
	rules := []core.Rule{
		{Name: "default", Limit: core.PerMinute(100), Key: clientIP},
		{Name: "login", Limit: core.PerMinute(5), Key: clientIP, Skip: grpclimit.ExceptMethods("/auth.v1.Auth/Login")},
	}
	// snippet:end
	_ = rules
}

// What a client reads of a denial.
func Example_grpcClient() {
	conn, err := grpc.NewClient("localhost:50051", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	reply := new(wrapperspb.StringValue)
	// snippet:grpcclient
	var header metadata.MD // ratelimit, ratelimit-policy, x-ratelimit-*, retry-after
	err = conn.Invoke(ctx, "/ratekit.example.Greeter/SayHello", wrapperspb.String("alice"), reply, grpc.Header(&header))
	if status.Code(err) == codes.ResourceExhausted {
		for _, d := range status.Convert(err).Details() {
			if info, ok := d.(*errdetails.RetryInfo); ok {
				time.Sleep(info.GetRetryDelay().AsDuration()) // then try again
			}
		}
	}
	// snippet:end
}
