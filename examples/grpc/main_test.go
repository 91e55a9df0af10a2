package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/examples/internal/apptest"
)

// The test binary doubles as the app: apptest runs it as a process for the
// checks of its flags; the other tests run the app in this process.
func TestMain(m *testing.M) { apptest.Main(m, main) }

func TestBadFlags(t *testing.T) {
	apptest.CheckBadFlags(t)
	for _, c := range []struct {
		args []string
		env  []string
	}{
		{args: []string{"-metrics-addr", "nope"}},
		{args: []string{"-metrics-addr"}},
		{env: []string{"METRICS_ADDR=nope"}},
	} {
		code, out := apptest.Exec(t, c.args, c.env...)
		if code != 2 || !strings.Contains(out, "-metrics-addr") {
			t.Errorf("%q %q: exit status %d, want 2 and a message naming -metrics-addr:\n%s", c.args, c.env, code, out)
		}
	}
	code, out := apptest.Exec(t, []string{"-h"})
	if code != 0 || !strings.Contains(out, "-metrics-addr address") || !strings.Contains(out, "SayHelloStrict") {
		t.Errorf("-h: exit status %d, want 0 and this app's methods and flag:\n%s", code, out)
	}
}

// running is the app running in this process.
type running struct {
	conn       *grpc.ClientConn
	metricsURL string // with -metrics
	log        *syncBuffer
	cancel     context.CancelFunc
	code       chan int
}

var (
	listening = regexp.MustCompile(`msg="grpc example listening" addr=(\S+)`)
	metricsAt = regexp.MustCompile(`msg="Prometheus metrics" url=(\S+)`)
)

// startApp runs the app with args (and -addr 127.0.0.1:0 unless they set
// it) and the environment env (NAME=value), waits until it has logged its
// start-up, and connects to it. The app stops when the test ends.
func startApp(t *testing.T, args []string, env ...string) *running {
	t.Helper()
	if !slices.Contains(args, "-addr") {
		args = append([]string{"-addr", "127.0.0.1:0"}, args...)
	}
	// the store is in this process, beside the test's other work on a
	// machine that may be busy: a call past the default 50 ms would be
	// decided by the -fail policy, which the tests' exact counts do not
	// expect
	if !slices.Contains(args, "-timeout") {
		args = append([]string{"-timeout", app.StoreTimeout.String()}, args...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &running{log: new(syncBuffer), cancel: cancel, code: make(chan int, 1)}
	getenv := func(name string) string {
		for _, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v
			}
		}
		return ""
	}
	go func() { a.code <- run(ctx, args, getenv, a.log) }()
	t.Cleanup(func() {
		cancel()
		<-a.code
		if t.Failed() {
			t.Logf("app log:\n%s", a.log)
		}
	})
	a.waitLog(t, "try it")
	addr := listening.FindStringSubmatch(a.log.String())[1]
	if m := metricsAt.FindStringSubmatch(a.log.String()); m != nil {
		a.metricsURL = m[1]
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	a.conn = conn
	return a
}

func (a *running) waitLog(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(apptest.StartTimeout)
	for !strings.Contains(a.log.String(), s) {
		select {
		case code := <-a.code:
			a.code <- code
			t.Fatalf("the app exited with status %d:\n%s", code, a.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the app did not log %q:\n%s", s, a.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop stops the app as SIGTERM would, and returns its exit status.
func (a *running) stop(t *testing.T) int {
	t.Helper()
	a.cancel()
	code := <-a.code
	a.code <- code
	return code
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// hello calls a Greeter method with name and the metadata pairs md.
func (a *running) hello(t *testing.T, method, name string, md ...string) (string, metadata.MD, error) {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), md...)
	var header metadata.MD
	out := new(wrapperspb.StringValue)
	err := a.conn.Invoke(ctx, method, wrapperspb.String(name), out, grpc.Header(&header))
	return out.GetValue(), header, err
}

// countdown calls Countdown with n, and returns what it streamed and its
// header metadata.
func (a *running) countdown(t *testing.T, n uint32) ([]string, metadata.MD) {
	t.Helper()
	s, err := a.conn.NewStream(t.Context(), &greeterDesc.Streams[0], countdown)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.UInt32(n)); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		in := new(wrapperspb.StringValue)
		if err := s.RecvMsg(in); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("Countdown: %v", err)
		}
		got = append(got, in.GetValue())
	}
	md, _ := s.Header()
	return got, md
}

func expect(t *testing.T, call string, md metadata.MD, fields map[string]string) {
	t.Helper()
	for k, want := range fields {
		got := md.Get(k)
		if want == "" && len(got) == 0 {
			continue
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s: %q, want %q", call, k, got, want)
		}
	}
}

// TestCalls runs the app with its defaults and calls every method: the
// limits of the HTTP apps' routes hold for their methods, and the health
// service and reflection are never limited.
func TestCalls(t *testing.T) {
	a := startApp(t, nil)
	for _, want := range []string{`msg="store: embedded miniredis"`, `msg=limits default="10 per 1m0s (gcra, burst 10)"`, `cmd="grpcurl -plaintext 127.0.0.1:`} {
		if !strings.Contains(a.log.String(), want) {
			t.Errorf("the start-up log lacks %s", want)
		}
	}
	const (
		defPolicy  = `"default";q=10;w=60`
		bothPolicy = `"default";q=10;w=60, "strict";q=2;w=60`
	)
	text, md, err := a.hello(t, sayHelloMethod, "alice")
	if err != nil || text != "hello from gRPC, alice" {
		t.Fatalf("SayHello: %q, %v", text, err)
	}
	expect(t, "SayHello", md, map[string]string{"x-ratelimit-limit": "10", "x-ratelimit-remaining": "9", "ratelimit-policy": defPolicy, "retry-after": ""})
	for _, remaining := range []string{"1", "0"} {
		if _, md, err = a.hello(t, strictMethod, ""); err != nil {
			t.Fatalf("SayHelloStrict: %v", err)
		}
		expect(t, "SayHelloStrict", md, map[string]string{"x-ratelimit-limit": "2", "x-ratelimit-remaining": remaining, "ratelimit-policy": bothPolicy})
	}
	_, md, err = a.hello(t, strictMethod, "")
	checkDenied(t, err, "strict")
	if r := md.Get("retry-after"); len(r) != 1 || !within(r[0], 1, 30) {
		t.Errorf("third SayHelloStrict: retry-after %q, want 1 to 30 seconds", r)
	}
	// the strict rule's denial spent nothing of the default rule's quota
	if _, md, err = a.hello(t, sayHelloMethod, ""); err != nil {
		t.Fatalf("SayHello after SayHelloStrict was denied: %v", err)
	}
	expect(t, "SayHello", md, map[string]string{"x-ratelimit-remaining": "6", "ratelimit-policy": defPolicy})
	// a stream spends one unit, whatever it streams
	got, md := a.countdown(t, 5)
	if strings.Join(got, " ") != "5 4 3 2 1" {
		t.Errorf("Countdown 5: %q", got)
	}
	expect(t, "Countdown", md, map[string]string{"x-ratelimit-remaining": "5", "ratelimit-policy": defPolicy})

	for range 12 {
		resp, err := healthpb.NewHealthClient(a.conn).Check(t.Context(), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health check: %v, %v", resp, err)
		}
		expect(t, "health check", md, map[string]string{"ratelimit": "", "x-ratelimit-limit": ""})
		checkReflection(t, a.conn)
	}
	if code := a.stop(t); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if !strings.Contains(a.log.String(), "msg=stopped") {
		t.Errorf("the log does not say the app stopped:\n%s", a.log)
	}
}

// within reports whether s is a whole number from lo to hi.
func within(s string, lo, hi int) bool {
	n, err := strconv.Atoi(s)
	return err == nil && lo <= n && n <= hi
}

// checkDenied checks that err is the answer to a call that rule denied.
func checkDenied(t *testing.T, err error, rule string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || !strings.HasPrefix(st.Message(), `rate limit "`+rule+`" exceeded: retry after `) {
		t.Fatalf("denied call: %v, want ResourceExhausted by %s", err, rule)
	}
	var retry, quota bool
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			delay := d.GetRetryDelay().AsDuration()
			retry = delay > 0 && delay <= time.Minute
		case *errdetails.QuotaFailure:
			quota = len(d.GetViolations()) == 1 && d.GetViolations()[0].GetSubject() == rule
		}
	}
	if !retry || !quota {
		t.Errorf("denied call: details %v, want a RetryInfo and a QuotaFailure of %s", st.Details(), rule)
	}
}

// checkReflection asks server reflection for the services and the
// Greeter's file.
func checkReflection(t *testing.T, conn *grpc.ClientConn) {
	t.Helper()
	s, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseSend()
	for _, req := range []*reflectionpb.ServerReflectionRequest{
		{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}},
		{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: greeterService}},
	} {
		if err := s.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := s.Recv()
		if err != nil {
			t.Fatalf("reflection: %v", err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			t.Fatalf("reflection: %s", e.GetErrorMessage())
		}
		if l := resp.GetListServicesResponse(); l != nil && !slices.ContainsFunc(l.GetService(), func(s *reflectionpb.ServiceResponse) bool { return s.GetName() == greeterService }) {
			t.Errorf("reflection lists %v, without %s", l.GetService(), greeterService)
		}
	}
}

// TestSharedRedis runs two instances of the app over one Redis in apikey
// mode: they share one limit, and write the storage keys that the HTTP apps
// write, so a fleet that mixes them shares its limits.
func TestSharedRedis(t *testing.T) {
	mr := miniredis.RunT(t)
	args := []string{"-key", "apikey", "-period", "1h"}
	a := startApp(t, append(args, "-redis", "redis://"+mr.Addr()))
	b := startApp(t, args, "REDIS_URL="+mr.Addr())
	for i, c := range []struct {
		app  *running
		deny bool
	}{{a, false}, {b, false}, {a, true}, {b, true}} {
		_, _, err := c.app.hello(t, strictMethod, "", "x-api-key", "key-1")
		if got := status.Code(err) == codes.ResourceExhausted; got != c.deny || (err != nil && !got) {
			t.Errorf("SayHelloStrict #%d with an API key: %v, want denied %v", i+1, err, c.deny)
		}
	}
	if _, md, err := b.hello(t, sayHelloMethod, ""); err != nil {
		t.Errorf("SayHello without an API key: %v", err)
	} else {
		expect(t, "SayHello without an API key (limited by IP)", md, map[string]string{"x-ratelimit-remaining": "9"})
	}
	checkKeys(t, mr, "ratekit:default:{"+apptest.APIKeyIdentity("key-1")+"}", "ratekit:default:{ip:127.0.0.1}", "ratekit:strict:{"+apptest.APIKeyIdentity("key-1")+"}")
}

// TestJWT runs the app in jwt mode: a verified token's subject is the
// identity; a forged token counts as no token, and the call is limited by
// its IP.
func TestJWT(t *testing.T) {
	mr := miniredis.RunT(t)
	a := startApp(t, []string{"-key", "jwt", "-jwt-secret", "s3cret", "-redis", mr.Addr()})
	if !strings.Contains(a.log.String(), `cmd="grpcurl -plaintext -H 'authorization: Bearer `) {
		t.Errorf("the start-up log lacks a grpcurl command with a token:\n%s", a.log)
	}
	for _, secret := range []string{"s3cret", "forged"} {
		token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := a.hello(t, sayHelloMethod, "", "authorization", "Bearer "+token); err != nil {
			t.Fatal(err)
		}
	}
	checkKeys(t, mr, "ratekit:default:{ip:127.0.0.1}", "ratekit:default:{user:alice}")
}

func checkKeys(t *testing.T, mr *miniredis.Miniredis, want ...string) {
	t.Helper()
	keys := mr.Keys() // sorted
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("keys in Redis:\n  %s\nwant\n  %s", strings.Join(keys, "\n  "), strings.Join(want, "\n  "))
	}
}

// TestFailClosed runs the app with -fail closed and a Redis that is not
// there: calls fail with Unavailable and a delay to retry after.
func TestFailClosed(t *testing.T) {
	a := startApp(t, []string{"-fail", "closed", "-redis", "127.0.0.1:1"})
	_, md, err := a.hello(t, sayHelloMethod, "")
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || len(st.Details()) != 1 {
		t.Fatalf("SayHello: %v with details %v, want Unavailable and a RetryInfo", err, st.Details())
	}
	if len(md.Get("retry-after")) != 1 {
		t.Errorf("SayHello: metadata %v, want retry-after", md)
	}
}

// TestMetrics runs the app with -metrics, sends it calls that the limits
// partly deny, and checks that /metrics, served over HTTP on its own
// address and never limited, counts every rule's decisions exactly.
func TestMetrics(t *testing.T) {
	a := startApp(t, []string{"-metrics", "-metrics-addr", "127.0.0.1:0"})
	if a.metricsURL == "" {
		t.Fatalf("the start-up log gives no metrics URL:\n%s", a.log)
	}
	// SayHelloStrict ×3: strict allows 2 and denies 1; the rules are
	// decided together, so default allows 2 and denies the third with it,
	// spending nothing. SayHello ×9: default allows 8 more (10 in all),
	// then denies 1.
	for i := range 12 {
		method, deny := strictMethod, i == 2
		if i >= 3 {
			method, deny = sayHelloMethod, i >= 11
		}
		if _, _, err := a.hello(t, method, ""); (status.Code(err) == codes.ResourceExhausted) != deny {
			t.Errorf("call %d to %s: %v, want denied %v", i+1, method, err, deny)
		}
	}
	var body string
	for range 12 {
		resp, err := http.Get(a.metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %d, %v", resp.StatusCode, err)
		}
		body = string(b)
	}
	for _, want := range []string{
		`ratekit_decisions_total{degraded="false",outcome="allowed",rule="default"} 10`,
		`ratekit_decisions_total{degraded="false",outcome="denied",rule="default"} 2`,
		`ratekit_decisions_total{degraded="false",outcome="allowed",rule="strict"} 2`,
		`ratekit_decisions_total{degraded="false",outcome="denied",rule="strict"} 1`,
		"go_goroutines ",
	} {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("GET /metrics lacks %s", want)
		}
	}
}
