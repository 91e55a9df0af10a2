package grpclimit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
)

// Two interceptors in one chain, a global one and one for Say alone, each
// decide on their own, and the response describes the rules of both, once:
// whether the handler sends its header itself or not.
func TestStacked(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	global := []core.Rule{fixed("global", 10, keyfuncs.Static("all"))}
	perSay := []core.Rule{fixed("say", 2, keyfuncs.Static("all"))}
	onlySay := grpclimit.WithSkip(func(_ context.Context, fullMethod string) bool { return fullMethod != sayMethod })
	conn, _ := serve(t,
		grpc.ChainUnaryInterceptor(grpclimit.MustUnaryServerInterceptor(l, global), grpclimit.MustUnaryServerInterceptor(l, perSay, onlySay)),
		grpc.ChainStreamInterceptor(grpclimit.MustStreamServerInterceptor(l, global), grpclimit.MustStreamServerInterceptor(l, perSay, onlySay)),
	)
	const bothPolicies = `"global";q=10;w=60, "say";q=2;w=60`

	for _, c := range []struct {
		text, handler, globalLeft, sayLeft string
	}{
		{setHeader, "set", "9", "1"},
		{sendHeader, "sent", "8", "0"},
	} {
		_, md, err := say(t, conn, c.text)
		if err != nil {
			t.Fatalf("Say %s: %v", c.text, err)
		}
		checkMetadata(t, "Say "+c.text, md, map[string]string{
			"x-ratelimit-limit":     "2", // the rule with the smaller share left
			"x-ratelimit-remaining": c.sayLeft,
			"x-ratelimit-reset":     "30",
			"ratelimit-policy":      bothPolicies,
			"ratelimit":             `"global";r=` + c.globalLeft + `;t=30, "say";r=` + c.sayLeft + `;t=30`,
		})
		checkHandlerHeader(t, "Say "+c.text, md, c.handler)
	}

	// the inner interceptor denies: the outer one has spent a unit
	_, md, err := say(t, conn, "hi")
	checkStatus(t, "third Say", err, codes.ResourceExhausted, `rate limit "say" exceeded: retry after 30s`)
	checkMetadata(t, "third Say", md, map[string]string{
		"x-ratelimit-limit":     "2",
		"x-ratelimit-remaining": "0",
		"x-ratelimit-reset":     "30",
		"ratelimit-policy":      bothPolicies,
		"ratelimit":             `"global";r=7;t=30, "say";r=0;t=30`,
		"retry-after":           "30",
	})

	// streams: only the global rule applies to Count
	for _, c := range []struct{ text, handler, left string }{{sendHeader, "sent", "6"}, {setHeader, "set", "5"}, {"", "", "4"}} {
		_, md, err := count(t, conn, c.text)
		if err != nil {
			t.Fatalf("Count %s: %v", c.text, err)
		}
		checkMetadata(t, "Count "+c.text, md, map[string]string{
			"x-ratelimit-limit":     "10",
			"x-ratelimit-remaining": c.left,
			"x-ratelimit-reset":     "30",
			"ratelimit-policy":      `"global";q=10;w=60`,
			"ratelimit":             `"global";r=` + c.left + `;t=30`,
		})
		checkHandlerHeader(t, "Count "+c.text, md, c.handler)
	}
}

func checkHandlerHeader(tb testing.TB, call string, md metadata.MD, want string) {
	tb.Helper()
	got := md.Get("handler")
	if want == "" && len(got) == 0 {
		return
	}
	if len(got) != 1 || got[0] != want {
		tb.Errorf("%s: the handler's own metadata %q, want %q", call, got, want)
	}
}

// A handler that sends its header before the interceptor returns still
// sends the rate-limit fields of a single interceptor.
func TestHandlerSendsHeader(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	conn, _ := serve(t, interceptors(t, l, []core.Rule{fixed("default", 5, keyfuncs.Static("all"))})...)
	_, md, err := say(t, conn, sendHeader)
	if err != nil {
		t.Fatal(err)
	}
	checkHandlerHeader(t, "Say", md, "sent")
	if got := md.Get("ratelimit"); len(got) != 1 || got[0] != `"default";r=4;t=30` {
		t.Errorf("ratelimit %q", got)
	}
	_, md, err = count(t, conn, sendHeader)
	if err != nil {
		t.Fatal(err)
	}
	checkHandlerHeader(t, "Count", md, "sent")
	if got := md.Get("ratelimit"); len(got) != 1 || got[0] != `"default";r=3;t=30` {
		t.Errorf("ratelimit %q", got)
	}
}
