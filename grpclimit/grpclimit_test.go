package grpclimit_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/grpclimit"
	"github.com/ratekit/ratekit/internal/adaptertest"
	"github.com/ratekit/ratekit/keyfuncs"
)

// rateLimitKeys are the metadata keys of the rate-limit fields.
var rateLimitKeys = []string{"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "ratelimit-policy", "ratelimit", "retry-after"}

// fixed returns a rule of rate per minute in fixed windows keyed by key: on
// an adaptertest clock, n calls leave rate-n and reset in 30s.
func fixed(name string, rate int, key core.KeyFunc) core.Rule {
	return core.Rule{Name: name, Limit: core.Limit{Rate: rate, Period: time.Minute, Algorithm: core.FixedWindow}, Key: key}
}

func clientIP(tb testing.TB, opts ...keyfuncs.IPOption) core.KeyFunc {
	tb.Helper()
	k, err := keyfuncs.IP(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// interceptors returns the server options that install both interceptors.
func interceptors(tb testing.TB, l *core.Limiter, rules []core.Rule, opts ...grpclimit.Option) []grpc.ServerOption {
	tb.Helper()
	unary, err := grpclimit.UnaryServerInterceptor(l, rules, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	stream, err := grpclimit.StreamServerInterceptor(l, rules, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}

// checkMetadata checks that md holds exactly the rate-limit fields of want,
// once each.
func checkMetadata(tb testing.TB, call string, md metadata.MD, want map[string]string) {
	tb.Helper()
	for _, k := range rateLimitKeys {
		got := md.Get(k)
		switch w, ok := want[k]; {
		case !ok && len(got) > 0:
			tb.Errorf("%s: %s: %q, want none", call, k, got)
		case ok && (len(got) != 1 || got[0] != w):
			tb.Errorf("%s: %s: %q, want %q", call, k, got, w)
		}
	}
}

// checkStatus checks err's code and message, and returns its status.
func checkStatus(tb testing.TB, call string, err error, code codes.Code, msg string) *status.Status {
	tb.Helper()
	st, ok := status.FromError(err)
	if !ok {
		tb.Fatalf("%s: %v, want a status error", call, err)
	}
	if st.Code() != code || st.Message() != msg {
		tb.Errorf("%s: %v %q, want %v %q", call, st.Code(), st.Message(), code, msg)
	}
	return st
}

// checkDetails checks that st carries exactly want, in order.
func checkDetails(tb testing.TB, call string, st *status.Status, want ...proto.Message) {
	tb.Helper()
	got := st.Details()
	if len(got) != len(want) {
		tb.Fatalf("%s: details %v, want %v", call, got, want)
	}
	for i, d := range got {
		m, ok := d.(proto.Message)
		if !ok || !proto.Equal(m, want[i]) {
			tb.Errorf("%s: detail %d is %v, want %v", call, i, d, want[i])
		}
	}
}

func retryInfo(d time.Duration) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}

func quotaFailure(rule string, limit core.Limit) *errdetails.QuotaFailure {
	return &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
		Subject: rule, Description: limit.String(), QuotaId: rule, QuotaValue: int64(limit.Capacity()),
	}}}
}

// twoPerMinute returns the rate-limit fields of a rule "default" of 2 calls
// a minute in fixed windows, with remaining left, 30s into its window; a
// denial (remaining "0" and denied) adds retry-after.
func twoPerMinute(remaining string, denied bool) map[string]string {
	f := map[string]string{
		"x-ratelimit-limit":     "2",
		"x-ratelimit-remaining": remaining,
		"x-ratelimit-reset":     "30",
		"ratelimit-policy":      `"default";q=2;w=60`,
		"ratelimit":             `"default";r=` + remaining + `;t=30`,
	}
	if denied {
		f["retry-after"] = "30"
	}
	return f
}

func TestUnary(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := fixed("default", 2, clientIP(t))
	conn, svc := serve(t, interceptors(t, l, []core.Rule{rule})...)

	for i, remaining := range []string{"1", "0"} {
		text, md, err := say(t, conn, "hi")
		if err != nil || text != "hi" {
			t.Fatalf("call %d: %q, %v", i+1, text, err)
		}
		checkMetadata(t, "allowed call", md, twoPerMinute(remaining, false))
	}
	_, md, err := say(t, conn, "hi")
	st := checkStatus(t, "third call", err, codes.ResourceExhausted, `rate limit "default" exceeded: retry after 30s`)
	checkDetails(t, "third call", st, retryInfo(30*time.Second), quotaFailure("default", rule.Limit))
	checkMetadata(t, "third call", md, twoPerMinute("0", true))
	if got := svc.handled.Load(); got != 2 {
		t.Errorf("the handler ran %d times, want 2", got)
	}
}

// A stream is decided once, when it opens: its messages spend nothing, and
// a denied stream never reaches its handler.
func TestStream(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := fixed("default", 2, clientIP(t))
	conn, svc := serve(t, interceptors(t, l, []core.Rule{rule})...)

	got, md, err := count(t, conn, "")
	if err != nil || strings.Join(got, " ") != "1 2 3" {
		t.Fatalf("first stream: %q, %v", got, err)
	}
	checkMetadata(t, "first stream", md, twoPerMinute("1", false))

	// a bidirectional stream of five messages spends one unit
	chat, err := conn.NewStream(t.Context(), &echoDesc.Streams[1], chatMethod)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := chat.SendMsg(wrapperspb.String("m")); err != nil {
			t.Fatalf("chat message %d: %v", i+1, err)
		}
		if err := chat.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatalf("chat reply %d: %v", i+1, err)
		}
	}
	if err := chat.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := chat.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
		t.Fatalf("end of chat: %v, want io.EOF", err)
	}
	md, _ = chat.Header()
	checkMetadata(t, "chat", md, twoPerMinute("0", false))

	got, md, err = count(t, conn, "")
	st := checkStatus(t, "third stream", err, codes.ResourceExhausted, `rate limit "default" exceeded: retry after 30s`)
	checkDetails(t, "third stream", st, retryInfo(30*time.Second), quotaFailure("default", rule.Limit))
	if len(got) != 0 {
		t.Errorf("third stream received %q, want nothing", got)
	}
	checkMetadata(t, "third stream", md, twoPerMinute("0", true))
	if got := svc.handled.Load(); got != 2 {
		t.Errorf("the handlers ran %d times, want 2", got)
	}
}

// The client identities that key functions read: API keys and tokens from
// the metadata, addresses from the peer and, only through trusted proxies,
// from x-forwarded-for.
func TestIdentities(t *testing.T) {
	secret := []byte("test-secret")
	apiKey, err := keyfuncs.APIKey()
	if err != nil {
		t.Fatal(err)
	}
	user, err := keyfuncs.JWTHMAC(secret)
	if err != nil {
		t.Fatal(err)
	}
	trusted, err := keyfuncs.ParsePrefixes("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	others, err := keyfuncs.ParsePrefixes("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  core.KeyFunc
		md   []string
		want string
	}{
		{"api key", apiKey, []string{"x-api-key", "key-1"}, apiKeyIdentity("key-1")},
		{"api key, named as in HTTP", apiKey, []string{"X-API-Key", "key-1"}, apiKeyIdentity("key-1")},
		{"jwt", user, []string{"authorization", "Bearer " + token(t, secret, "alice")}, "user:alice"},
		{"forged jwt", keyfuncs.First(user, clientIP(t)), []string{"authorization", "Bearer " + token(t, []byte("other"), "alice")}, "ip:127.0.0.1"},
		{"peer", clientIP(t), nil, "ip:127.0.0.1"},
		{"peer ignores x-forwarded-for", clientIP(t), []string{"x-forwarded-for", "203.0.113.7"}, "ip:127.0.0.1"},
		{"untrusted peer", clientIP(t, keyfuncs.TrustedProxies(others...)), []string{"x-forwarded-for", "203.0.113.7"}, "ip:127.0.0.1"},
		{"trusted peer", clientIP(t, keyfuncs.TrustedProxies(trusted...)), []string{"x-forwarded-for", "203.0.113.7"}, "ip:203.0.113.7"},
		{"trusted peer, spoofed hop", clientIP(t, keyfuncs.TrustedProxies(trusted...)), []string{"x-forwarded-for", "198.51.100.1, 203.0.113.7"}, "ip:203.0.113.7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _ := adaptertest.NewLimiter(t)
			ids := make(chan string, 2)
			record := func(r core.Request) (string, error) {
				id, err := tt.key(r)
				ids <- id
				return id, err
			}
			conn, _ := serve(t, interceptors(t, l, []core.Rule{fixed("default", 10, record)})...)
			if _, _, err := say(t, conn, "hi", tt.md...); err != nil {
				t.Fatal(err)
			}
			if _, _, err := count(t, conn, "", tt.md...); err != nil {
				t.Fatal(err)
			}
			for _, call := range []string{"unary", "stream"} {
				if got := <-ids; got != tt.want {
					t.Errorf("%s call: identity %q, want %q", call, got, tt.want)
				}
			}
		})
	}
}

// What key, cost and skip functions read of a call.
func TestRequest(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	type seen struct {
		method, path, route, query, header, remote string
		values                                     []string
		deadline                                   bool
	}
	got := make(chan seen, 1)
	record := func(r core.Request) (string, error) {
		_, deadline := r.Context().Deadline()
		got <- seen{r.Method(), r.Path(), r.Route(), r.Query("q"), r.Header("X-Tenant"), r.RemoteAddr(), r.HeaderValues("x-tenant"), deadline}
		return "static:all", nil
	}
	conn, _ := serve(t, interceptors(t, l, []core.Rule{fixed("default", 10, record)})...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", "acme", "x-tenant", "beta")
	if err := conn.Invoke(ctx, sayMethod, wrapperspb.String("hi"), new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.method != "POST" || s.path != sayMethod || s.route != sayMethod || s.query != "" || s.header != "acme" || !s.deadline {
		t.Errorf("request %+v, want POST, %s twice, no query, header acme and a deadline", s, sayMethod)
	}
	if strings.Join(s.values, ",") != "acme,beta" {
		t.Errorf("HeaderValues %q, want both values", s.values)
	}
	if !strings.HasPrefix(s.remote, "127.0.0.1:") {
		t.Errorf("RemoteAddr %q, want the loopback peer", s.remote)
	}
}

// The health service is never limited, nor calls that WithSkip exempts;
// they carry no rate-limit metadata.
func TestSkipped(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	opts := interceptors(t, l, []core.Rule{fixed("default", 1, keyfuncs.Static("all"))},
		grpclimit.WithSkip(func(_ context.Context, fullMethod string) bool { return fullMethod == countMethod }))
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&echoDesc, new(echo))
	registerHealth(srv)
	conn := listen(t, srv)

	for i := range 5 {
		md, err := checkHealth(t, conn)
		if err != nil {
			t.Fatalf("health check %d: %v", i+1, err)
		}
		checkMetadata(t, "health check", md, nil)
		if _, md, err := count(t, conn, ""); err != nil {
			t.Fatalf("skipped stream %d: %v", i+1, err)
		} else {
			checkMetadata(t, "skipped stream", md, nil)
		}
	}
	if err := watchHealth(t, conn); err != nil {
		t.Fatalf("health watch: %v", err)
	}
	if _, _, err := say(t, conn, "hi"); err != nil {
		t.Fatalf("first limited call: %v", err)
	}
	if _, _, err := say(t, conn, "hi"); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second limited call: %v, want ResourceExhausted", err)
	}
}

func TestFailurePolicies(t *testing.T) {
	rules := []core.Rule{fixed("default", 10, keyfuncs.Static("all"))}
	t.Run("closed", func(t *testing.T) {
		l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(core.FailClosed))
		conn, svc := serve(t, interceptors(t, l, rules)...)
		_, md, err := say(t, conn, "hi")
		st := checkStatus(t, "unary", err, codes.Unavailable, "the rate limiter cannot decide right now: retry after 1s")
		checkDetails(t, "unary", st, retryInfo(time.Second))
		checkMetadata(t, "unary", md, map[string]string{"retry-after": "1"})
		_, _, err = count(t, conn, "")
		checkStatus(t, "stream", err, codes.Unavailable, "the rate limiter cannot decide right now: retry after 1s")
		if got := svc.handled.Load(); got != 0 {
			t.Errorf("the handlers ran %d times, want never", got)
		}
	})
	t.Run("open", func(t *testing.T) {
		l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(core.FailOpen))
		conn, _ := serve(t, interceptors(t, l, rules)...)
		if _, md, err := say(t, conn, "hi"); err != nil {
			t.Fatal(err)
		} else if got := md.Get("x-ratelimit-remaining"); len(got) != 1 || got[0] != "9" {
			t.Errorf("x-ratelimit-remaining %q, want 9", got)
		}
	})
}

func TestNoIdentity(t *testing.T) {
	user, err := keyfuncs.JWTHMAC([]byte("test-secret"))
	if err != nil {
		t.Fatal(err)
	}
	rules := []core.Rule{fixed("user", 1, user), fixed("global", 5, keyfuncs.Static("all"))}
	t.Run("skip the rule", func(t *testing.T) {
		l, _ := adaptertest.NewLimiter(t)
		conn, _ := serve(t, interceptors(t, l, rules)...)
		_, md, err := say(t, conn, "hi")
		if err != nil {
			t.Fatal(err)
		}
		if got := md.Get("ratelimit-policy"); len(got) != 1 || got[0] != `"global";q=5;w=60` {
			t.Errorf("ratelimit-policy %q, want the global rule alone", got)
		}
	})
	t.Run("Unauthenticated", func(t *testing.T) {
		l, _ := adaptertest.NewLimiter(t)
		conn, svc := serve(t, interceptors(t, l, rules, grpclimit.WithNoIdentity(adapter.NoIdentity401))...)
		_, _, err := say(t, conn, "hi")
		checkStatus(t, "unary", err, codes.Unauthenticated, "the call carries no identity to rate-limit")
		_, _, err = count(t, conn, "")
		checkStatus(t, "stream", err, codes.Unauthenticated, "the call carries no identity to rate-limit")
		if got := svc.handled.Load(); got != 0 {
			t.Errorf("the handlers ran %d times, want never", got)
		}
	})
}

// A misconfigured rule fails the call with Internal, and its error stays on
// the server.
func TestMisconfigured(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := fixed("default", 10, keyfuncs.Static("all"))
	rule.Cost = func(core.Request) int { return 0 }
	logged := make(chan error, 1)
	conn, _ := serve(t, interceptors(t, l, []core.Rule{rule}, grpclimit.WithErrorHandler(
		func(_ context.Context, _ string, code codes.Code, err error) error {
			if code != codes.Internal {
				t.Errorf("error handler: code %v, want Internal", code)
			}
			logged <- err
			return nil
		}))...)
	_, md, err := say(t, conn, "hi")
	checkStatus(t, "call", err, codes.Internal, "the rate limiter failed")
	checkMetadata(t, "call", md, nil)
	if err := <-logged; !errors.Is(err, core.ErrInvalidCost) {
		t.Errorf("the error handler got %v, want ErrInvalidCost", err)
	}
}

// A call whose context ends before the decision fails with its context's
// code, Canceled or DeadlineExceeded, not Internal: the limiter did not
// fail. The error handler is told that code.
func TestCallEnded(t *testing.T) {
	for _, tc := range []struct {
		end  func(context.Context) (context.Context, context.CancelFunc)
		code codes.Code
	}{
		{func(ctx context.Context) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return ctx, cancel
		}, codes.Canceled},
		{func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithDeadline(ctx, time.Now().Add(-time.Second))
		}, codes.DeadlineExceeded},
	} {
		t.Run(tc.code.String(), func(t *testing.T) {
			l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(core.FailClosed))
			rules := []core.Rule{fixed("default", 10, keyfuncs.Static("all"))}
			end := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
				ctx, cancel := tc.end(ctx)
				defer cancel()
				return handler(ctx, req)
			}
			told := make(chan codes.Code, 1)
			limit := grpclimit.MustUnaryServerInterceptor(l, rules, grpclimit.WithErrorHandler(
				func(_ context.Context, _ string, code codes.Code, err error) error {
					if errors.Is(err, core.ErrUnavailable) {
						t.Errorf("error handler: %v, want the context's error alone", err)
					}
					told <- code
					return nil
				}))
			conn, svc := serve(t, grpc.ChainUnaryInterceptor(end, limit))
			_, _, err := say(t, conn, "hi")
			if got := status.Code(err); got != tc.code {
				t.Errorf("call: %v, want %v", err, tc.code)
			}
			if got := <-told; got != tc.code {
				t.Errorf("error handler told %v, want %v", got, tc.code)
			}
			if got := svc.handled.Load(); got != 0 {
				t.Errorf("the handler ran %d times, want never", got)
			}
		})
	}
}

func TestCustomHandlers(t *testing.T) {
	l := adaptertest.NewLimiterOver(t, adaptertest.FailingStore{}, core.WithFailurePolicy(core.FailClosed))
	denied := func(_ context.Context, fullMethod string, d core.Decision) error {
		return status.Errorf(codes.Aborted, "%s: slow down, %d rule(s) said no", fullMethod, len(d.Results))
	}
	onError := func(_ context.Context, fullMethod string, code codes.Code, err error) error {
		if code != codes.Unavailable {
			t.Errorf("error handler: code %v, want Unavailable", code)
		}
		if !errors.Is(err, core.ErrUnavailable) {
			return nil
		}
		return status.Error(codes.ResourceExhausted, fullMethod+": busy")
	}
	rules := []core.Rule{fixed("default", 1, keyfuncs.Static("all"))}
	conn, _ := serve(t, interceptors(t, l, rules, grpclimit.WithDeniedHandler(denied), grpclimit.WithErrorHandler(onError))...)
	_, md, err := say(t, conn, "hi")
	checkStatus(t, "fail closed", err, codes.ResourceExhausted, sayMethod+": busy")
	checkMetadata(t, "fail closed", md, map[string]string{"retry-after": "1"})

	m, _ := adaptertest.NewLimiter(t)
	conn, _ = serve(t, interceptors(t, m, rules, grpclimit.WithDeniedHandler(denied), grpclimit.WithErrorHandler(onError))...)
	if _, _, err := say(t, conn, "hi"); err != nil {
		t.Fatal(err)
	}
	_, md, err = say(t, conn, "hi")
	checkStatus(t, "denied", err, codes.Aborted, sayMethod+": slow down, 1 rule(s) said no")
	if got := md.Get("retry-after"); len(got) != 1 || got[0] != "30" {
		t.Errorf("denied: retry-after %q, want 30", got)
	}

	// a denied handler that returns nil leaves the default answer
	n, _ := adaptertest.NewLimiter(t)
	conn, _ = serve(t, interceptors(t, n, rules, grpclimit.WithDeniedHandler(func(context.Context, string, core.Decision) error { return nil }))...)
	_, _, _ = say(t, conn, "hi")
	_, _, err = say(t, conn, "hi")
	checkStatus(t, "denied, default answer", err, codes.ResourceExhausted, `rate limit "default" exceeded: retry after 30s`)
}

// A cost above a limit's capacity can never pass: no RetryInfo, no
// retry-after.
func TestNeverAllowed(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	rule := fixed("default", 2, keyfuncs.Static("all"))
	rule.Cost = func(core.Request) int { return 3 }
	conn, _ := serve(t, interceptors(t, l, []core.Rule{rule})...)
	_, md, err := say(t, conn, "hi")
	st := checkStatus(t, "call", err, codes.ResourceExhausted, `the call costs more than rate limit "default" allows at once: it will never be allowed`)
	checkDetails(t, "call", st, quotaFailure("default", rule.Limit))
	if got := md.Get("retry-after"); len(got) != 0 {
		t.Errorf("retry-after %q, want none", got)
	}
}

// The call's context is the one that reaches the store.
func TestContextReachesStore(t *testing.T) {
	store := &adaptertest.ContextStore{Store: adaptertest.NewMemoryStore(t, adaptertest.NewClock())}
	l := adaptertest.NewLimiterOver(t, store)
	rules := []core.Rule{fixed("default", 10, keyfuncs.Static("all"))}
	mark := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(context.WithValue(ctx, adaptertest.ContextKey{}, "marked"), req)
	}
	conn, _ := serve(t, grpc.ChainUnaryInterceptor(mark, grpclimit.MustUnaryServerInterceptor(l, rules)))
	if _, _, err := say(t, conn, "hi"); err != nil {
		t.Fatal(err)
	}
	if got := store.Seen(); got != "marked" {
		t.Errorf("the store saw %v, want the call's context", got)
	}
}

func TestInvalid(t *testing.T) {
	nilFuncs := map[string]grpclimit.Option{
		adaptertest.NilOption: nil,
		"WithSkip":            grpclimit.WithSkip(nil),
		"WithDeniedHandler":   grpclimit.WithDeniedHandler(nil),
		"WithErrorHandler":    grpclimit.WithErrorHandler(nil),
	}
	t.Run("unary", func(t *testing.T) {
		adaptertest.RejectsOptions(t, "grpclimit.UnaryServerInterceptor", grpclimit.UnaryServerInterceptor, grpclimit.MustUnaryServerInterceptor, nilFuncs)
	})
	t.Run("stream", func(t *testing.T) {
		adaptertest.RejectsOptions(t, "grpclimit.StreamServerInterceptor", grpclimit.StreamServerInterceptor, grpclimit.MustStreamServerInterceptor, nilFuncs)
	})
	l, _ := adaptertest.NewLimiter(t)
	if _, err := grpclimit.UnaryServerInterceptor(nil, []core.Rule{fixed("a", 1, keyfuncs.Static("all"))}); err == nil || !strings.HasPrefix(err.Error(), "grpclimit.UnaryServerInterceptor: ") {
		t.Errorf("nil Limiter: %v, want an error that names grpclimit.UnaryServerInterceptor", err)
	}
	if _, err := grpclimit.StreamServerInterceptor(l, nil); err == nil || !strings.HasPrefix(err.Error(), "grpclimit.StreamServerInterceptor: ") {
		t.Errorf("no rules: %v, want an error that names grpclimit.StreamServerInterceptor", err)
	}
}

func TestExceptMethods(t *testing.T) {
	skip := grpclimit.ExceptMethods(sayMethod, chatMethod)
	for _, c := range []struct {
		method string
		want   bool
	}{{sayMethod, false}, {chatMethod, false}, {countMethod, true}, {"", true}} {
		if got := skip(staticRequest{route: c.method}); got != c.want {
			t.Errorf("skip %q: %v, want %v", c.method, got, c.want)
		}
	}
}

// The QuotaFailure of a denial names the rules that denied, not those that
// had room (and, the rules being decided together, spent nothing).
func TestQuotaFailureNamesDenyingRules(t *testing.T) {
	l, _ := adaptertest.NewLimiter(t)
	tight := fixed("tight", 1, keyfuncs.Static("all"))
	conn, _ := serve(t, interceptors(t, l, []core.Rule{fixed("roomy", 10, keyfuncs.Static("all")), tight})...)
	if _, _, err := say(t, conn, "hi"); err != nil {
		t.Fatal(err)
	}
	_, md, err := say(t, conn, "hi")
	st := checkStatus(t, "second call", err, codes.ResourceExhausted, `rate limit "tight" exceeded: retry after 30s`)
	checkDetails(t, "second call", st, retryInfo(30*time.Second), quotaFailure("tight", tight.Limit))
	if got := md.Get("ratelimit"); len(got) != 1 || got[0] != `"roomy";r=9;t=30, "tight";r=0;t=30` {
		t.Errorf("ratelimit %q", got)
	}
}
