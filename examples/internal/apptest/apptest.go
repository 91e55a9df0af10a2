// Package apptest runs an example app as a real process in its own tests,
// and holds the checks that every app must pass.
//
// The app is the test binary itself: [Main] makes a test binary started
// with the right environment variable run the app's main instead of its
// tests. So the tests exercise the app's real flags, signals and exit
// status, without a separate go build.
package apptest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/ratekit/ratekit/examples/internal/app"
)

// runMainEnv, set to 1, makes Main run the app.
const runMainEnv = "RATEKIT_EXAMPLE_RUN_MAIN"

// StartTimeout bounds how long an app may take to start listening; the
// race detector makes starting slow.
const StartTimeout = 60 * time.Second

// Main runs main, the example app, when the test binary was started by
// [Start] or [Exec]; otherwise it runs the tests. Call it from TestMain.
func Main(m *testing.M, main func()) {
	if os.Getenv(runMainEnv) == "1" {
		main() // exits by itself
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// command returns the command that runs the app with args and env, and
// with none of the contract's variables from the tests' own environment.
func command(args, env []string) *exec.Cmd {
	skip := map[string]bool{runMainEnv: true, app.LoginPasswordEnv: true, app.AdminTokenEnv: true}
	for _, e := range app.EnvVars {
		skip[e.Env] = true
	}
	var clean []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !skip[name] {
			clean = append(clean, kv)
		}
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(clean, runMainEnv+"=1"), env...)
	cmd.SysProcAttr = sysProcAttr()
	return cmd
}

// Exec runs the app with args and env (NAME=value) to its end, and returns
// its exit status and its output.
func Exec(t testing.TB, args []string, env ...string) (code int, output string) {
	t.Helper()
	cmd := command(args, env)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("run the app: %v", err)
	return 0, ""
}

// Proc is an app running as a process.
type Proc struct {
	// URL is where the app listens, such as http://127.0.0.1:41234.
	URL string

	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // of Wait

	mu  sync.Mutex
	log strings.Builder
}

var listening = regexp.MustCompile(`msg="[^"]* example listening" url=(http://\S+)`)

// Start starts the app with args and env (NAME=value) and waits until it
// listens. Unless args set -addr, it listens on a free loopback port.
// Unless args set -timeout or env TIMEOUT, its store deadline is
// [app.StoreTimeout]: the tests run the apps next to a busy store on a
// busy machine. The process is killed when the test ends, if it still
// runs, and on Linux when the test binary dies.
func Start(t testing.TB, args []string, env ...string) *Proc {
	t.Helper()
	if !hasFlag(args, "addr") {
		args = append([]string{"-addr", "127.0.0.1:0"}, args...)
	}
	if !hasFlag(args, "timeout") && !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "TIMEOUT=") }) {
		args = append([]string{"-timeout", app.StoreTimeout.String()}, args...)
	}
	p := &Proc{cmd: command(args, env), done: make(chan struct{})}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start the app: %v", err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
			if t.Failed() {
				// how it ended, when it ended before the test did
				t.Logf("the app had ended: %v", p.err)
			}
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("app log:\n%s", p.Log())
		}
	})
	select {
	case p.URL = <-urls:
	case <-p.done:
		t.Fatalf("the app exited before listening: %v\n%s", p.err, p.Log())
	case <-time.After(StartTimeout):
		t.Fatalf("the app did not listen within %v:\n%s", StartTimeout, p.Log())
	}
	waitHealthy(t, p)
	return p
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

// waitHealthy polls /healthz until it answers 200.
func waitHealthy(t testing.TB, p *Proc) {
	t.Helper()
	deadline := time.Now().Add(StartTimeout)
	for {
		resp, err := client.Get(p.URL + app.HealthzPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = errors.New(resp.Status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /healthz: %v\n%s", err, p.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log returns what the app has logged so far.
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// WaitLog waits until the app has logged a line containing s.
func (p *Proc) WaitLog(t testing.TB, s string) {
	t.Helper()
	deadline := time.Now().Add(StartTimeout)
	for !strings.Contains(p.Log(), s) {
		select {
		case <-p.done:
			if !strings.Contains(p.Log(), s) {
				t.Fatalf("the app ended (%v) without logging %s:\n%s", p.err, s, p.Log())
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the app did not log %s within %v:\n%s", s, StartTimeout, p.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Signal sends sig to the app.
func (p *Proc) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal the app: %v", err)
	}
}

// Stop sends sig to the app, waits for it to exit, and returns its exit
// status.
func (p *Proc) Stop(t testing.TB, sig os.Signal) int {
	t.Helper()
	// A connection opened but never used would hold a graceful shutdown
	// for seconds.
	client.CloseIdleConnections()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal the app: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(app.ShutdownTimeout + 10*time.Second):
		t.Fatalf("the app did not exit after %v:\n%s", sig, p.Log())
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("wait for the app: %v", p.err)
	}
	return 0
}

// client makes the tests' requests.
var client = &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}

// Response is what Get saw.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Get requests base+path with the given header fields (name, value, name,
// value...).
func Get(t testing.TB, base, path string, header ...string) Response {
	t.Helper()
	return Do(t, http.MethodGet, base, path, header...)
}

// Do requests base+path with method and the given header fields (name,
// value, name, value...).
func Do(t testing.TB, method, base, path string, header ...string) Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the body: %v", method, path, err)
	}
	return Response{resp.StatusCode, resp.Header, string(body)}
}

// rateLimitFields are the header fields that only limited responses carry.
var rateLimitFields = []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Ratelimit-Policy", "Ratelimit", "Retry-After"}

// CheckRoutes checks the routes of an app that runs with the default
// limits (10 and 2 per minute, GCRA) and a fresh store: / and /strict are
// limited and say so in their headers, /strict answers 429 on its third
// call, and /healthz is never limited.
func CheckRoutes(t *testing.T, base string) {
	t.Helper()
	expect := func(path string, r Response, status int, fields map[string]string) {
		t.Helper()
		if r.Status != status {
			t.Errorf("GET %s: status %d, want %d; body %q", path, r.Status, status, r.Body)
		}
		for name, want := range fields {
			if got := r.Header.Get(name); got != want {
				t.Errorf("GET %s: %s: %q, want %q", path, name, got, want)
			}
		}
	}
	const (
		defPolicy  = `"default";q=10;w=60`
		bothPolicy = `"default";q=10;w=60, "strict";q=2;w=60`
	)

	r := Get(t, base, app.HealthzPath)
	expect(app.HealthzPath, r, 200, nil)
	noRateLimitFields(t, app.HealthzPath, r)

	r = Get(t, base, app.RootPath)
	expect(app.RootPath, r, 200, map[string]string{
		"X-Ratelimit-Limit":     "10",
		"X-Ratelimit-Remaining": "9",
		"Ratelimit-Policy":      defPolicy,
		"Retry-After":           "",
	})
	if got := r.Header.Get("Ratelimit"); !regexp.MustCompile(`^"default";r=9;t=\d+$`).MatchString(got) {
		t.Errorf("GET /: RateLimit %q, want \"default\";r=9;t=<seconds>", got)
	}
	if !strings.HasPrefix(r.Body, "hello from ") {
		t.Errorf("GET /: body %q", r.Body)
	}

	for i, remaining := range []string{"1", "0"} {
		r = Get(t, base, app.StrictPath)
		expect(app.StrictPath+" #"+strconv.Itoa(i+1), r, 200, map[string]string{
			"X-Ratelimit-Limit":     "2",
			"X-Ratelimit-Remaining": remaining,
			"Ratelimit-Policy":      bothPolicy,
			"Retry-After":           "",
		})
	}
	r = Get(t, base, app.StrictPath)
	expect(app.StrictPath+" #3", r, 429, map[string]string{
		"X-Ratelimit-Limit":     "2",
		"X-Ratelimit-Remaining": "0",
		"Ratelimit-Policy":      bothPolicy,
		"Content-Type":          "application/problem+json",
	})
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 30 {
		t.Errorf("GET /strict #3: Retry-After %q, want 1 to 30 seconds", r.Header.Get("Retry-After"))
	}
	if got := r.Header.Get("Ratelimit"); !strings.Contains(got, `"strict";r=0;t=`) {
		t.Errorf("GET /strict #3: RateLimit %q, want the strict rule at r=0", got)
	}

	// /healthz stays unlimited, and / is not held back by the strict rule.
	for range 12 {
		r = Get(t, base, app.HealthzPath)
		expect(app.HealthzPath, r, 200, nil)
		noRateLimitFields(t, app.HealthzPath, r)
	}
	r = Get(t, base, app.RootPath)
	expect(app.RootPath+" after /strict was limited", r, 200, map[string]string{"Ratelimit-Policy": defPolicy})
}

func noRateLimitFields(t *testing.T, path string, r Response) {
	t.Helper()
	for _, name := range rateLimitFields {
		if v := r.Header.Get(name); v != "" {
			t.Errorf("GET %s: %s: %q, want none", path, name, v)
		}
	}
}

// APIKeyIdentity returns the identity that keyfuncs.APIKey gives key.
func APIKeyIdentity(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "apikey:" + hex.EncodeToString(sum[:16])
}

// CheckBadFlags checks that the app rejects bad settings with exit status
// 2 and a message that names them.
func CheckBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{args: []string{"-limit", "-1"}, want: "-limit"},
		{args: []string{"-algorithm", "leaky"}, want: "-algorithm"},
		{args: []string{"-key", "jwt"}, want: "-jwt-secret"},
		{args: []string{"-trusted-proxies", "10.0.0.0/33"}, want: "-trusted-proxies"},
		{env: []string{"FAIL=sometimes"}, want: "-fail (FAIL)"},
		{env: []string{"PERIOD=soon"}, want: "PERIOD="},
		{args: []string{"-timeout", "0s"}, want: "-timeout (TIMEOUT)"},
		{env: []string{"TIMEOUT=soon"}, want: "TIMEOUT="},
		{args: []string{"-redis-sentinel", "10.0.0.1"}, want: "-redis-sentinel"},
		{args: []string{"-no-such-flag"}, want: "Usage:"},
	} {
		t.Run(strings.Join(append(c.args, c.env...), " "), func(t *testing.T) {
			code, out := Exec(t, c.args, c.env...)
			if code != 2 {
				t.Errorf("exit status %d, want 2; output:\n%s", code, out)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("output does not mention %q:\n%s", c.want, out)
			}
		})
	}
}

// TestRoutes starts the app with its defaults (an embedded miniredis),
// checks its start-up log and routes ([CheckRoutes]), then stops it with
// SIGTERM and checks that it shut down gracefully.
func TestRoutes(t *testing.T) {
	skipUnsupported(t)
	p := Start(t, nil)
	p.WaitLog(t, "try it")
	for _, want := range []string{`msg="store: embedded miniredis"`, `msg=limits default="10 per 1m0s (gcra, burst 10)"`, `cmd="curl -i ` + p.URL + `/strict"`} {
		if !strings.Contains(p.Log(), want) {
			t.Errorf("the start-up log lacks %s:\n%s", want, p.Log())
		}
	}
	CheckRoutes(t, p.URL)
	// more calls than the limit: /metrics is never limited, served or not
	for i := range app.DefaultLimit + 2 {
		if r := Get(t, p.URL, app.MetricsPath); r.Status != http.StatusNotFound {
			t.Fatalf("GET /metrics #%d without -metrics: status %d, want 404", i+1, r.Status)
		}
	}
	if code := p.Stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
	p.WaitLog(t, "msg=stopped")
}

// TestSharedRedis starts two instances of the app over one Redis (a
// miniredis of the test's own) in apikey mode, and checks that they share
// one limit and write exactly the storage keys that every app writes: the
// rule names and identities are the same whatever the framework, so a
// fleet mixing the apps shares its limits.
func TestSharedRedis(t *testing.T) {
	skipUnsupported(t)
	mr := miniredis.RunT(t)
	args := []string{"-key", "apikey", "-period", "1h"}
	a := Start(t, append(args, "-redis", "redis://"+mr.Addr()))
	b := Start(t, args, "REDIS_URL="+mr.Addr()) // a bare host:port, from the environment

	for i, c := range []struct {
		p    *Proc
		want int
	}{{a, 200}, {b, 200}, {a, 429}, {b, 429}} {
		if r := Get(t, c.p.URL, app.StrictPath, "X-API-Key", "key-1"); r.Status != c.want {
			t.Errorf("GET /strict #%d with an API key: status %d, want %d", i+1, r.Status, c.want)
		}
	}
	if r := Get(t, b.URL, app.RootPath); r.Status != 200 || r.Header.Get("X-Ratelimit-Remaining") != "9" {
		t.Errorf("GET / without an API key: status %d, remaining %q; want 200, 9 (limited by IP)", r.Status, r.Header.Get("X-Ratelimit-Remaining"))
	}

	var keys []string
	for _, k := range mr.Keys() {
		if !strings.HasPrefix(k, "ratekit:livepage:{fleet}") { // the live page's fleet view
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	want := []string{
		"ratekit:default:{" + APIKeyIdentity("key-1") + "}",
		"ratekit:default:{ip:127.0.0.1}",
		"ratekit:strict:{" + APIKeyIdentity("key-1") + "}",
	}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("keys in Redis:\n  %s\nwant\n  %s", strings.Join(keys, "\n  "), strings.Join(want, "\n  "))
	}
	if code := a.Stop(t, os.Interrupt); code != 0 {
		t.Errorf("exit status %d after SIGINT, want 0", code)
	}
	if code := b.Stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
}

// TestMetrics starts the app with -metrics, sends it traffic that the
// limits partly deny, and checks that GET /metrics, never limited, counts
// every rule's decisions exactly, with no client address in any label.
func TestMetrics(t *testing.T) {
	skipUnsupported(t)
	p := Start(t, []string{"-metrics"})
	p.WaitLog(t, "try it")
	if want := `msg="Prometheus metrics" url=` + p.URL + app.MetricsPath; !strings.Contains(p.Log(), want) {
		t.Errorf("the start-up log lacks %s:\n%s", want, p.Log())
	}
	// /strict ×3: default allows 3; strict allows 2 and denies 1.
	// / ×9: default allows 7 more (10 in all), then denies 2.
	for i, want := range []int{200, 200, 429} {
		if r := Get(t, p.URL, app.StrictPath); r.Status != want {
			t.Errorf("GET /strict #%d: status %d, want %d", i+1, r.Status, want)
		}
	}
	for i := range 9 {
		want := 200
		if i >= 7 {
			want = 429
		}
		if r := Get(t, p.URL, app.RootPath); r.Status != want {
			t.Errorf("GET / #%d: status %d, want %d", i+1, r.Status, want)
		}
	}
	// More scrapes than the limit: /metrics is never limited.
	var r Response
	for i := range 12 {
		r = Get(t, p.URL, app.MetricsPath)
		if r.Status != 200 {
			t.Fatalf("GET /metrics #%d: status %d, want 200; body %q", i+1, r.Status, r.Body)
		}
		noRateLimitFields(t, app.MetricsPath, r)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET /metrics: Content-Type %q, want the text format", ct)
	}
	for _, want := range []string{
		`ratekit_decisions_total{degraded="false",outcome="allowed",rule="default"} 10`,
		`ratekit_decisions_total{degraded="false",outcome="denied",rule="default"} 2`,
		`ratekit_decisions_total{degraded="false",outcome="allowed",rule="strict"} 2`,
		`ratekit_decisions_total{degraded="false",outcome="denied",rule="strict"} 1`,
		`ratekit_decisions_total{degraded="true",outcome="allowed",rule="default"} 0`,
		`ratekit_breaker_state{state="closed"} 1`,
		`ratekit_store_errors_total{kind="timeout"} 0`,
		`ratekit_store_duration_seconds_count{result="ok"} `,
		"go_goroutines ",
	} {
		if !strings.Contains(r.Body, "\n"+want) {
			t.Errorf("GET /metrics lacks %s", want)
		}
	}
	for line := range strings.Lines(r.Body) {
		if strings.HasPrefix(line, "ratekit_") && strings.Contains(line, "127.0.0.1") {
			t.Errorf("GET /metrics: a label holds the client's address: %s", line)
		}
	}
	if t.Failed() {
		t.Logf("GET /metrics:\n%s", r.Body)
	}
	if code := p.Stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
}

func skipUnsupported(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the apps are stopped with SIGTERM, which Windows lacks")
	}
}
