package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratekit/ratekit/internal/redistest"
)

// Two instances of Caddyfile on one Redis hold one limit: of 60
// concurrent requests spread over both, exactly LIMIT pass, and the others
// get 429 with Retry-After and the rate-limit fields. /healthz is never
// limited.
func TestFleetHoldsOneLimit(t *testing.T) {
	srv := redistest.StartServer(t)
	env := map[string]string{"REDIS_URL": "redis://" + srv.Addr(), "LIMIT": "5"}
	a, b := startCaddy(t, "Caddyfile", env), startCaddy(t, "Caddyfile", env)
	c := client(t)

	rs := concurrently(c, []string{a.url("/"), b.url("/any/path")}, 60, "")
	if got := count(rs); got[200] != 5 || got[429] != 55 {
		t.Fatalf("answers by status %v, want 5 × 200 and 55 × 429", got)
	}
	for _, r := range rs {
		switch r.status {
		case 200:
			if r.body != "ok" {
				t.Errorf("allowed: body %q, want ok", r.body)
			}
		case 429:
			// GCRA 5 per minute: one unit every 12 s
			if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 || s > 12 {
				t.Errorf("denied: Retry-After %q, want 1..12 seconds", r.header.Get("Retry-After"))
			}
			for name, want := range map[string]string{
				"X-Ratelimit-Limit": "5", "X-Ratelimit-Remaining": "0", "Ratelimit-Policy": `"default";q=5;w=60`,
			} {
				if got := r.header.Get(name); got != want {
					t.Errorf("denied: %s %q, want %q", name, got, want)
				}
			}
			if !strings.HasPrefix(r.header.Get("Ratelimit"), `"default";r=0;t=`) {
				t.Errorf("denied: RateLimit %q", r.header.Get("Ratelimit"))
			}
		}
	}
	for _, in := range []*instance{a, b} {
		for range 20 {
			r := get(c, in.url("/healthz"), "")
			if r.status != 200 || r.body != "ok" || r.header.Get("X-Ratelimit-Limit") != "" {
				t.Fatalf("/healthz: %d %q, X-RateLimit-Limit %q; want ok, never limited", r.status, r.body, r.header.Get("X-Ratelimit-Limit"))
			}
		}
	}
}

// Every algorithm holds its limit exactly across two instances.
func TestFleetAlgorithms(t *testing.T) {
	srv := redistest.StartServer(t)
	for _, alg := range []string{"gcra", "fixed", "sliding-log", "sliding-counter"} {
		t.Run(alg, func(t *testing.T) {
			env := map[string]string{"REDIS_URL": "redis://" + srv.Addr(), "LIMIT": "7", "PERIOD": "1h", "ALGORITHM": alg, "PREFIX": alg}
			env["UPSTREAM"] = upstream(t, nil).Listener.Addr().String()
			a, b := startCaddy(t, "gateway.Caddyfile", env), startCaddy(t, "gateway.Caddyfile", env)
			rs := concurrently(client(t), []string{a.url("/"), b.url("/")}, 40, "198.51.100.1")
			if got := count(rs); got[201] != 7 || got[429] != 33 {
				for i, r := range rs {
					if r.status != 201 && r.status != 429 {
						t.Logf("answer %d: %d %q %v (a %s/%s, b %s/%s)", i, r.status, r.body, r.header, a.addr, a.admin, b.addr, b.admin)
						break
					}
				}
				t.Errorf("answers by status %v, want 7 × 201 (the upstream's) and 33 × 429\n%s\n%s", got, a.output(), b.output())
			}
			// each run has its own identity's key: flush for the next
			if err := srv.Client(t).FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// seen is a request as the upstream received it.
type seen struct {
	method, uri, body string
	header            http.Header
}

// upstream starts an upstream that records what it receives and answers
// with a header and a body of its own.
func upstream(t *testing.T, got *[]seen) *httptest.Server {
	var mu sync.Mutex
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if got != nil {
			mu.Lock()
			*got = append(*got, seen{r.Method, r.RequestURI, string(body), r.Header.Clone()})
			mu.Unlock()
		}
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "upstream got %d bytes", len(body))
	}))
	t.Cleanup(up.Close)
	return up
}

// gateway.Caddyfile in front of an upstream: allowed requests reach it
// untouched, denied ones never do and get handle_errors' problem+json;
// /strict adds its own rule, decided with the default one all or
// nothing; /healthz is answered by Caddy, never limited.
func TestGatewayUpstream(t *testing.T) {
	srv := redistest.StartServer(t)
	var got []seen
	up := upstream(t, &got)
	env := map[string]string{"REDIS_URL": "redis://" + srv.Addr(), "LIMIT": "3", "STRICT_LIMIT": "2", "PERIOD": "1h", "UPSTREAM": up.Listener.Addr().String()}
	a, b := startCaddy(t, "gateway.Caddyfile", env), startCaddy(t, "gateway.Caddyfile", env)
	c := client(t)

	var rs []result
	for i := range 5 {
		in := []*instance{a, b}[i%2]
		body := fmt.Sprintf(`{"n":%d}`, i)
		req, err := http.NewRequest(http.MethodPost, in.url("/items/7?x=1&y=two"), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Custom", "kept "+strconv.Itoa(i))
		req.Header.Set("X-Forwarded-For", "198.51.100.2")
		rs = append(rs, do(c, req))
	}
	if got := count(rs); got[201] != 3 || got[429] != 2 {
		t.Fatalf("answers by status %v, want 3 × 201 from the upstream and 2 × 429", got)
	}
	if len(got) != 3 {
		t.Fatalf("the upstream saw %d requests, want the 3 allowed", len(got))
	}
	for i, s := range got {
		if s.method != http.MethodPost || s.uri != "/items/7?x=1&y=two" || s.body != fmt.Sprintf(`{"n":%d}`, i) ||
			s.header.Get("X-Custom") != "kept "+strconv.Itoa(i) || s.header.Get("Content-Type") != "application/json" {
			t.Errorf("upstream saw %s %s %q X-Custom %q Content-Type %q", s.method, s.uri, s.body, s.header.Get("X-Custom"), s.header.Get("Content-Type"))
		}
		if xff := s.header.Get("X-Forwarded-For"); xff != "198.51.100.2, 127.0.0.1" {
			t.Errorf("upstream saw X-Forwarded-For %q, want the client's and Caddy's peer", xff)
		}
	}
	for i, r := range rs[:3] {
		if r.body != "upstream got 7 bytes" || r.header.Get("X-Upstream") != "yes" || r.header.Get("X-Ratelimit-Remaining") != strconv.Itoa(2-i) {
			t.Errorf("allowed %d: %q X-Upstream %q X-RateLimit-Remaining %q", i, r.body, r.header.Get("X-Upstream"), r.header.Get("X-Ratelimit-Remaining"))
		}
	}
	for _, r := range rs[3:] {
		var p struct {
			Type, Title, Detail string
			Status              int
		}
		if err := json.Unmarshal([]byte(r.body), &p); err != nil {
			t.Fatalf("429 body %q: %v", r.body, err)
		}
		// GCRA 3 per hour: one unit every 20 minutes
		if p.Status != 429 || p.Title != "Too Many Requests" || p.Detail != "Retry after 1200 seconds." ||
			r.header.Get("Content-Type") != "application/problem+json" || r.header.Get("Retry-After") != "1200" {
			t.Errorf("429: %q, Content-Type %q, Retry-After %q", r.body, r.header.Get("Content-Type"), r.header.Get("Retry-After"))
		}
	}

	// /strict: the strict rule's 2, and the default's 3 spent only by
	// the requests both allow
	var strict []result
	for i := range 4 {
		strict = append(strict, get(c, []*instance{a, b}[i%2].url("/strict"), "198.51.100.3"))
	}
	if got := count(strict); got[201] != 2 || got[429] != 2 {
		t.Errorf("/strict by status %v, want 2 × 201, 2 × 429", got)
	}
	if r := strict[3]; r.header.Get("Ratelimit-Policy") != `"default";q=3;w=3600, "strict";q=2;w=3600` {
		t.Errorf("/strict RateLimit-Policy %q, want both rules", r.header.Get("Ratelimit-Policy"))
	}
	if r := get(c, a.url("/"), "198.51.100.3"); r.status != 201 || r.header.Get("X-Ratelimit-Remaining") != "0" {
		t.Errorf("after /strict's denials: %d, X-RateLimit-Remaining %q; want the default rule's last unit", r.status, r.header.Get("X-Ratelimit-Remaining"))
	}

	before := len(got)
	for range 10 {
		if r := get(c, b.url("/healthz"), "198.51.100.2"); r.status != 200 || r.body != "ok" {
			t.Fatalf("/healthz: %d %q", r.status, r.body)
		}
	}
	if len(got) != before {
		t.Errorf("/healthz reached the upstream")
	}
}

// With trusted_proxies_strict (gateway.Caddyfile) a client behind a
// trusted proxy is limited by the address the proxy appended, whatever it
// writes itself in X-Forwarded-For. Without it, Caddy takes the leftmost
// address, the client's own writing, so every request picks a new bucket:
// this measures that, and that the module warns about it.
func TestForwardedForSpoofing(t *testing.T) {
	srv := redistest.StartServer(t)
	src, err := os.ReadFile("gateway.Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	lenient := strings.Replace(string(src), "\t\ttrusted_proxies_strict\n", "", 1)
	if lenient == string(src) {
		t.Fatal("gateway.Caddyfile has no trusted_proxies_strict line")
	}
	lenientPath := t.TempDir() + "/lenient.Caddyfile"
	if err := os.WriteFile(lenientPath, []byte(lenient), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"REDIS_URL": "redis://" + srv.Addr(), "LIMIT": "3", "PERIOD": "1h", "UPSTREAM": upstream(t, nil).Listener.Addr().String()}
	c := client(t)
	allowed := map[string]int{}
	for name, config := range map[string]string{"strict": "gateway.Caddyfile", "lenient": lenientPath} {
		env["PREFIX"] = name
		in := startCaddy(t, config, env)
		for i := range 20 {
			// the client writes an address of its choice; the trusted
			// proxy (this test, on 127.0.0.1) appends the client's own
			if r := get(c, in.url("/"), fmt.Sprintf("203.0.113.%d, 198.51.100.9", i+1)); r.status == 201 {
				allowed[name]++
			}
		}
		warned := strings.Contains(in.output(), "trusted_proxies is set without trusted_proxies_strict")
		if warned != (name == "lenient") {
			t.Errorf("%s: warned about trusted_proxies_strict: %v", name, warned)
		}
	}
	t.Logf("of 20 requests from one client writing its own X-Forwarded-For, limit 3: %d allowed with trusted_proxies_strict, %d without", allowed["strict"], allowed["lenient"])
	if allowed["strict"] != 3 {
		t.Errorf("strict: %d allowed, want 3", allowed["strict"])
	}
	if allowed["lenient"] != 20 {
		t.Errorf("lenient: %d allowed; Caddy's leftmost address should let all 20 through", allowed["lenient"])
	}
}

// When Redis is killed the fail policy holds, within the deadline: by
// default each instance counts locally, its 1/REPLICAS of the limit;
// under fail closed every answer is 503 with Retry-After.
func TestRedisKilled(t *testing.T) {
	srv := redistest.StartServer(t)
	up := upstream(t, nil).Listener.Addr().String()
	env := map[string]string{"REDIS_URL": "redis://" + srv.Addr(), "LIMIT": "6", "PERIOD": "1h", "REPLICAS": "2", "UPSTREAM": up, "TIMEOUT": "50ms"}
	a, b := startCaddy(t, "gateway.Caddyfile", env), startCaddy(t, "gateway.Caddyfile", env)
	env["FAIL"], env["PREFIX"] = "closed", "closed"
	closed := startCaddy(t, "gateway.Caddyfile", env)
	c := client(t)
	for _, in := range []*instance{a, b, closed} { // connect each to Redis
		if r := get(c, in.url("/"), "198.51.100.99"); r.status != 201 {
			t.Fatalf("with Redis up: %d %q", r.status, r.body)
		}
	}
	srv.Kill(t)

	const deadline = 50 * time.Millisecond // TIMEOUT
	var rs []result
	for i := range 20 {
		rs = append(rs, get(c, []*instance{a, b}[i%2].url("/"), "198.51.100.4"))
	}
	// each instance allows ceil(6/2) = 3: the fleet its limit
	if got := count(rs); got[201] != 6 || got[429] != 14 {
		t.Errorf("fail local, Redis killed: by status %v, want 6 × 201 and 14 × 429", got)
	}
	var cs []result
	for range 10 {
		cs = append(cs, get(c, closed.url("/"), "198.51.100.4"))
	}
	if got := count(cs); got[503] != 10 {
		t.Errorf("fail closed, Redis killed: by status %v, want 10 × 503", got)
	}
	for _, r := range cs {
		if r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `"status":503`) {
			t.Errorf("fail closed: Retry-After %q, body %q", r.header.Get("Retry-After"), r.body)
			break
		}
	}
	all := append(rs, cs...)
	t.Logf("Redis killed: median answer %s, slowest %s (deadline %s)", median(all), maxTook(all), deadline)
	// a killed Redis refuses connections at once; the bound is loose
	// enough for a loaded machine and far below any network timeout
	if slowest := maxTook(all); slowest > deadline+450*time.Millisecond {
		t.Errorf("slowest answer took %s with Redis killed, want about the deadline (%s) at most", slowest, deadline)
	}
}

// When Redis stops answering (SIGSTOP: connections accepted, no reply),
// no answer waits much longer than the deadline, and once the breaker
// opens, most wait for nothing.
func TestRedisStalled(t *testing.T) {
	srv := redistest.StartServer(t)
	env := map[string]string{"REDIS_URL": "redis://" + srv.Addr(), "LIMIT": "1000", "PERIOD": "1h", "UPSTREAM": upstream(t, nil).Listener.Addr().String(), "TIMEOUT": "50ms"}
	in := startCaddy(t, "gateway.Caddyfile", env)
	c := client(t)
	if r := get(c, in.url("/"), ""); r.status != 201 {
		t.Fatalf("with Redis up: %d", r.status)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	const deadline = 50 * time.Millisecond
	var rs []result
	for range 40 {
		rs = append(rs, get(c, in.url("/"), ""))
	}
	if got := count(rs); got[201] != 40 {
		t.Errorf("Redis stalled, fail local: by status %v, want 40 × 201", got)
	}
	t.Logf("Redis stalled: median answer %s, slowest %s (deadline %s)", median(rs), maxTook(rs), deadline)
	if slowest := maxTook(rs); slowest > deadline+450*time.Millisecond {
		t.Errorf("slowest answer took %s with Redis stalled, want about the deadline (%s) at most", slowest, deadline)
	}
	if m := median(rs); m > deadline {
		t.Errorf("median answer %s with the breaker open, want well under the deadline", m)
	}
}

// Reloading both instances' configs under traffic, one with caddy reload
// and the other through the admin API's /load, loses no count: the fleet
// allows exactly its limit over the whole run. The reloads dial no new
// Redis connections and leave no goroutine behind.
func TestReloadUnderTraffic(t *testing.T) {
	srv := redistest.StartServer(t)
	stats := srv.Client(t)
	const limit = 150
	env := map[string]string{"REDIS_URL": "redis://" + srv.Addr(), "LIMIT": strconv.Itoa(limit), "PERIOD": "1h", "ALGORITHM": "fixed", "UPSTREAM": upstream(t, nil).Listener.Addr().String()}
	a, b := startCaddy(t, "gateway.Caddyfile", env), startCaddy(t, "gateway.Caddyfile", env)
	c := client(t)
	urls := []string{a.url("/"), b.url("/")}

	// warm up: the connections this traffic needs, and the goroutines
	// of a running config, then free the unit it spent
	concurrently(c, urls, 16, "198.51.100.200")
	c.CloseIdleConnections()
	profileA, profileB := a.goroutines(t), b.goroutines(t)
	_, dialed := clientStats(t, stats)

	var (
		allowed, denied, failed, cut atomic.Int64
		wg                           sync.WaitGroup
		stopTraffic                  = make(chan struct{})
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stopTraffic:
					return
				default:
				}
				switch r := get(c, urls[(w+i)%2], "198.51.100.5"); {
				case r.status == 201:
					allowed.Add(1)
				case r.status == 429:
					denied.Add(1)
				case r.err != nil:
					// an idle keep-alive connection that the old
					// config's server closed as the request went out:
					// Caddy's graceful reload, whatever the handlers
					cut.Add(1)
				default:
					failed.Add(1)
					t.Errorf("during reloads: %d %v %q", r.status, r.err, r.body)
				}
			}
		})
	}
	const reloads = 5
	for range reloads {
		a.reloadCLI(t)
		b.reloadAPI(t)
		time.Sleep(50 * time.Millisecond)
	}
	connectedBefore, total := clientStats(t, stats)
	if total-dialed >= reloads {
		t.Errorf("%d Redis connections dialed during %d reloads of each instance: the client was not kept", total-dialed, reloads)
	}
	// reloads that change the Redis URL (the same server, another
	// spelling): each makes a new client, and the old one must go
	url := env["REDIS_URL"]
	for i := range reloads {
		a.setEnv("REDIS_URL", url+[]string{"/0", ""}[i%2]) // database 0 either way
		a.reloadCLI(t)
		time.Sleep(50 * time.Millisecond)
	}
	// let the traffic run past the limit
	for allowed.Load()+denied.Load() < 3*limit {
		time.Sleep(10 * time.Millisecond)
	}
	close(stopTraffic)
	wg.Wait()
	c.CloseIdleConnections()

	t.Logf("%d allowed, %d denied, %d failed, %d cut off by the reloads (%d of instance a, %d of b)", allowed.Load(), denied.Load(), failed.Load(), cut.Load(), 2*reloads, reloads)
	// exactly the limit, less any allowed request whose answer a
	// connection closed by a reload cut off
	if got := allowed.Load(); got > limit || got < limit-cut.Load() {
		t.Errorf("%d allowed across the reloads (%d answers cut off), want exactly %d", got, cut.Load(), limit)
	}
	n, err := stats.Get(context.Background(), "ratekit:default:{ip:198.51.100.5}").Int()
	if err != nil || n != limit {
		t.Errorf("Redis's counter %d (%v), want %d", n, err, limit)
	}
	// an old config's clients close once its server has drained and
	// Caddy has cleaned it up, which may come after the traffic stops
	connected, total := clientStats(t, stats)
	for range 100 {
		if connected <= connectedBefore+2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
		connected, total = clientStats(t, stats)
	}
	t.Logf("Redis: %d connections before the reloads that change its URL, %d after, %d dialed in all", connectedBefore, connected, total)
	if connected > connectedBefore+2 {
		t.Errorf("%d connections to Redis after %d reloads that changed the URL, %d before: old clients left open", connected, reloads, connectedBefore)
	}
	// goroutines settle once the old configs' servers have drained. The
	// module's own (ratekit's and go-redis's) must not grow, nor may the
	// rest, less what Caddy keeps for a while after a reload whatever
	// the module: reverse_proxy's keep-alive connections to the upstream
	// (as many as the traffic had in flight) and the heartbeat of its
	// storage lock (5 s).
	ours := []string{"github.com/ratekit/", "github.com/redis/go-redis/"}
	caddys := []string{"net/http.(*persistConn)", "github.com/caddyserver/certmagic.keepLockfileFresh"}
	for _, in := range []struct {
		in     *instance
		before goroutineProfile
	}{{a, profileA}, {b, profileB}} {
		var now goroutineProfile
		settled := func() bool {
			return now.count(ours, nil) <= in.before.count(ours, nil) && now.count(nil, caddys) <= in.before.count(nil, caddys)
		}
		for range 100 {
			if now = in.in.goroutines(t); settled() {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !settled() {
			t.Errorf("%s: after %d reloads, %d goroutines of ratekit and go-redis (%d before), %d others (%d before)\nbefore:\n%s\nafter:\n%s",
				in.in.addr, reloads, now.count(ours, nil), in.before.count(ours, nil), now.count(nil, caddys), in.before.count(nil, caddys), in.before, now)
		}
		t.Logf("%s: %d goroutines of ratekit and go-redis, %d in all", in.in.addr, now.count(ours, nil), now.count(nil, nil))
	}
}
