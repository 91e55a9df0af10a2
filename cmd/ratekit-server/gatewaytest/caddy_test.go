//go:build linux

package gatewaytest

import (
	"testing"

	"github.com/ratekit/ratekit/cmd/ratekit-server/internal/proctest"
)

// caddyfile returns the guide's Caddyfile with its example addresses made
// the test's.
func caddyfile(t *testing.T, e *edge, addr, admin string) string {
	t.Helper()
	doc, err := Guide("gateways-caddy-forward-auth.md")
	if err != nil {
		t.Fatal(err)
	}
	cf, err := Block(doc, "caddy")
	if err != nil {
		t.Fatal(err)
	}
	cf, err = Substitute(cf,
		"admin localhost:2019", "admin "+admin,
		// on loopback alone: a wildcard bind of the port would clash with
		// the test clients' sockets on other loopback addresses
		"http://:8000 {", "http://"+addr+" {\n\tbind 127.0.0.1",
		"ratekit-a:8080 ratekit-b:8080", e.replicas[0].HTTP+" "+e.replicas[1].HTTP,
		"app:9000", e.app.Addr())
	if err != nil {
		t.Fatalf("the guide's Caddyfile: %v", err)
	}
	return cf
}

// startCaddy starts two caddy processes with the guide's Caddyfile.
func startCaddy(t *testing.T, e *edge) []string {
	t.Helper()
	require(t, "caddy")
	dir := t.TempDir()
	return startGateways(t, []string{"caddy-1", "caddy-2"}, func(name string) (*Proc, error) {
		// Caddy binds with SO_REUSEPORT: the two must differ
		addrs, err := proctest.FreePorts(2)
		if err != nil {
			return nil, err
		}
		addr, admin := addrs[0], addrs[1]
		return StartCaddy(dir, name, addr, caddyfile(t, e, addr, admin))
	})
}

// TestCaddyForwardAuth runs the guide's Caddyfile: two Debian caddy
// processes, each asking two ratekit-server replicas in turn, on one
// redis-server.
func TestCaddyForwardAuth(t *testing.T) {
	e := startEdge(t, "gateways-caddy-forward-auth.md")
	gws := startCaddy(t, e)
	testGateway(t, e, gws, traits{noReplica: 502})
}
