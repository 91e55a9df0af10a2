package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/keyfuncs"
	"github.com/ratekit/ratekit/memorystore"
)

// A limit of 2 calls a minute per client IP address on every method of a
// server. The third call fails with ResourceExhausted, whose
// details say how long to wait and which rule denied it.
func Example() {
	// a memorystore.Store on a still clock, so that the output is exact; a
	// fleet shares a redisstore.Store instead
	still := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store, err := memorystore.New(memorystore.WithClock(func() time.Time { return still }))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	limiter, err := core.NewLimiter(store)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	clientIP, err := keyfuncs.IP() // the peer's address
	if err != nil {
		log.Fatal(err)
	}
	rules := []core.Rule{{Name: "default", Limit: core.PerMinute(2), Key: clientIP}}

	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.MustUnaryServerInterceptor(limiter, rules)),
		grpc.ChainStreamInterceptor(grpclimit.MustStreamServerInterceptor(limiter, rules)),
	)
	srv.RegisterService(&echoDesc, new(echo)) // a test service: Say answers with its text
	conn := start(srv)
	defer srv.Stop()
	defer conn.Close()

	for range 3 {
		var header metadata.MD
		err := conn.Invoke(context.Background(), "/ratekit.test.Echo/Say", wrapperspb.String("hi"),
			new(wrapperspb.StringValue), grpc.Header(&header))
		fmt.Printf("%v ratelimit=%s retry-after=%s\n", status.Code(err), header.Get("ratelimit"), header.Get("retry-after"))
		for _, d := range status.Convert(err).Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				fmt.Println("  RetryInfo:", d.GetRetryDelay().AsDuration())
			case *errdetails.QuotaFailure:
				for _, v := range d.GetViolations() {
					fmt.Printf("  QuotaFailure: %s, %s\n", v.GetSubject(), v.GetDescription())
				}
			}
		}
	}
	// Output:
	// OK ratelimit=["default";r=1;t=30] retry-after=[]
	// OK ratelimit=["default";r=0;t=60] retry-after=[]
	// ResourceExhausted ratelimit=["default";r=0;t=60] retry-after=[30]
	//   RetryInfo: 30s
	//   QuotaFailure: default, 2 per 1m0s (gcra, burst 2)
}

// One interceptor holds every rule; a rule of its own limits one method
// more, and the others not at all.
func ExampleExceptMethods() {
	store, err := memorystore.New()
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	limiter, err := core.NewLimiter(store)
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	clientIP, err := keyfuncs.IP()
	if err != nil {
		log.Fatal(err)
	}
	rules := []core.Rule{
		{Name: "default", Limit: core.PerMinute(100), Key: clientIP},
		{Name: "login", Limit: core.PerMinute(1), Key: clientIP, Skip: grpclimit.ExceptMethods("/ratekit.test.Echo/Login")},
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpclimit.MustUnaryServerInterceptor(limiter, rules)))
	srv.RegisterService(&echoDesc, new(echo))
	conn := start(srv)
	defer srv.Stop()
	defer conn.Close()

	for _, method := range []string{"/ratekit.test.Echo/Login", "/ratekit.test.Echo/Login", "/ratekit.test.Echo/Say"} {
		var header metadata.MD
		err := conn.Invoke(context.Background(), method, wrapperspb.String("alice"), new(wrapperspb.StringValue), grpc.Header(&header))
		fmt.Printf("%s: %v %s\n", method, status.Code(err), header.Get("ratelimit-policy"))
	}
	// Output:
	// /ratekit.test.Echo/Login: OK ["default";q=100;w=60, "login";q=1;w=60]
	// /ratekit.test.Echo/Login: ResourceExhausted ["default";q=100;w=60, "login";q=1;w=60]
	// /ratekit.test.Echo/Say: OK ["default";q=100;w=60]
}

// start serves srv on a loopback port and returns a client connection to it.
func start(srv *grpc.Server) *grpc.ClientConn {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(ln)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	return conn
}
