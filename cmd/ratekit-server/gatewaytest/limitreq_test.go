//go:build linux

package gatewaytest

import (
	"testing"
)

// limitReqFiles returns docs/benchmarks-gateways.md's limit_req
// configuration, listening on addr.
func limitReqFiles(t *testing.T, app, addr string) map[string]string {
	t.Helper()
	doc, err := Guide("benchmarks-gateways.md")
	if err != nil {
		t.Fatal(err)
	}
	site, err := Block(doc, "nginx-limit-req")
	if err != nil {
		t.Fatal(err)
	}
	site, err = Substitute(site, "listen 8000;", "listen "+addr+";", "server app:9000;", "server "+app+";")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"site.conf": site}
}

// TestNginxLimitReqPerInstance measures what nginx's own limiter does
// with the guide's limit (10 a minute per address, all at once) when two
// nginx instances share the traffic: each counts in its own memory, so
// twice the limit passes, and its denials are 503s with neither
// Retry-After nor rate-limit fields. The same traffic through the guide's
// forward auth (TestNginx) passes exactly 10, as 429s with both.
func TestNginxLimitReqPerInstance(t *testing.T) {
	require(t, "nginx")
	app := NewUpstream(false)
	defer app.Close()
	dir := t.TempDir()
	gws := startGateways(t, []string{"limit-req-1", "limit-req-2"}, func(name string) (*Proc, error) {
		addr, err := FreePort()
		if err != nil {
			return nil, err
		}
		return StartNginx(dir, name, addr, limitReqFiles(t, app.Addr(), addr), 1)
	})
	for n := 1; n <= 2; n++ {
		c := newClient(t)
		as := c.burst(gws[:n], "GET", "/", 30)
		got := count(t, as)
		t.Logf("limit_req, %d instance(s), 30 requests at once: %v", n, got)
		if got[200] != 10*n || got[503] != 30-10*n {
			t.Fatalf("%d instance(s): %v; want %d passed and the rest 503", n, got, 10*n)
		}
		for _, a := range as {
			if a.status == 503 && (a.header.Get("Retry-After") != "" || a.header.Get("X-RateLimit-Limit") != "" || a.header.Get("RateLimit") != "") {
				t.Fatalf("a limit_req denial with rate-limit fields: %v", a.header)
			}
		}
	}
}
