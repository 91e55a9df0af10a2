package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/inflight"
	"github.com/ratekit/ratekit/keyfuncs"
)

// At most one call per client in flight, across every replica that shares
// the Redis: while a stream is open, a call fails with ResourceExhausted;
// once it ends, its slot is free again.
func ExampleInFlightUnaryServerInterceptor() {
	mr, err := miniredis.Run() // stands in for Redis
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	// miniredis shares this process's CPU: a deadline of a second (not the
	// default 50ms) keeps a busy machine from sending it to the failure policy
	limiter, err := inflight.New(rdb, inflight.WithTimeout(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	clientIP, err := keyfuncs.IP() // the peer's address
	if err != nil {
		log.Fatal(err)
	}
	rule := inflight.Rule{Name: "calls", Limit: 1, Key: clientIP}

	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpclimit.MustInFlightUnaryServerInterceptor(limiter, rule)),
		grpc.ChainStreamInterceptor(grpclimit.MustInFlightStreamServerInterceptor(limiter, rule)),
	)
	srv.RegisterService(&echoDesc, new(echo)) // a test service: Chat echoes each message
	conn := start(srv)
	defer srv.Stop()
	defer conn.Close()
	say := func() error {
		return conn.Invoke(context.Background(), "/ratekit.test.Echo/Say", wrapperspb.String("hi"), new(wrapperspb.StringValue))
	}

	chat, err := conn.NewStream(context.Background(), &echoDesc.Streams[1], "/ratekit.test.Echo/Chat")
	if err != nil {
		log.Fatal(err)
	}
	if err := chat.SendMsg(wrapperspb.String("hello")); err != nil {
		log.Fatal(err)
	}
	if err := chat.RecvMsg(new(wrapperspb.StringValue)); err != nil { // the stream is open
		log.Fatal(err)
	}
	fmt.Println("while the stream is open:", status.Convert(say()).Message())
	if err := chat.CloseSend(); err != nil {
		log.Fatal(err)
	}
	chat.RecvMsg(new(wrapperspb.StringValue)) // the end of the stream
	fmt.Println("once it has ended:", status.Code(say()))
	// Output:
	// while the stream is open: concurrency limit "calls" reached: retry after 1s
	// once it has ended: OK
}
