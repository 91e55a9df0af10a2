package grpclimit_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/memorystore"
)

// A budget of 100 tokens a minute per API key, charged what each call
// really cost once it is done. A call is admitted while the key is not in
// debt; a completion of 150 tokens leaves it 50 in debt, and the next call
// is refused until the debt is repaid and one token fits.
func ExampleAddCost() {
	still := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // a still clock: the output is exact
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
	tokens := core.Rule{
		Name:  "tokens",
		Limit: core.PerMinute(100),
		Key:   func(core.Request) (string, error) { return "apikey:demo", nil },
	}
	// the handler's side: here an interceptor inside the limiter's stands
	// in for a handler that streamed a completion of 150 tokens and reports
	// them with AddCost on its context
	completion := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		grpclimit.AddCost(ctx, 150)
		return resp, err
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		grpclimit.MustUnaryServerInterceptor(limiter, []core.Rule{tokens}, grpclimit.WithCharged("tokens")),
		completion,
	))
	srv.RegisterService(&echoDesc, new(echo)) // a test service: Say answers with its text
	conn := start(srv)
	defer srv.Stop()
	defer conn.Close()

	call := func() {
		var header metadata.MD
		err := conn.Invoke(context.Background(), "/ratekit.test.Echo/Say", wrapperspb.String("complete this"),
			new(wrapperspb.StringValue), grpc.Header(&header))
		fmt.Println(status.Code(err), "retry-after:", header.Get("retry-after"))
	}
	call()
	// the charge lands in the background once the call is done
	for p, err := limiter.Peek(context.Background(), tokens, "apikey:demo"); err == nil && p.Allowed; p, err = limiter.Peek(context.Background(), tokens, "apikey:demo") {
		time.Sleep(time.Millisecond)
	}
	call()
	// Output:
	// OK retry-after: []
	// ResourceExhausted retry-after: [31]
}
