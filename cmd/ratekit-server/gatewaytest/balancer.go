//go:build linux

package gatewaytest

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// Balancer stands for what puts several replicas behind the one address a
// gateway's forward auth takes (a Kubernetes Service, a load balancer): it
// passes each HTTP request, untouched, to the next backend in turn that
// accepts a connection, as a balancer passes them to the targets that are
// healthy. Each request gets a connection of its own, so that the turns
// are the requests', not the connections'. When no backend accepts, it
// closes the client's connection without an answer, as a Service with no
// endpoint refuses it: what the gateway then does is the gateway's own.
type Balancer struct {
	srv      *http.Server
	ln       net.Listener
	backends []string
	next     atomic.Uint64
	conns    []atomic.Int64 // connections passed to each backend
}

// StartBalancer starts a balancer on loopback over backends, host:port
// each.
func StartBalancer(backends ...string) (*Balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{ln: ln, backends: backends, conns: make([]atomic.Int64, len(backends))}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "backend"})
			r.Out.Host = r.In.Host
			// as they came: Rewrite starts without them, and the
			// balancer adds no hop of its own
			for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v, ok := r.In.Header[h]; ok {
					r.Out.Header[h] = v
				}
			}
		},
		Transport:    &http.Transport{DialContext: b.dial, DisableKeepAlives: true},
		ErrorHandler: hangUp,
	}
	b.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// dial connects to the next backend in turn that accepts a connection.
func (b *Balancer) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	first := b.next.Add(1)
	var last error
	for i := range uint64(len(b.backends)) {
		n := (first + i) % uint64(len(b.backends))
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, network, b.backends[n])
		if err == nil {
			b.conns[n].Add(1)
			return c, nil
		}
		last = err
	}
	return nil, last
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter, _ *http.Request, _ error) {
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		c.Close()
		return
	}
	w.WriteHeader(http.StatusBadGateway)
}

// Addr is the balancer's host:port.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// Conns returns how many connections each backend was given.
func (b *Balancer) Conns() []int64 {
	out := make([]int64, len(b.conns))
	for i := range b.conns {
		out[i] = b.conns[i].Load()
	}
	return out
}

// Close stops the balancer and closes its connections.
func (b *Balancer) Close() { b.srv.Close() }
