//go:build linux

package gatewaytest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"testing"
	"time"
)

// nginxFiles returns the guide's nginx files with its example addresses
// made the test's: listen on addr, the replicas and the app where they
// run.
func nginxFiles(t *testing.T, e *edge, addr string) map[string]string {
	t.Helper()
	doc, err := Guide("gateways-nginx.md")
	if err != nil {
		t.Fatal(err)
	}
	site, err := Block(doc, "nginx")
	if err != nil {
		t.Fatal(err)
	}
	check, err := Block(doc, "nginx-check")
	if err != nil {
		t.Fatal(err)
	}
	site, err = Substitute(site,
		"listen 8000;", "listen "+addr+";",
		"server ratekit-a:8080;", "server "+e.replicas[0].HTTP+";",
		"server ratekit-b:8080;", "server "+e.replicas[1].HTTP+";",
		"server app:9000;", "server "+e.app.Addr()+";")
	if err != nil {
		t.Fatalf("the guide's nginx configuration: %v", err)
	}
	return map[string]string{"site.conf": site, "snippets/ratekit-check.conf": check}
}

// startNginx starts two nginx processes with the guide's configuration.
func startNginx(t *testing.T, e *edge) []string {
	t.Helper()
	require(t, "nginx")
	dir := t.TempDir()
	return startGateways(t, []string{"nginx-1", "nginx-2"}, func(name string) (*Proc, error) {
		addr, err := FreePort()
		if err != nil {
			return nil, err
		}
		return StartNginx(dir, name, addr, nginxFiles(t, e, addr), 1)
	})
}

// TestNginx runs the guide's configuration: two nginx processes, each
// asking two ratekit-server replicas in turn, on one redis-server.
func TestNginx(t *testing.T) {
	e := startEdge(t, "gateways-nginx.md")
	gws := startNginx(t, e)
	testGateway(t, e, gws, traits{noReplica: 500})
}

// traits is what differs between the gateways testGateway checks.
type traits struct {
	noReplica int // the gateway's status when no replica answers
	// fieldsToApp: an allowed request's rate-limit fields go to the app,
	// in its request, rather than to the client (Traefik's
	// authResponseHeaders)
	fieldsToApp bool
}

// fields returns the answer whose header holds the rate-limit fields of
// an allowed request: the client's a, or the request the app saw, s.
func (g traits) fields(a answer, s Seen) answer {
	if g.fieldsToApp {
		return answer{status: a.status, header: s.Header}
	}
	return a
}

// checkAllowed checks that every allowed request of as, which the app saw
// as seen, carried the fields of a limit of limit: a request let through
// unchecked would carry none.
func (g traits) checkAllowed(t *testing.T, as []answer, seen []Seen, limit int) {
	t.Helper()
	want := strconv.Itoa(limit)
	if g.fieldsToApp {
		for _, s := range seen {
			if s.Header.Get("X-Ratelimit-Limit") != want || s.Header.Get("Ratelimit-Policy") == "" {
				t.Errorf("the app saw an allowed request without the fields of the limit of %d: %v", limit, s.Header)
			}
		}
		return
	}
	for _, a := range as {
		if a.status == 200 && (a.header.Get("X-RateLimit-Limit") != want || a.header.Get("RateLimit-Policy") == "") {
			t.Errorf("an allowed answer without the fields of the limit of %d: %v", limit, a.header)
		}
	}
}

// testGateway checks what every gateway's guide promises, through
// gateways configured by it: limits of 10 a minute per client address
// and 3 a minute on /login, /healthz never limited.
func testGateway(t *testing.T, e *edge, gws []string, g traits) {
	t.Run("exact across gateways and replicas", func(t *testing.T) {
		awaitWindow(5 * time.Second)
		c := newClient(t)
		before, seen := e.app.Hits(), len(e.app.Seen())
		as := c.burst(gws, "GET", "/", 30)
		if n := count(t, as); n[200] != 10 || n[429] != 20 {
			t.Fatalf("30 requests at once over %d gateways: %v; want 10 passed, 20 denied\n%s", len(gws), n, counters(t, e))
		}
		if got := e.app.Hits() - before; got != 10 {
			t.Fatalf("%d requests reached the app; want 10", got)
		}
		for _, a := range as {
			if a.status == 429 {
				checkDenied(t, a, 10)
			}
		}
		g.checkAllowed(t, as, e.app.Seen()[seen:], 10)
		// a client-sent X-Forwarded-For picks no bucket of its own
		forged := c.do("GET", "http://"+gws[0]+"/", nil, "X-Forwarded-For", "203.0.113.9")
		if forged.status != 429 {
			t.Fatalf("with a forged X-Forwarded-For: %d, want 429", forged.status)
		}
	})

	t.Run("login", func(t *testing.T) {
		awaitWindow(5 * time.Second)
		c := newClient(t)
		seen := len(e.app.Seen())
		as := c.burst(gws, "POST", "/login", 9)
		if n := count(t, as); n[200] != 3 || n[429] != 6 {
			t.Fatalf("9 logins at once: %v; want 3 passed, 6 denied\n%s", n, counters(t, e))
		}
		for _, a := range as {
			if a.status == 429 {
				checkDenied(t, a, 3)
			}
		}
		// the logins counted toward the address's 10 as well
		seenGets := len(e.app.Seen())
		gets := c.burst(gws, "GET", "/", 10)
		if n := count(t, gets); n[200] != 1 {
			t.Fatalf("after 9 logins, 10 requests: %v; want 1 passed\nlogins: %s\nrequests: %s\n%s\nthe app saw: %s", n, remaining(as), remaining(gets), counters(t, e), requests(e.app.Seen()[seen:]))
		}
		g.checkAllowed(t, gets, e.app.Seen()[seenGets:], 10)
	})

	t.Run("upstream untouched", func(t *testing.T) {
		c := newClient(t)
		body := make([]byte, 300<<10)
		_, _ = rand.Read(body)
		sum := sha256.Sum256(body)
		a := c.do("POST", "http://"+gws[1]+"/upload?x=1&y=%2F", body, "X-Custom", "one", "X-Custom", "two", "Content-Type", "application/octet-stream", "Authorization", "Bearer abc")
		if a.status != 200 || a.body != "ok\n" {
			t.Fatalf("%d %q", a.status, a.body)
		}
		seen := e.app.Seen()
		s := seen[len(seen)-1]
		checkHeaders(t, g.fields(a, s), 10, 9)
		if s.Method != "POST" || s.URI != "/upload?x=1&y=%2F" || s.BodyLen != len(body) || s.BodySHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("the app saw %s %s, %d bytes %s; want POST /upload?x=1&y=%%2F, %d bytes %x", s.Method, s.URI, s.BodyLen, s.BodySHA256, len(body), sum)
		}
		for k, want := range map[string][]string{"X-Custom": {"one", "two"}, "Authorization": {"Bearer abc"}, "Content-Type": {"application/octet-stream"}} {
			if got := s.Header.Values(k); !slices.Equal(got, want) {
				t.Errorf("the app saw %s %q, want %q", k, got, want)
			}
		}
		for k := range s.Header {
			if !g.fieldsToApp && (k == "X-Ratelimit-Limit" || k == "Ratelimit" || k == "Ratelimit-Policy") {
				t.Errorf("the app saw %s", k)
			}
		}
	})

	t.Run("the app's own 403 passes", func(t *testing.T) {
		c := newClient(t)
		a := c.do("GET", "http://"+gws[0]+"/forbidden", nil)
		if a.status != 403 || a.body != "the app says no\n" {
			t.Fatalf("the app's 403: %d %q", a.status, a.body)
		}
		seen := e.app.Seen()
		checkHeaders(t, g.fields(a, seen[len(seen)-1]), 10, 9)
	})

	t.Run("healthz never limited", func(t *testing.T) {
		c := newClient(t)
		c.burst(gws, "GET", "/", 12) // the address is over its limit
		before := e.app.Hits()
		as := c.burst(gws, "GET", "/healthz", 40)
		if n := count(t, as); n[200] != 40 {
			t.Fatalf("/healthz: %v", n)
		}
		if got := e.app.Hits() - before; got != 40 {
			t.Fatalf("%d of 40 /healthz reached the app", got)
		}
		for _, a := range as {
			if a.header.Get("X-RateLimit-Limit") != "" {
				t.Fatalf("/healthz answered with rate-limit headers: %v", a.header)
			}
		}
	})

	// while Redis is away each replica keeps its share of the limit,
	// 10 / RATEKIT_REPLICAS, and the gateways ask the replicas in turn: 10
	// of 30 pass, and each answer comes within the deadline
	outage := func(t *testing.T, what string) {
		c := newClient(t)
		allowed := 0
		var slowest time.Duration
		for i := range 30 {
			a := c.do("GET", "http://"+gws[i%len(gws)]+"/", nil)
			if a.err != nil || (a.status != 200 && a.status != 429) {
				t.Fatalf("request %d with Redis %s: %d %v", i, what, a.status, a.err)
			}
			if a.status == 200 {
				allowed++
			}
			slowest = max(slowest, a.took)
		}
		t.Logf("with Redis %s: %d of 30 passed, slowest answer %v", what, allowed, slowest)
		if allowed != 10 {
			t.Errorf("with Redis %s, %d of 30 passed; want 10 (5 per replica)", what, allowed)
		}
		if slowest > timeout+time.Second {
			t.Errorf("slowest answer %v; want within the deadline (%v) and a margin", slowest, timeout)
		}
	}
	t.Run("redis killed", func(t *testing.T) {
		awaitWindow(5 * time.Second)
		e.redis.Kill(t)
		outage(t, "killed")
	})
	t.Run("redis paused", func(t *testing.T) {
		e.redis.Restart(t)
		rdb := e.redis.Client(t)
		c := newClient(t)
		deadline := time.Now().Add(15 * time.Second)
		for n, _ := rdb.DBSize(context.Background()).Result(); n == 0; n, _ = rdb.DBSize(context.Background()).Result() {
			if time.Now().After(deadline) {
				t.Fatal("the replicas are not back on Redis 15s after its restart")
			}
			c.do("GET", "http://"+gws[0]+"/", nil)
			time.Sleep(100 * time.Millisecond)
		}
		awaitWindow(15 * time.Second)
		e.redis.Pause(t)
		defer e.redis.Resume(t)
		outage(t, "paused")
	})

	t.Run("a replica down", func(t *testing.T) {
		e.redis.Resume(t)
		e.replicas[1].Stop()
		c := newClient(t)
		for i := range 12 {
			a := c.do("GET", "http://"+gws[i%len(gws)]+"/", nil)
			if a.err != nil || (a.status != 200 && a.status != 429) {
				t.Fatalf("request %d with one replica down: %d %v; want the other replica's answer", i, a.status, a.err)
			}
		}
	})
	t.Run("no replica", func(t *testing.T) {
		e.replicas[0].Stop()
		c := newClient(t)
		before := e.app.Hits()
		for i := range 4 {
			a := c.do("GET", "http://"+gws[i%len(gws)]+"/", nil)
			if a.err != nil || a.status != g.noReplica {
				t.Fatalf("request %d with no replica: %d %v; want the gateway's %d", i, a.status, a.err, g.noReplica)
			}
		}
		if e.app.Hits() != before {
			t.Fatal("with no replica, requests reached the app")
		}
	})
}
