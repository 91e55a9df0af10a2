package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ratekit/ratekit/core"
	"github.com/ratekit/ratekit/core/adapter"
	"github.com/ratekit/ratekit/examples/internal/app"
	"github.com/ratekit/ratekit/internal/redistest"
	"github.com/ratekit/ratekit/nethttp"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestParseDefaults(t *testing.T) {
	c, err := app.Parse("test", nil, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := app.Config{
		Addr: "127.0.0.1:8080", Limit: 10, StrictLimit: 2, Period: time.Minute,
		Algorithm: core.GCRA, KeyMode: "ip", Fail: core.FailLocal,
		SentinelMaster: "mymaster", Timeout: core.DefaultTimeout,
		OTelInterval: app.DefaultOTelInterval,
		Prefix:       core.DefaultPrefix, LoginLimit: 3, LoginPassword: "open-sesame",
	}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

// TestParseWith: an app's own defaults replace the contract's, its
// environment variables still beat them, and its usage text shows them.
func TestParseWith(t *testing.T) {
	d := app.Defaults{Limit: 1000, LimitUsage: "tokens per period", KeyMode: app.KeyAPIKey, Routes: "Serves POST /v1/complete."}
	c, err := app.ParseWith("test", d, nil, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limit != 1000 || c.KeyMode != app.KeyAPIKey {
		t.Errorf("Limit, KeyMode = %d, %s; want 1000, apikey", c.Limit, c.KeyMode)
	}
	if c, err = app.ParseWith("test", d, nil, env("LIMIT", "50", "KEY", "ip"), io.Discard); err != nil || c.Limit != 50 || c.KeyMode != app.KeyIP {
		t.Errorf("LIMIT=50 KEY=ip: Limit, KeyMode = %d, %s (%v); want 50, ip", c.Limit, c.KeyMode, err)
	}
	var out strings.Builder
	if _, err := app.ParseWith("test", d, []string{"-h"}, env(), &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v", err)
	}
	for _, want := range []string{"Serves POST /v1/complete. With ADMIN_TOKEN set", "tokens per period", "(default 1000)", `(default "apikey")`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseEnvironment(t *testing.T) {
	getenv := env(
		"ADDR", ":9000", "LIMIT", "5", "STRICT_LIMIT", "1", "PERIOD", "10s",
		"ALGORITHM", "sliding-log", "KEY", "jwt", "JWT_SECRET", "s3cret",
		"TRUSTED_PROXIES", "10.0.0.0/8, 192.168.1.7", "FAIL", "closed", "METRICS", "1", "BATCH", "false", "LEASE", "true",
		"REDIS_CLUSTER_ADDRS", "10.0.0.1:7000, 10.0.0.2:7000",
		"OTEL", "1", "OTEL_INTERVAL", "30s",
	)
	c, err := app.Parse("test", []string{"-limit", "7"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"Addr", c.Addr, ":9000"},
		{"Limit (the flag beats LIMIT)", c.Limit, 7},
		{"StrictLimit", c.StrictLimit, 1},
		{"Period", c.Period, 10 * time.Second},
		{"Algorithm", c.Algorithm, core.SlidingWindowLog},
		{"KeyMode", c.KeyMode, "jwt"},
		{"JWTSecret", c.JWTSecret, "s3cret"},
		{"TrustedProxies", fmt.Sprint(c.TrustedProxies), "[10.0.0.0/8 192.168.1.7/32]"},
		{"Fail", c.Fail, core.FailClosed},
		{"Metrics", c.Metrics, true},
		{"NoBatch (BATCH=false turns batching off)", c.NoBatch, true},
		{"Lease", c.Lease, true},
		{"OTel", c.OTel, true},
		{"OTelInterval", c.OTelInterval, 30 * time.Second},
		{"RedisCluster", strings.Join(c.RedisCluster, " "), "10.0.0.1:7000 10.0.0.2:7000"},
	} {
		if f.got != f.want {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}

	getenv = env("PREFIX", "billing:", "RULES_FILE", "../../rules.yaml", "LOGIN_LIMIT", "5", "LOGIN_PASSWORD", "pw", "ADMIN_TOKEN", "tok")
	c, err = app.Parse("test", []string{"-login-limit", "4"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintln(c.Prefix, c.RulesFile, c.LoginLimit, c.LoginPassword, c.AdminToken), "billing: ../../rules.yaml 4 pw tok\n"; got != want {
		t.Errorf("Prefix, RulesFile, LoginLimit (the flag beats LOGIN_LIMIT), LoginPassword, AdminToken = %s, want %s", got, want)
	}

	getenv = env("REDIS_SENTINEL_ADDRS", "10.0.0.1:26379,10.0.0.2:26379", "REDIS_SENTINEL_MASTER", "cache", "TIMEOUT", "250ms")
	c, err = app.Parse("test", []string{"-timeout", "1s"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintln(c.RedisSentinel, c.SentinelMaster, c.Timeout), "[10.0.0.1:26379 10.0.0.2:26379] cache 1s\n"; got != want {
		t.Errorf("RedisSentinel, SentinelMaster, Timeout (the flag beats TIMEOUT) = %s, want %s", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"-limit", "0"}, nil, "-limit (LIMIT) is 0: want at least 1"},
		{nil, []string{"LIMIT", "-3"}, "-limit (LIMIT) is -3"},
		{nil, []string{"LIMIT", "ten"}, `LIMIT="ten"`},
		{[]string{"-strict-limit", "-1"}, nil, "-strict-limit (STRICT_LIMIT) is -1"},
		{[]string{"-period", "0s"}, nil, "-period (PERIOD) is 0s"},
		{[]string{"-period", "1500us"}, nil, "not a whole number of milliseconds"},
		{[]string{"-algorithm", "token-bucket"}, nil, `-algorithm (ALGORITHM) is "token-bucket"`},
		{[]string{"-key", "cookie"}, nil, `-key (KEY) is "cookie"`},
		{[]string{"-key", "jwt"}, nil, "-key jwt needs -jwt-secret (JWT_SECRET)"},
		{[]string{"-fail", "maybe"}, nil, `-fail (FAIL) is "maybe"`},
		{[]string{"-trusted-proxies", "10.0.0.0/8,300.1.1.1"}, nil, "-trusted-proxies (TRUSTED_PROXIES)"},
		{[]string{"-trusted-proxies", "10.0.0.0/40"}, nil, "-trusted-proxies (TRUSTED_PROXIES)"},
		{nil, []string{"TRUSTED_PROXIES", "0.0.0.0/0"}, `-trusted-proxies (TRUSTED_PROXIES) is "0.0.0.0/0": keyfuncs: the trusted proxies hold every address of IPv4`},
		{[]string{"-trusted-proxies", "::/0"}, nil, "hold every address of IPv6"},
		{[]string{"-addr", "8080"}, nil, "-addr (ADDR)"},
		{[]string{"-redis-cluster", "10.0.0.1"}, nil, `-redis-cluster (REDIS_CLUSTER_ADDRS) node "10.0.0.1"`},
		{[]string{"-redis", "localhost:6379", "-redis-cluster", "a:1"}, nil, "both set"},
		{[]string{"-redis-sentinel", "a:1", "-redis-cluster", "b:1"}, nil, "-redis-cluster (REDIS_CLUSTER_ADDRS) and -redis-sentinel (REDIS_SENTINEL_ADDRS) are both set"},
		{[]string{"-redis", "c:1", "-redis-sentinel", "a:1", "-redis-cluster", "b:1"}, nil, "are all set"},
		{[]string{"-redis-sentinel", "10.0.0.1"}, nil, `-redis-sentinel (REDIS_SENTINEL_ADDRS) Sentinel "10.0.0.1": want host:port`},
		{[]string{"-sentinel-master", ""}, nil, "-sentinel-master (REDIS_SENTINEL_MASTER) is empty"},
		{[]string{"-timeout", "0s"}, nil, "-timeout (TIMEOUT) is 0s"},
		{[]string{"-timeout", "-1s"}, nil, "-timeout (TIMEOUT) is -1s"},
		{nil, []string{"TIMEOUT", "soon"}, `TIMEOUT="soon"`},
		{[]string{"-redis", "http://localhost:6379"}, nil, "-redis (REDIS_URL)"},
		{[]string{"-redis", "redis://u:hunter2@localhost:6379/x"}, nil, "redis://u:xxxxx@localhost:6379/x"},
		{nil, []string{"METRICS", "yes please"}, `METRICS="yes please"`},
		{[]string{"-otel-interval", "0s"}, nil, "-otel-interval (OTEL_INTERVAL) is 0s"},
		{nil, []string{"OTEL", "maybe"}, `OTEL="maybe"`},
		{[]string{"-prefix", "a{b"}, nil, `-prefix (PREFIX) is "a{b"`},
		{[]string{"-login-limit", "0"}, nil, "-login-limit (LOGIN_LIMIT) is 0"},
		{[]string{"-rules", "no-such-file.yaml"}, nil, "-rules (RULES_FILE): open no-such-file.yaml"},
		{[]string{"-rules", "../../../README.md"}, nil, "-rules (RULES_FILE): ../../../README.md"},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{[]string{"-bogus"}, nil, "flag provided but not defined: -bogus"},
	} {
		t.Run(strings.Join(append(c.args, c.env...), " "), func(t *testing.T) {
			_, err := app.Parse("test", c.args, env(c.env...), io.Discard)
			var ue *app.UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a *UsageError", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %q, want it to mention %q", err, c.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("err = %q reveals the password", err)
			}
		})
	}
	if _, err := app.Parse("test", []string{"-h"}, env(), io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: err = %v, want flag.ErrHelp", err)
	}
}

func TestKeyFunc(t *testing.T) {
	const secret = "s3cret"
	token := func(sub, key string) string {
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": sub, "exp": time.Now().Add(time.Hour).Unix(),
		}).SignedString([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, c := range []struct {
		name   string
		cfg    app.Config
		peer   string
		header []string
		want   string
	}{
		{"ip", app.Config{KeyMode: "ip"}, "203.0.113.7:1234", nil, "ip:203.0.113.7"},
		{"ip ignores X-Forwarded-For from anyone", app.Config{KeyMode: "ip"}, "203.0.113.7:1234",
			[]string{"X-Forwarded-For", "198.51.100.1"}, "ip:203.0.113.7"},
		{"ip believes a trusted proxy", app.Config{KeyMode: "ip", TrustedProxies: trusted}, "10.1.2.3:1234",
			[]string{"X-Forwarded-For", "198.51.100.1"}, "ip:198.51.100.1"},
		{"ip ignores an untrusted proxy", app.Config{KeyMode: "ip", TrustedProxies: trusted}, "192.168.1.1:1234",
			[]string{"X-Forwarded-For", "198.51.100.1"}, "ip:192.168.1.1"},
		{"apikey", app.Config{KeyMode: "apikey"}, "203.0.113.7:1234",
			[]string{"X-API-Key", "key-1"}, "apikey:"},
		{"apikey without a key: ip", app.Config{KeyMode: "apikey"}, "203.0.113.7:1234", nil, "ip:203.0.113.7"},
		{"jwt", app.Config{KeyMode: "jwt", JWTSecret: secret}, "203.0.113.7:1234",
			[]string{"Authorization", token("alice", secret)}, "user:alice"},
		{"jwt with a forged token: ip", app.Config{KeyMode: "jwt", JWTSecret: secret}, "203.0.113.7:1234",
			[]string{"Authorization", token("alice", "guess")}, "ip:203.0.113.7"},
		{"jwt without a token: ip", app.Config{KeyMode: "jwt", JWTSecret: secret}, "203.0.113.7:1234", nil, "ip:203.0.113.7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			key, err := c.cfg.KeyFunc()
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.peer
			for i := 0; i+1 < len(c.header); i += 2 {
				r.Header.Set(c.header[i], c.header[i+1])
			}
			id, err := key(adapter.HTTPRequest(r))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(id, c.want) || strings.HasSuffix(c.want, ":") && strings.Contains(id, "key-1") {
				t.Errorf("identity %q, want %q", id, c.want)
			}
		})
	}
}

func TestRules(t *testing.T) {
	c, err := app.Parse("test", []string{"-limit", "100", "-strict-limit", "5", "-period", "1h", "-algorithm", "fixed"}, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Rules()
	if err != nil {
		t.Fatal(err)
	}
	def, strict := r.Default.Rules(), r.Strict.Rules()
	if len(def) != 1 || len(strict) != 1 || len(r.Login) != 1 {
		t.Fatalf("rules %+v: want one default, one strict and one login rule", r)
	}
	if got, want := def[0].Name+" "+def[0].Limit.String(), "default 100 per 1h0m0s (fixed)"; got != want {
		t.Errorf("default rule: %s, want %s", got, want)
	}
	if got, want := strict[0].Name+" "+strict[0].Limit.String(), "strict 5 per 1h0m0s (fixed)"; got != want {
		t.Errorf("strict rule: %s, want %s", got, want)
	}
	if got, want := r.Login[0].Name+" "+r.Login[0].Limit.String(), "login 3 per 1h0m0s (fixed)"; got != want {
		t.Errorf("login rule: %s, want %s", got, want)
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
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

// build is a minimal app: the default rule on every route but /metrics.
func build(l *core.Limiter, rules app.Rules, extra app.Extra) (app.Server, error) {
	mw, err := nethttp.New(l, nil, nethttp.WithRuleSet(rules.Default))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})))
	if extra.Metrics != nil {
		mux.Handle("GET "+app.MetricsPath, extra.Metrics)
	}
	return app.HTTPServer(mux), nil
}

var listenURL = regexp.MustCompile(`url=(http://\S+)`)

// run runs the app in this process until stop is called, which returns
// its exit status and log. Its store deadline is app.StoreTimeout unless
// args set -timeout: the store may be in this process, on a busy machine.
func run(t *testing.T, args ...string) (base string, stop func() (int, string)) {
	t.Helper()
	return runApp(t, append([]string{"-timeout", app.StoreTimeout.String()}, args...)...)
}

// runApp is run with the app's own default deadline.
func runApp(t *testing.T, args ...string) (base string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var log syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- app.Run(ctx, "test", append([]string{"-addr", "127.0.0.1:0"}, args...), env(), &log, build)
	}()
	var (
		once   sync.Once
		status int
	)
	stop = func() (int, string) { // may be called more than once
		once.Do(func() {
			cancel()
			status = <-code
		})
		return status, log.String()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listenURL.FindStringSubmatch(log.String()); m != nil {
			return m[1], stop
		}
		select {
		case c := <-code:
			t.Fatalf("Run returned %d before listening:\n%s", c, log.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("not listening after 30s:\n%s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// deadRedis returns the address of a loopback port that nothing listens on.
func deadRedis(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func get(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestRunFailModes checks that -fail reaches the Limiter: with Redis down,
// local still limits, open allows without limiting, closed answers 503.
func TestRunFailModes(t *testing.T) {
	for _, c := range []struct {
		fail       string
		status     int
		limit      string // X-RateLimit-Limit
		retryAfter bool
	}{
		{"local", 200, "10", false},
		{"open", 200, "10", false},
		{"closed", 503, "", true},
	} {
		t.Run(c.fail, func(t *testing.T) {
			base, stop := run(t, "-redis", "redis://"+deadRedis(t), "-fail", c.fail)
			resp := get(t, base+"/")
			code, log := stop()
			if resp.StatusCode != c.status {
				t.Errorf("status %d, want %d", resp.StatusCode, c.status)
			}
			if got := resp.Header.Get("X-RateLimit-Limit"); got != c.limit {
				t.Errorf("X-RateLimit-Limit %q, want %q", got, c.limit)
			}
			if got := resp.Header.Get("Retry-After") != ""; got != c.retryAfter {
				t.Errorf("Retry-After %q, want one: %v", resp.Header.Get("Retry-After"), c.retryAfter)
			}
			if code != 0 {
				t.Errorf("exit status %d, want 0", code)
			}
			for _, want := range []string{`msg="store: Redis" url=redis://`, "Redis does not answer yet", "fail=" + c.fail, "msg=stopped"} {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %q:\n%s", want, log)
				}
			}
		})
	}
}

// TestRunPausedRedis stops the app's Redis with SIGSTOP (connections
// accepted, no answer): with the library's deadline, which the app keeps
// by default, each of 30 requests in a row is answered by the -fail policy
// well under half a second.
func TestRunPausedRedis(t *testing.T) {
	srv := redistest.StartServer(t)
	base, stop := runApp(t, "-redis", "redis://"+srv.Addr(), "-limit", "100")
	defer stop()
	if resp := get(t, base+"/"); resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "99" {
		t.Fatalf("GET / before the pause: status %d, remaining %q", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
	srv.Pause(t)
	const limit = 250 * time.Millisecond // half of half a second
	var slowest time.Duration
	for i := range 30 {
		start := time.Now()
		resp := get(t, base+"/")
		took := time.Since(start)
		slowest = max(slowest, took)
		if resp.StatusCode != 200 {
			t.Errorf("GET / #%d with Redis stopped: status %d, want 200 (-fail local)", i+1, resp.StatusCode)
		}
		if took > limit {
			t.Errorf("GET / #%d with Redis stopped took %v, want under %v", i+1, took, limit)
		}
	}
	t.Logf("30 requests with Redis stopped: the slowest took %v", slowest)
	srv.Resume(t)
	if code, log := stop(); code != 0 {
		t.Errorf("exit status %d, want 0:\n%s", code, log)
	}
}

// TestRunLease runs an app with -lease beside one without, on one Redis:
// the leasing app's 200 requests in a row make their key hot, so it takes
// leases of several units at once, which the other app sees spent beyond
// the 200 (under 64000 a day nothing measurable refills meanwhile).
func TestRunLease(t *testing.T) {
	srv := redistest.StartServer(t)
	args := []string{"-redis", "redis://" + srv.Addr(), "-limit", "64000", "-period", "24h"}
	leasing, stopLeasing := run(t, append(args, "-lease")...)
	defer stopLeasing()
	plain, stopPlain := run(t, args...)
	defer stopPlain()
	const requests = 200
	for range requests {
		if resp := get(t, leasing+"/"); resp.StatusCode != 200 {
			t.Fatalf("GET / of the leasing app: status %d", resp.StatusCode)
		}
	}
	resp := get(t, plain+"/")
	remaining, err := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining"))
	// without leases: 64000 − 200 − 1 exactly
	if err != nil || remaining >= 64000-requests-1 || remaining < 64000-requests-1-1024 {
		t.Errorf("the other app's X-RateLimit-Remaining %q after %d leasing requests, want below %d and at most a lease (1000) below it",
			resp.Header.Get("X-RateLimit-Remaining"), requests, 64000-requests-1)
	}
	for _, stop := range []func() (int, string){stopLeasing, stopPlain} {
		if code, log := stop(); code != 0 {
			t.Errorf("exit status %d, want 0:\n%s", code, log)
		}
	}
}

// TestRunSentinel runs the app with -redis-sentinel: it finds the master
// through the Sentinels and decides there.
func TestRunSentinel(t *testing.T) {
	s := redistest.StartSentinel(t)
	base, stop := run(t, "-redis-sentinel", strings.Join(s.Addrs(), ","), "-sentinel-master", redistest.SentinelMaster)
	defer stop()
	for _, want := range []string{"9", "8"} {
		if resp := get(t, base+"/"); resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != want {
			t.Errorf("GET /: status %d, remaining %q; want 200, %s", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), want)
		}
	}
	keys, err := s.Master().Client(t).Keys(context.Background(), "ratekit:*").Result()
	if err != nil || len(keys) != 1 {
		t.Errorf("keys on the master: %v, %v; want the default rule's", keys, err)
	}
	code, log := stop()
	if code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	want := `msg="store: Redis Sentinel" sentinels=` + strings.Join(s.Addrs(), ",") + " master=mymaster"
	if !strings.Contains(log, want) {
		t.Errorf("log lacks %s:\n%s", want, log)
	}
}

// TestRunMetrics checks that -metrics gives the Limiter a collector and
// the app a /metrics handler that shows its decisions.
func TestRunMetrics(t *testing.T) {
	base, stop := run(t, "-metrics", "-limit", "1")
	for _, want := range []int{200, 429} {
		if resp := get(t, base+"/"); resp.StatusCode != want {
			t.Errorf("GET /: status %d, want %d", resp.StatusCode, want)
		}
	}
	resp, err := http.Get(base + app.MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, log := stop()
	if code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if want := `msg="Prometheus metrics" url=` + base + "/metrics"; !strings.Contains(log, want) {
		t.Errorf("log lacks %q:\n%s", want, log)
	}
	for _, want := range []string{
		`ratekit_decisions_total{degraded="false",outcome="allowed",rule="default"} 1`,
		`ratekit_decisions_total{degraded="false",outcome="denied",rule="default"} 1`,
		"process_start_time_seconds ",
	} {
		if !strings.Contains(string(body), "\n"+want) {
			t.Errorf("GET /metrics lacks %s:\n%s", want, body)
		}
	}
}

// TestRunBatch sends concurrent requests to an app with batching, the
// default, with -batch=false and with -lease: the limit holds exactly each
// way (under 5 a minute, a lease is one unit, so leasing overshoots by
// nothing).
func TestRunBatch(t *testing.T) {
	for _, batch := range []string{"-batch", "-batch=false", "-lease"} {
		t.Run(batch, func(t *testing.T) { runConcurrentRequests(t, batch) })
	}
}

// runConcurrentRequests sends 20 requests at once to an app run with arg
// under a limit of 5.
func runConcurrentRequests(t *testing.T, arg string) {
	base, stop := run(t, arg, "-limit", "5")
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		codes = map[int]int{}
	)
	for range 20 {
		wg.Go(func() {
			resp, err := http.Get(base + "/")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if code, log := stop(); code != 0 {
		t.Errorf("exit status %d, want 0:\n%s", code, log)
	}
	if codes[200] != 5 || codes[429] != 15 {
		t.Errorf("statuses %v, want 5 × 200 and 15 × 429", codes)
	}
}

func TestRunExitStatus(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "Usage: test [flags]"},
		{[]string{"-h"}, 0, "serve Prometheus metrics at /metrics"},
		{[]string{"-limit", "x"}, 2, `invalid value "x" for flag -limit`},
		{[]string{"-algorithm", "x"}, 2, "test: -algorithm (ALGORITHM) is \"x\": want gcra, fixed, sliding-log or sliding-counter\nRun test -h to see every flag."},
		{[]string{"-addr", "256.0.0.1:1"}, 1, "cannot listen"},
	} {
		var out bytes.Buffer
		if code := app.Run(context.Background(), "test", c.args, env(), &out, build); code != c.code {
			t.Errorf("%q: exit status %d, want %d", c.args, code, c.code)
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%q: output lacks %q:\n%s", c.args, c.want, out.String())
		}
	}
}

// The curl line of jwt mode carries a token that the app accepts.
func TestTryCommandJWT(t *testing.T) {
	c := app.Config{KeyMode: "jwt", JWTSecret: "s3cret"}
	cmd := app.TryCommand(c, "http://127.0.0.1:8080")
	m := regexp.MustCompile(`^curl -i -H 'Authorization: (Bearer \S+)' http://127.0.0.1:8080/strict$`).FindStringSubmatch(cmd)
	if m == nil {
		t.Fatalf("TryCommand = %q", cmd)
	}
	key, err := c.KeyFunc()
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/strict", nil)
	r.Header.Set("Authorization", m[1])
	if id, err := key(adapter.HTTPRequest(r)); err != nil || id != "user:alice" {
		t.Errorf("identity of the token: %q, %v; want user:alice", id, err)
	}
}

// Each flag not given falls back to its environment variable.
func ExampleParse() {
	getenv := func(name string) string {
		return map[string]string{"LIMIT": "100", "PERIOD": "1h", "KEY": "apikey"}[name]
	}
	c, err := app.Parse("example", []string{"-limit", "50"}, getenv, os.Stderr)
	if err != nil {
		fmt.Println(err)
		return
	}
	def, strict := c.Limits()
	fmt.Println("default:", def)
	fmt.Println("strict: ", strict)
	fmt.Println("key:    ", c.KeyMode)
	// Output:
	// default: 50 per 1h0m0s (gcra, burst 50)
	// strict:  2 per 1h0m0s (gcra, burst 2)
	// key:     apikey
}

// TestRunOTel checks that -otel gives the Limiter an OpenTelemetry
// observer whose metrics the stdout exporter writes, at the latest when
// the app stops: the interval is far longer than the test, so what it
// finds is the final export of the shutdown.
func TestRunOTel(t *testing.T) {
	base, stop := run(t, "-otel", "-otel-interval", "1h", "-limit", "1")
	for _, want := range []int{200, 429, 429} {
		if resp := get(t, base+"/"); resp.StatusCode != want {
			t.Errorf("GET /: status %d, want %d", resp.StatusCode, want)
		}
	}
	code, log := stop()
	if code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if want := `msg="OpenTelemetry metrics: a JSON line here at each export, and when stopping" every=1h0m0s`; !strings.Contains(log, want) {
		t.Errorf("log lacks %q:\n%s", want, log)
	}
	got := exportedDecisions(t, log)
	want := map[string]int64{"allowed default false": 1, "denied default false": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("exported ratekit.decisions %v, want %v; log:\n%s", got, want, log)
	}
}

// exportedDecisions returns the nonzero points of ratekit.decisions in the
// last export that the stdout exporter wrote in log, by "outcome rule
// degraded".
func exportedDecisions(t *testing.T, log string) map[string]int64 {
	t.Helper()
	var export struct {
		ScopeMetrics []struct {
			Metrics []struct {
				Name string
				Data struct {
					DataPoints []struct {
						Attributes []struct {
							Key   string
							Value struct{ Value any }
						}
						Value int64
					}
				}
			}
		}
	}
	found := false
	for line := range strings.Lines(log) {
		if strings.HasPrefix(line, "{") {
			if err := json.Unmarshal([]byte(line), &export); err != nil {
				t.Fatalf("export %s: %v", line, err)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("no export in the log:\n%s", log)
	}
	points := map[string]int64{}
	for _, sm := range export.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "ratekit.decisions" {
				continue
			}
			for _, p := range m.Data.DataPoints {
				attrs := map[string]string{}
				for _, a := range p.Attributes {
					attrs[a.Key] = fmt.Sprint(a.Value.Value)
				}
				if p.Value != 0 {
					points[attrs["outcome"]+" "+attrs["rule"]+" "+attrs["degraded"]] += p.Value
				}
			}
		}
	}
	return points
}

// The sample rules file that the README points to is one the apps load.
func TestSampleRulesFile(t *testing.T) {
	c, err := app.Parse("test", []string{"-rules", "../../rules.yaml", "-key", "jwt", "-jwt-secret", "k"}, env(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Rules()
	if err != nil {
		t.Fatal(err)
	}
	def, strict := r.Default.Rules(), r.Strict.Rules()
	if got, want := def[0].Limit.String()+"; "+strict[0].Limit.String(), "10 per 1m0s (gcra, burst 10); 2 per 1m0s (gcra, burst 2)"; got != want {
		t.Errorf("limits %s, want %s", got, want)
	}
	if def[0].LimitOf == nil {
		t.Error("the default rule has no plan limits")
	}
}
