//go:build linux

package gatewaytest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
	"github.com/ratekit/ratekit/internal/redistest"
)

// server is the ratekit-server binary, built once, without the race
// detector (the server's own tests run it under -race): what these tests
// check is the gateways' side.
var server string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gatewaytest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server, err = BuildServer(dir, false)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flag.Parse()
	if runsTraefik(flag.Lookup("test.run").Value.String()) {
		// here, before m.Run, a first build of Traefik (minutes) does not
		// count toward -timeout
		traefik.path, traefik.err = TraefikBinary()
		traefik.once.Do(func() {})
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runsTraefik reports whether the -run pattern run selects TestTraefik.
func runsTraefik(run string) bool {
	top, _, _ := strings.Cut(run, "/")
	ok, err := regexp.MatchString(top, "TestTraefik")
	return run == "" || ok && err == nil
}

// traefik is the Traefik binary, built (or found in the cache) once.
var traefik struct {
	once sync.Once
	path string
	err  error
}

// traefikBin returns the Traefik binary, building it if TestMain did not.
func traefikBin(t *testing.T) string {
	t.Helper()
	traefik.once.Do(func() { traefik.path, traefik.err = TraefikBinary() })
	if traefik.err != nil {
		t.Fatal(traefik.err)
	}
	return traefik.path
}

// require skips the test when a gateway is not installed, or fails it
// in CI (CI=true), where .ci/run installs it.
func require(t *testing.T, name string) string {
	t.Helper()
	p, err := Look(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return p
}

// timeout is the replicas' deadline on Redis (RATEKIT_TIMEOUT): long
// enough that a loaded machine decides every call on Redis, so that the
// counts are exact.
const timeout = time.Second

// edge is what stands behind the gateways: a redis-server, two
// ratekit-server replicas on it with a guide's limits, and the upstream.
type edge struct {
	redis    *redistest.Server
	replicas []*proctest.Proc
	app      *Upstream
}

func startEdge(t *testing.T, guide string) *edge {
	t.Helper()
	redistest.Require(t)
	doc, err := Guide(guide)
	if err != nil {
		t.Fatal(err)
	}
	limits, err := Block(doc, "ratekit")
	if err != nil {
		t.Fatal(err)
	}
	e := &edge{redis: redistest.StartServer(t), app: NewUpstream(true)}
	t.Cleanup(e.app.Close)
	dir := t.TempDir()
	proctest.WriteConfig(t, dir, map[string]string{"edge.yaml": limits})
	env := proctest.RuntimeEnv(dir)
	env["REDIS_URL"] = e.redis.Addr()
	env["RATEKIT_REPLICAS"] = "2"
	env["RATEKIT_TIMEOUT"] = timeout.String()
	for _, name := range []string{"ratekit-a", "ratekit-b"} {
		p, err := proctest.Start(name, server, env)
		if err != nil {
			t.Fatal(err)
		}
		stopAtEnd(t, name, p)
		e.replicas = append(e.replicas, p)
	}
	return e
}

// clientIPs hands out loopback source addresses, one client each: a
// bucket of its own per test.
var clientIPs atomic.Int32

// client is one client, from a loopback address of its own.
type client struct {
	ip string
	c  *http.Client
}

func newClient(t *testing.T) *client {
	t.Helper()
	n := clientIPs.Add(1)
	ip := fmt.Sprintf("127.0.%d.%d", 1+n/250, 1+n%250)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{ip: ip, c: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// answer is what a client got.
type answer struct {
	status int
	header http.Header
	body   string
	took   time.Duration
	err    error
}

func (c *client) do(method, url string, body []byte, header ...string) answer {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, r)
	if err != nil {
		return answer{err: err}
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	start := time.Now()
	resp, err := c.c.Do(req)
	if err != nil {
		return answer{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b), took: time.Since(start), err: err}
}

// burst sends n requests at once, spread over the gateways in turn, and
// returns the answers.
func (c *client) burst(gateways []string, method, path string, n int) []answer {
	out := make([]answer, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			out[i] = c.do(method, "http://"+gateways[i%len(gateways)]+path, nil)
		})
	}
	close(gate)
	wg.Wait()
	return out
}

// count returns how many answers had each status; an error fails t.
func count(t *testing.T, as []answer) map[int]int {
	t.Helper()
	m := map[int]int{}
	for _, a := range as {
		if a.err != nil {
			t.Fatalf("a request failed: %v", a.err)
		}
		m[a.status]++
	}
	return m
}

// startGateways starts a gateway process of each name, with start, and
// returns their addresses; each is stopped when the test ends, its log
// shown if the test failed. A start is tried up to three times: a port
// found free may be taken by another process before the gateway binds it.
func startGateways(t *testing.T, names []string, start func(name string) (*Proc, error)) []string {
	t.Helper()
	var addrs []string
	for _, name := range names {
		var (
			p   *Proc
			err error
		)
		for range 3 {
			if p, err = start(name); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		stopAtEnd(t, name, p)
		addrs = append(addrs, p.Addr)
	}
	return addrs
}

// stopAtEnd stops p, a process named name, when the test ends, and shows
// its log if the test failed.
func stopAtEnd(t *testing.T, name string, p interface {
	Stop()
	Log() string
}) {
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.Log())
		}
	})
}

// awaitWindow waits until the current minute has room for within: the
// limits count in windows aligned to the minute.
func awaitWindow(within time.Duration) {
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < within {
		time.Sleep(left + 200*time.Millisecond)
	}
}

// checkDenied checks a denial as the client sees it: 429, Retry-After
// within the window, the library's headers for a limit of limit.
func checkDenied(t *testing.T, a answer, limit int) {
	t.Helper()
	if a.status != 429 {
		t.Fatalf("status %d, want 429", a.status)
	}
	if ra, err := strconv.Atoi(a.header.Get("Retry-After")); err != nil || ra < 1 || ra > 60 {
		t.Errorf("Retry-After %q, want 1 to 60 seconds", a.header.Get("Retry-After"))
	}
	checkHeaders(t, a, limit, 0)
}

// checkHeaders checks the rate-limit fields of an answer: X-RateLimit-*
// and the IETF fields, for a limit of limit with remaining left.
func checkHeaders(t *testing.T, a answer, limit, remaining int) {
	t.Helper()
	h := a.header
	if got := h.Get("X-RateLimit-Limit"); got != strconv.Itoa(limit) {
		t.Errorf("X-RateLimit-Limit %q, want %d (%v)", got, limit, h)
	}
	if got := h.Get("X-RateLimit-Remaining"); got != strconv.Itoa(remaining) {
		t.Errorf("X-RateLimit-Remaining %q, want %d", got, remaining)
	}
	if r, err := strconv.Atoi(h.Get("X-RateLimit-Reset")); err != nil || r < 1 || r > 60 {
		t.Errorf("X-RateLimit-Reset %q", h.Get("X-RateLimit-Reset"))
	}
	if p := h.Get("RateLimit-Policy"); !strings.Contains(p, ";q="+strconv.Itoa(limit)+";w=60") {
		t.Errorf("RateLimit-Policy %q", p)
	}
	if s := h.Get("RateLimit"); !strings.Contains(s, ";r=") {
		t.Errorf("RateLimit %q", s)
	}
}

// remaining lists each answer's status and X-RateLimit-Remaining, for a
// failure's message.
func remaining(as []answer) string {
	var b strings.Builder
	for _, a := range as {
		fmt.Fprintf(&b, " %d/%s", a.status, a.header.Get("X-RateLimit-Remaining"))
	}
	return b.String()
}

// counters lists every key of the edge's Redis with its value and the
// ms left of its expiry, for a failure's message: what the replicas
// counted.
func counters(t *testing.T, e *edge) string {
	t.Helper()
	ctx := context.Background()
	rdb := e.redis.Client(t)
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		return "the counters: " + err.Error()
	}
	var b strings.Builder
	b.WriteString("the counters in Redis:")
	for _, k := range keys {
		v, _ := rdb.Get(ctx, k).Result()
		ttl, _ := rdb.PTTL(ctx, k).Result()
		fmt.Fprintf(&b, "\n  %q = %q, %v left", k, v, ttl)
	}
	return b.String()
}

// requests lists what the app saw, for a failure's message.
func requests(seen []Seen) string {
	var b strings.Builder
	for _, s := range seen {
		fmt.Fprintf(&b, "\n  %s %s %v", s.Method, s.URI, s.Header)
	}
	return b.String()
}
