// Package faultproxy puts a fault-injecting TCP proxy (toxiproxy, run in
// the test's process on a loopback port) between a client and a server,
// for tests of what a network does to live processes: replies late, a
// black hole, connections reset. It is imported by tests only.
package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

// Proxy is a toxiproxy proxy to one server.
type Proxy struct{ p *toxiproxy.Proxy }

// Start starts a proxy to upstream on a free loopback port; Stop ends it.
func Start(t testing.TB, upstream string) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "faultproxy", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return &Proxy{p}
}

// Addr is the address clients dial to reach the server through the proxy.
func (f *Proxy) Addr() string { return f.p.Listen }

// Stop closes the proxy's listener and every connection through it.
func (f *Proxy) Stop() { f.p.Stop() }

// Fault is a toxic, as toxiproxy's HTTP API takes it.
type Fault struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream"` // "upstream" (to the server) or "downstream"
	Attributes map[string]any `json:"attributes"`
}

// Late is a fault that holds every reply back by ms milliseconds.
func Late(ms int) Fault {
	return Fault{"late", "latency", "downstream", map[string]any{"latency": ms, "jitter": 0}}
}

// Inject adds fault to every connection through the proxy, those open and
// those to come, and returns when each open one has it.
func (f *Proxy) Inject(t testing.TB, fault Fault) {
	t.Helper()
	b, err := json.Marshal(fault)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
		t.Fatalf("toxiproxy: %s: %v", fault.Name, err)
	}
}

// Lift removes fault. Data a toxic holds back (latency) goes on at once.
func (f *Proxy) Lift(t testing.TB, fault Fault) {
	t.Helper()
	if err := f.p.Toxics.RemoveToxic(context.Background(), fault.Name); err != nil {
		t.Fatalf("toxiproxy: %s: %v", fault.Name, err)
	}
}

// Goroutines are the goleak options of a test through a proxy: the
// goroutines running before it, and those of toxiproxy's own links, which
// can outlive a stopped proxy for a moment.
func Goroutines() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreCurrent(),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
	}
}
