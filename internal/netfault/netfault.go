// Package netfault puts a fault-injecting TCP proxy between a client and
// a server for tests: toxiproxy, run in the test's own process on a free
// loopback port, which adds to every connection through it the faults a
// network causes (late replies, black holes, resets) while every process
// stays alive.
package netfault

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

// Proxy is a toxiproxy proxy to one server.
type Proxy struct{ p *toxiproxy.Proxy }

// Start starts a proxy to upstream (host:port) on a free loopback port. It
// stops when the test ends, if it still runs.
func Start(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "netfault", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Stop)
	return &Proxy{p}
}

// Addr is the address clients dial to reach the server through the proxy.
func (p *Proxy) Addr() string { return p.p.Listen }

// Stop closes the proxy's listener and every connection through it. It is
// idempotent.
func (p *Proxy) Stop() { p.p.Stop() }

// Fault is a toxic, as toxiproxy's HTTP API takes it.
type Fault struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream"` // "upstream" (to the server) or "downstream"
	Attributes map[string]any `json:"attributes"`
}

// Latency is a fault that delays every reply of the server by d, give or
// take jitter (downstream: the commands reach the server at once).
func Latency(d, jitter time.Duration) Fault {
	return Fault{"latency", "latency", "downstream", map[string]any{
		"latency": d.Milliseconds(), "jitter": jitter.Milliseconds()}}
}

// Inject adds f to every connection through the proxy, those open and
// those to come, and returns once each open one has it.
func (p *Proxy) Inject(tb testing.TB, f Fault) {
	tb.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := p.p.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
		tb.Fatalf("toxiproxy: %s: %v", f.Name, err)
	}
}

// Lift removes f. Data a toxic holds back (latency) goes on at once; a
// toxic that stops data (timeout) closes its connections.
func (p *Proxy) Lift(tb testing.TB, f Fault) {
	tb.Helper()
	if err := p.p.Toxics.RemoveToxic(context.Background(), f.Name); err != nil {
		tb.Fatalf("toxiproxy: %s: %v", f.Name, err)
	}
}

// IgnoreLinks returns goleak options that ignore the goroutines of
// toxiproxy's own links, which can outlive a stopped proxy for a moment,
// blocked on a channel that nobody reads any more; the test's own
// goroutines are still checked.
func IgnoreLinks() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
	}
}
