package caddyratekit_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/ratekit/ratekit/internal/redistest"
)

// These tests run Caddy itself in the test process, from a Caddyfile, as
// caddy run does: caddy.Load, requests over loopback, caddy.Stop. Caddy
// keeps one running config per process, so they do not run in parallel.

// freeAddr returns a loopback address with a free port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// caddyLockHeartbeat is the goroutine that keeps a lock of Caddy's storage
// fresh (its tls app cleans the storage under one at start): it exits at
// its next wake, up to 5 s after the lock is released, and is Caddy's,
// not the module's.
const caddyLockHeartbeat = "github.com/caddyserver/certmagic.keepLockfileFresh"

// load adapts a Caddyfile and makes it Caddy's running config.
func load(t *testing.T, src string) {
	t.Helper()
	js, err := adapt(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := caddy.Load([]byte(js), true); err != nil {
		t.Fatalf("loading the config: %v\n%s", err, js)
	}
}

// stop stops Caddy's running config.
func stop(t *testing.T) {
	t.Helper()
	if err := caddy.Stop(); err != nil {
		t.Errorf("caddy.Stop: %v", err)
	}
}

// fetch sends a GET of url and returns the status, header and body.
func fetch(t *testing.T, c *http.Client, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// site returns a Caddyfile serving addr with the given site block body,
// without the admin endpoint and logging only errors.
func site(addr, body string) string {
	return fmt.Sprintf(`{
	admin off
	log {
		level ERROR
	}
}

http://%s {
	bind %[1]s
%s
}
`, addr, body)
}

// handle_errors shapes the 429: its handlers see the decision's
// placeholders and the error's status, and the rate-limit header fields
// set before the error stay on the answer.
func TestHandleErrors(t *testing.T) {
	_, url := redisURL(t)
	addr := freeAddr(t)
	load(t, site(addr, `
	ratekit {
		redis `+url+`
		timeout 1s
		rule default 2 1m
	}
	respond "ok"
	handle_errors 429 {
		header Content-Type application/problem+json
		respond `+"`"+`{"status":{err.status_code},"rule":"{http.ratekit.rule}","retry_after":{http.ratekit.retry_after},"detail":"{err.message}"}`+"`"+` 429
	}`))
	defer stop(t)
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	for i := range 2 {
		if status, _, body := fetch(t, c, "http://"+addr+"/"); status != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, status, body)
		}
	}
	status, header, body := fetch(t, c, "http://"+addr+"/")
	if status != http.StatusTooManyRequests {
		t.Fatalf("third request: %d %q, want 429", status, body)
	}
	if want := `{"status":429,"rule":"default","retry_after":30,"detail":"ratekit: rate limit exceeded"}`; body != want {
		t.Errorf("body\n got %s\nwant %s", body, want)
	}
	for name, want := range map[string]string{
		"Content-Type": "application/problem+json", "Retry-After": "30", "X-Ratelimit-Remaining": "0", "Ratelimit": `"default";r=0;t=60`,
	} {
		if got := header.Get(name); got != want {
			t.Errorf("%s %q, want %q", name, got, want)
		}
	}
}

// Without handle_errors Caddy answers the error's status with an empty
// body; the header fields are there all the same.
func TestDefaultErrorAnswer(t *testing.T) {
	_, url := redisURL(t)
	addr := freeAddr(t)
	load(t, site(addr, `
	ratekit {
		redis `+url+`
		timeout 1s
		rule default 1 1m
	}
	respond "ok"`))
	defer stop(t)
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	fetch(t, c, "http://"+addr+"/")
	status, header, body := fetch(t, c, "http://"+addr+"/")
	if status != http.StatusTooManyRequests || body != "" || header.Get("Retry-After") != "60" {
		t.Errorf("%d %q, Retry-After %q; want 429, empty, 60", status, body, header.Get("Retry-After"))
	}
}

// clientStats returns what redis-server counts of its clients: connected
// now, and connections accepted since it started.
func clientStats(t *testing.T, rdb *redis.Client) (connected, total int) {
	t.Helper()
	info, err := rdb.Info(context.Background(), "clients", "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	field := func(name string) int {
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("INFO has no %s", name)
		return 0
	}
	return field("connected_clients") - 1, field("total_connections_received") - 1 // less this client's
}

// connectedAfterClose returns how many clients redis-server counts once
// those that closed their connections are gone: it notices a close at its
// next turn of its event loop, so a count read at once may still hold
// them. It waits up to 5 s for the count to reach 0.
func connectedAfterClose(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	var connected int
	for range 100 {
		if connected, _ = clientStats(t, rdb); connected == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return connected
}

// Reloading the config keeps the Redis client (no new connections, the
// limit's count carried on), a changed limit included, and stopping Caddy
// closes every connection and ends every goroutine the module started.
func TestReloadKeepsConnectionsAndLeaksNothing(t *testing.T) {
	srv := redistest.StartServer(t)
	stats := srv.Client(t)
	url := "redis://" + srv.Addr()
	addr := freeAddr(t)
	// a connection per request: a reload shuts the old server's idle
	// connections down, and a request sent on one as it closes gets EOF,
	// which is Caddy's graceful reload, not what this test is about
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ignore := goleak.IgnoreCurrent()
	caddyLocks := goleak.IgnoreAnyFunction(caddyLockHeartbeat)

	config := func(limit int) string {
		return site(addr, fmt.Sprintf(`
	ratekit {
		redis %s
		timeout 1s
		rule default %d 1h {
			algorithm fixed
		}
		rule other 1000 1h
	}
	respond "ok"`, url, limit))
	}
	load(t, config(20))
	allowed := 0
	get := func() {
		if status, _, _ := fetch(t, c, "http://"+addr+"/"); status == 200 {
			allowed++
		}
	}
	for range 3 {
		get()
	}
	_, dialed := clientStats(t, stats)
	for i := range 10 {
		load(t, config(20+i%2)) // a reload, half of them with a changed limit
		get()
	}
	connected, total := clientStats(t, stats)
	if total != dialed {
		t.Errorf("Redis accepted %d connections during 10 reloads: the client was not kept", total-dialed)
	}
	if allowed != 13 {
		t.Errorf("%d of 13 requests allowed, want all", allowed)
	}
	// the fixed window's counter went on counting through the reloads
	n, err := stats.Get(context.Background(), "ratekit:default:{ip:127.0.0.1}").Int()
	if err != nil || n != 13 {
		t.Errorf("counter %d (%v) after 13 requests across reloads, want 13", n, err)
	}
	t.Logf("%d connections to Redis, %d dialed in all", connected, total)

	c.CloseIdleConnections()
	stop(t)
	if connected := connectedAfterClose(t, stats); connected != 0 {
		t.Errorf("%d connections to Redis left open after caddy.Stop", connected)
	}
	goleak.VerifyNone(t, ignore, caddyLocks)
}
